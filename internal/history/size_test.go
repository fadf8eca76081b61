package history_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestFinishKeepsTableSize checks that each pass of a finished run keeps its table's estimated
// rows and total size as the catalog has them: a plain table, a partitioned one summed over its
// leaves, one never analyzed, and one that is gone.
func TestFinishKeepsTableSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	exec(t, pool, `CREATE TABLE plain (id bigint PRIMARY KEY, body text)`)
	exec(t, pool, `INSERT INTO plain SELECT g, repeat('x', 100) FROM generate_series(1, 5000) g`)
	exec(t, pool, `CREATE TABLE "Odd name" (id bigint)`)
	// Too few rows for autovacuum to analyze it.
	exec(t, pool, `INSERT INTO "Odd name" SELECT generate_series(1, 10)`)
	exec(t, pool, `CREATE SCHEMA audit`)
	exec(t, pool, `CREATE TABLE audit.events (at date NOT NULL, id bigint) PARTITION BY RANGE (at)`)
	exec(t, pool, `CREATE TABLE audit.events_1 PARTITION OF audit.events FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')`)
	exec(t, pool, `CREATE TABLE audit.events_2 PARTITION OF audit.events FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')`)
	exec(t, pool, `INSERT INTO audit.events SELECT date '2026-01-01' + (g % 59), g FROM generate_series(1, 3000) g`)
	exec(t, pool, `ANALYZE plain`)
	// The parent's own statistics count every row again: the sum must skip them.
	exec(t, pool, `ANALYZE audit.events`)

	tables := map[string]string{"plain": "plain", "odd": "Odd name", "events": "audit.events", "gone": "nowhere", "unnamed": ""}
	res := &wire.Result{Sweep: "s", RunID: "0192a000-0000-7000-8000-0000000000aa", StopReason: wire.StopExhausted, Passes: []wire.PassResult{
		{Pass: "plain", StopReason: wire.StopExhausted, Path: "heap"},
		{Pass: "odd", StopReason: wire.StopExhausted, Path: "index"},
		{Pass: "events", StopReason: wire.StopExhausted, Path: "partitions"},
		{Pass: "gone", StopReason: wire.StopExhausted, Path: "single"},
		{Pass: "unnamed", StopReason: wire.StopExhausted, Path: "single"},
	}}
	store := history.New(pool, history.DefaultRetention)
	if err := store.Finish(ctx, res, "", tables); err != nil {
		t.Fatal(err)
	}
	runs, err := store.List(ctx, "s", 1)
	if err != nil || len(runs) != 1 || len(runs[0].Passes) != len(res.Passes) {
		t.Fatalf("%+v %v", runs, err)
	}
	got := map[string]wire.HistoryPass{}
	for _, p := range runs[0].Passes {
		got[p.Pass] = p
	}
	size := func(sql string) int64 {
		var n int64
		if err := pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name, pass string
		rows       int64
		bytes      int64
		measured   bool
	}{
		{"a plain table", "plain", 5000, size(`SELECT pg_total_relation_size('plain')`), true},
		{"a table never analyzed", "odd", -1, size(`SELECT pg_total_relation_size('"Odd name"')`), true},
		{"a partitioned table, summed over its leaves", "events", 3000,
			size(`SELECT pg_total_relation_size('audit.events_1') + pg_total_relation_size('audit.events_2')`), true},
		{"a table that is gone", "gone", 0, 0, false},
		{"a pass without a table", "unnamed", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := got[tc.pass]
			for _, want := range res.Passes {
				if want.Pass == p.Pass && want.Path != p.Path {
					t.Errorf("path %q, want %q", p.Path, want.Path)
				}
			}
			if !tc.measured {
				if p.TableRows != nil || p.TableBytes != nil {
					t.Errorf("rows %v bytes %v, want none", p.TableRows, p.TableBytes)
				}
				return
			}
			if p.TableRows == nil || p.TableBytes == nil {
				t.Fatalf("rows %v bytes %v, want both", p.TableRows, p.TableBytes)
			}
			if *p.TableRows != tc.rows || *p.TableBytes != tc.bytes || *p.TableBytes <= 0 {
				t.Errorf("rows %d bytes %d, want %d and %d", *p.TableRows, *p.TableBytes, tc.rows, tc.bytes)
			}
		})
	}
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestFinishBehindALock checks that a table another transaction holds locked (a migration, a
// VACUUM FULL) does not hold the run's record back: the row is written at once, without the
// size, and the error says why.
func TestFinishBehindALock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.URL(t)
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	exec(t, pool, `CREATE TABLE held (id bigint)`)
	holder := dbtest.Conn(t, u)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE held IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	store := history.New(pool, history.DefaultRetention)
	res := &wire.Result{Sweep: "s", RunID: "0192a000-0000-7000-8000-0000000000bb", StopReason: wire.StopExhausted,
		Passes: []wire.PassResult{{Pass: "p", StopReason: wire.StopExhausted, Path: "heap"}}}
	// Bounded, so that a measurement that waits for the lock fails here rather than hanging.
	finishCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = store.Finish(finishCtx, res, "", map[string]string{"p": "held"})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("Finish: %v, want the measurement's lock timeout (55P03)", err)
	}
	runs, err := store.List(ctx, "s", 1)
	if err != nil || len(runs) != 1 || runs[0].FinishedAt == nil || len(runs[0].Passes) != 1 {
		t.Fatalf("%+v %v, want the run recorded", runs, err)
	}
	if p := runs[0].Passes[0]; p.TableBytes != nil || p.TableRows != nil || p.Path != "heap" {
		t.Errorf("pass %+v, want it recorded without a size", p)
	}
}
