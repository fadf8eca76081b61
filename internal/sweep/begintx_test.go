package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// sendTrace records what a pool sends, one entry per round trip: a statement sent on its own,
// or the statements of a pipelined batch, in order.
type sendTrace struct {
	mu    sync.Mutex
	sends [][]string
}

func (s *sendTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends = append(s.sends, []string{data.SQL})
	return ctx
}

func (s *sendTrace) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *sendTrace) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sqls []string
	for _, q := range data.Batch.QueuedQueries {
		sqls = append(sqls, q.SQL)
	}
	s.sends = append(s.sends, sqls)
	return ctx
}

func (s *sendTrace) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (s *sendTrace) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// sendTracedPool opens a pool on u, as the API does, whose round trips st records.
func sendTracedPool(t *testing.T, u string) (*pgxpool.Pool, *sendTrace) {
	t.Helper()
	st := &sendTrace{}
	return poolTracedBy(t, u, st), st
}

// TestBatchBeginRidesAlong: a batch's BEGIN and settings go out in one round trip with the
// batch's first statement, on each access path; a batch is then two round trips, the delete's and
// the commit's.
func TestBatchBeginRidesAlong(t *testing.T) {
	t.Parallel()
	for _, path := range []sweep.Path{sweep.PathHeap, sweep.PathIndex} {
		t.Run(string(path), func(t *testing.T) {
			t.Parallel()
			pool, st := sendTracedPool(t, dbtest.URL(t))
			exec(t, pool, `CREATE TABLE ride (id bigint PRIMARY KEY, at timestamptz NOT NULL);
				CREATE INDEX ON ride (at);
				INSERT INTO ride SELECT g, now() - interval '2 days' + g * interval '1 second' FROM generate_series(1, 600) g`)
			specs := []policy.Spec{{Name: "ride", Passes: []policy.Pass{{Name: "old", Table: "ride", AgeColumn: "at", Retention: 24 * time.Hour}}}}
			r := newRunner(t, sweep.WithTestKnobs(sweep.Config{Pool: pool, Specs: specs, Settings: fixed(settings(), 100)}, path, 1, 0, false))
			st.mu.Lock()
			st.sends = nil
			st.mu.Unlock()
			res := run(t, r, "ride")
			if res.StopReason != wire.StopExhausted || res.Deleted != 600 || res.Passes[0].BatchCount < 4 {
				t.Fatalf("run: %+v (error %+v), want all 600 deleted in 4 batches or more", res, res.Error)
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			begins := 0
			for _, send := range st.sends {
				for i, sql := range send {
					if !strings.HasPrefix(sql, "BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE") {
						continue
					}
					begins++
					if i != 0 || len(send) != 5 || !strings.HasPrefix(send[4], "SELECT") && !strings.HasPrefix(send[4], "DELETE") &&
						!strings.HasPrefix(send[4], "WITH") {
						t.Errorf("a batch's begin went out as %q, want BEGIN, the session's reset, the settings and the batch's first statement", send)
					}
				}
			}
			if begins != res.Passes[0].BatchCount {
				t.Errorf("%d begins for %d batches", begins, res.Passes[0].BatchCount)
			}
		})
	}
}

// TestBatchStatementTimeoutInPipeline: the settings ride in the pipeline ahead of a batch's first
// statement, and that statement still runs under the batch's statement_timeout. The second batch
// (its first statement the delete: the first batch's is the search_path's read) meets rows whose
// condition outlasts the timeout; it is cancelled (57014) and rolled back, the first batch's
// rows gone and the slow ones kept.
func TestBatchStatementTimeoutInPipeline(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	exec(t, pool, `CREATE TABLE slow (id bigint PRIMARY KEY, at timestamptz NOT NULL);
		INSERT INTO slow SELECT g, now() - interval '2 days' FROM generate_series(1, 400) g`)
	// The rows past the first block take 0.2 s each to judge.
	first := count(t, pool, `SELECT count(*) FROM slow WHERE ctid < '(1,0)'`)
	exec(t, pool, fmt.Sprintf(`CREATE FUNCTION slow_keep(k bigint) RETURNS boolean LANGUAGE sql VOLATILE AS $$
		SELECT CASE WHEN k > %d THEN pg_sleep(0.2) IS NOT NULL ELSE true END $$`, first))
	specs := []policy.Spec{{Name: "slow", Passes: []policy.Pass{{Name: "old", Table: "slow", AgeColumn: "at", Retention: 24 * time.Hour,
		Where: "slow_keep(t.id)", AllowUnindexed: true}}}}
	st := settings()
	st.StatementTimeout = 300 * time.Millisecond
	r := newRunner(t, sweep.WithTestKnobs(sweep.Config{Pool: pool, Specs: specs, Settings: st}, sweep.PathHeap, 1, 0, false))
	res, err := r.Run(ctx, "slow", sweep.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != first || res.Error == nil || res.Error.Code != "57014" {
		t.Fatalf("deleted %d, error %+v; want the first block's %d, then the batch cancelled by its statement timeout (57014)",
			res.Deleted, res.Error, first)
	}
	if n := count(t, pool, `SELECT count(*) FROM slow`); n != 400-first {
		t.Errorf("%d rows left, want the %d past the first block: the cancelled batch rolled back", n, 400-first)
	}
}

// TestPendingTx: a transaction whose begin rides with its first statement answers that
// statement with its own result, whatever the call (a row, rows, a command tag); an error of the
// begin is the first statement's, and leaves the transaction open for a rollback.
func TestPendingTx(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	begin := []string{"BEGIN", "SELECT set_config('lock_timeout', '1500', true)"}
	for _, tc := range []struct {
		name  string
		first func(tx pgx.Tx) (string, error)
	}{
		{"a row", func(tx pgx.Tx) (string, error) {
			var v string
			err := tx.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&v)
			return v, err
		}},
		{"rows", func(tx pgx.Tx) (string, error) {
			rows, err := tx.Query(ctx, "SELECT current_setting('lock_timeout')")
			if err != nil {
				return "", err
			}
			// Read to the end and not closed: the next statement must find the connection free.
			var vs []string
			for rows.Next() {
				var v string
				if err := rows.Scan(&v); err != nil {
					return "", err
				}
				vs = append(vs, v)
			}
			return strings.Join(vs, ","), rows.Err()
		}},
		{"a command tag", func(tx pgx.Tx) (string, error) {
			tag, err := tx.Exec(ctx, "SELECT current_setting('lock_timeout') FROM generate_series(1, 3)")
			return tag.String(), err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			tx := sweep.NewPendingTx(c.Conn(), begin)
			got, err := tc.first(tx)
			if err != nil {
				t.Fatal(err)
			}
			// The next statement finds the connection free, in the transaction.
			var status string
			if err := tx.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&status); err != nil || status != "1500ms" {
				t.Fatalf("next statement: %q, %v; want 1500ms in the transaction", status, err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"a row": "1500ms", "rows": "1500ms", "a command tag": "SELECT 3"}[tc.name]; got != want {
				t.Errorf("first statement answered %q, want %q", got, want)
			}
		})
	}
	t.Run("an error of the begin", func(t *testing.T) {
		t.Parallel()
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		tx := sweep.NewPendingTx(c.Conn(), []string{"BEGIN", "SELECT set_config('lock_timeout', 'soon', true)"})
		_, err = tx.Exec(ctx, "SELECT 1")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" {
			t.Fatalf("first statement: %v, want the begin's invalid_parameter_value (22023)", err)
		}
		if s := c.Conn().PgConn().TxStatus(); s != 'E' {
			t.Fatalf("transaction status %q, want E (failed, open)", s)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if s := c.Conn().PgConn().TxStatus(); s != 'I' {
			t.Errorf("after the rollback: transaction status %q, want I", s)
		}
	})
}
