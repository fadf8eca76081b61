package sweep_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/lease"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestGuarantees holds the engine's promises that mutation testing found untested: each subtest
// names the mutant it kills.
func TestGuarantees(t *testing.T) {
	t.Parallel()

	// Mutants: lease times from time.Now(); the run's reference time from time.Now().
	t.Run("the database clock, not the process clock", func(t *testing.T) {
		t.Parallel()
		u := dbtest.URL(t)
		setup := dbtest.Conn(t, u)
		// A now() that runs 40 days behind, found before pg_catalog's on this pool's search_path.
		if _, err := setup.Exec(ctx, `CREATE FUNCTION public.now() RETURNS timestamptz STABLE
			LANGUAGE sql AS $$ SELECT pg_catalog.now() - interval '40 days' $$`); err != nil {
			t.Fatal(err)
		}
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = "public,pg_catalog"
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)

		l, err := lease.Acquire(ctx, pool, "clock-probe", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if skew := time.Since(l.LockedAt) - 40*24*time.Hour; skew < -time.Minute || skew > time.Minute {
			t.Fatalf("lease locked_at %s: want the database's (shadowed) now(), 40 days back", l.LockedAt)
		}

		// notifications.read keeps 30 days. By the process clock the row read 50 days ago is past
		// it; by the database's it is 10 days old.
		exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com')`)
		exec(t, pool, `INSERT INTO notifications (account_id, kind, read_at) VALUES
			('00000000-0000-0000-0000-000000000001', 'fifty', pg_catalog.now() - interval '50 days'),
			('00000000-0000-0000-0000-000000000001', 'eighty', pg_catalog.now() - interval '80 days')`)
		r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec(t, "notifications")}, Settings: settings()})
		res := run(t, r, "notifications")
		if res.StopReason != wire.StopExhausted || res.Deleted != 1 {
			t.Fatalf("run: %+v, want 1 row deleted (only the one past the cutoff by the database clock)", res)
		}
		if n := count(t, pool, `SELECT count(*) FROM notifications WHERE kind = 'fifty'`); n != 1 {
			t.Fatal("the row 50 days old by the process clock was deleted: the cutoff came from the process clock")
		}
	})

	// Mutant: no SKIP LOCKED in the per-row select.
	t.Run("per-row mode does not wait on a locked row", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, `INSERT INTO accounts (email, deletion_requested_at)
			SELECT 'u' || i || '@example.com', now() - interval '40 days' - i * interval '1 hour' FROM generate_series(1, 5) i`)
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		// The oldest eligible account, the one the per-row select reaches first.
		var held string
		if err := tx.QueryRow(ctx, `SELECT id::text FROM accounts ORDER BY deletion_requested_at LIMIT 1 FOR UPDATE`).Scan(&held); err != nil {
			t.Fatal(err)
		}
		s := settings()
		s.LockTimeout = 500 * time.Millisecond
		r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec(t, "account-erasure")}, Settings: s})
		res := run(t, r, "account-erasure")
		if res.StopReason != wire.StopExhausted || res.Processed != 4 || res.Passes[0].Processed != 4 || res.Deleted != 0 {
			t.Fatalf("run: %+v (error %+v), want exhausted with the 4 unlocked accounts wiped", res, res.Error)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count(t, pool, `SELECT count(*) FROM accounts WHERE deleted_at IS NULL AND id::text = $1`, held); n != 1 {
			t.Fatal("the locked account was wiped")
		}
	})

	// Mutant: the count outside a read-only transaction.
	t.Run("the dry run writes nothing, even through a condition's side effect", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, `CREATE TABLE side_effects (at timestamptz)`)
		exec(t, pool, `CREATE FUNCTION leaves_a_mark() RETURNS boolean LANGUAGE sql VOLATILE AS
			$$ INSERT INTO side_effects VALUES (now()) RETURNING true $$`)
		exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com')`)
		exec(t, pool, `INSERT INTO notifications (account_id, kind, read_at)
			VALUES ('00000000-0000-0000-0000-000000000001', 'old', now() - interval '90 days')`)
		marked := policy.Spec{Name: "marked", Passes: []policy.Pass{{Name: "read", Table: "notifications", AgeColumn: "read_at",
			Retention: 30 * 24 * time.Hour, Where: "leaves_a_mark()"}}}
		r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{marked}, Settings: settings()})
		_, err := r.DryRun(ctx, "marked")
		if err == nil || !strings.Contains(err.Error(), "25006") {
			t.Errorf("dry run: err = %v, want the read-only transaction's refusal (25006)", err)
		}
		if n := count(t, pool, `SELECT count(*) FROM side_effects`); n != 0 {
			t.Fatalf("the dry run wrote %d rows through the condition", n)
		}
		if n := count(t, pool, `SELECT count(*) FROM notifications`); n != 1 {
			t.Fatal("the dry run deleted")
		}
	})

	// Today only the foreign key caught an unguarded delete; here there is none. On every path.
	for _, tp := range testPaths {
		t.Run(tp.name+": a keep guard with no foreign key behind it keeps its rows", func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			exec(t, pool, `CREATE TABLE parents (id bigint PRIMARY KEY, created_at timestamptz NOT NULL)`)
			exec(t, pool, `CREATE INDEX ON parents (created_at)`)
			exec(t, pool, `CREATE TABLE children (parent_id bigint NOT NULL)`) // no REFERENCES
			exec(t, pool, `CREATE INDEX ON children (parent_id)`)
			exec(t, pool, `INSERT INTO parents SELECT i, now() - interval '10 days' FROM generate_series(1, 10) i`)
			exec(t, pool, `INSERT INTO children VALUES (2), (5), (5)`)
			guarded := policy.Spec{Name: "parents", Passes: []policy.Pass{{Name: "old", Table: "parents", AgeColumn: "created_at",
				Retention: 24 * time.Hour, Guards: []policy.Guard{{Table: "children", Columns: []string{"parent_id"}}}}}}
			r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: []policy.Spec{guarded}, Settings: settings()}, 1))
			if res := run(t, r, "parents"); res.Deleted != 8 || res.Passes[0].Path != string(tp.path) {
				t.Fatalf("deleted %d on path %s, want the 8 unreferenced parents on %s", res.Deleted, res.Passes[0].Path, tp.path)
			}
			if n := count(t, pool, `SELECT count(*) FROM parents WHERE id IN (2, 5)`); n != 2 {
				t.Fatalf("%d of the 2 referenced parents kept", n)
			}
		})
	}

	// Mutant: the keyset resuming strictly after the last age (t.age > $3), which skips the
	// rows that share the age at a batch boundary. The index path's alone: the heap path has no
	// cursor on the age.
	t.Run("keyset ties: rows sharing one age across batch boundaries all go", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com')`)
		exec(t, pool, `INSERT INTO notifications (account_id, kind, read_at)
			SELECT '00000000-0000-0000-0000-000000000001', 'tie', date_trunc('day', now()) - interval '60 days' FROM generate_series(1, 250)`)
		r := newRunner(t, testPaths[0].config(sweep.Config{Pool: pool, Specs: []policy.Spec{spec(t, "notifications")}, Settings: fixed(settings(), 100)}, 0))
		res := run(t, r, "notifications")
		if res.Deleted != 250 || res.BatchCount != 3 {
			t.Fatalf("run: deleted %d in %d batches, want 250 in 3", res.Deleted, res.BatchCount)
		}
	})
}

// TestNewRunner checks that a Runner refuses, at construction, what would otherwise fail a run
// midway.
func TestNewRunner(t *testing.T) {
	t.Parallel()
	pool, err := dbpool.NewPool(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cases := []struct {
		name    string
		change  func(*sweep.Config)
		mention string
	}{
		{"no pool", func(c *sweep.Config) { c.Pool = nil }, "no pool"},
		{"zero deadline", func(c *sweep.Config) { c.Settings.Deadline = 0 }, "deadline 0s must be positive"},
		{"zero statement timeout", func(c *sweep.Config) { c.Settings.StatementTimeout = 0 }, "statement timeout 0s must be positive"},
		{"zero batch size", func(c *sweep.Config) { c.Settings.BatchSize = 0 }, "batch size 0"},
		{"inverted bounds", func(c *sweep.Config) { c.Settings.MinBatchSize, c.Settings.MaxBatchSize = 500, 100 }, "batch size bounds 500..100"},
		{"invalid spec", func(c *sweep.Config) { c.Specs = []policy.Spec{{Name: "x"}} }, "no passes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings()}
			tc.change(&cfg)
			_, err := sweep.NewRunner(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.mention)
			}
		})
	}
	t.Run("valid", func(t *testing.T) {
		if _, err := sweep.NewRunner(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings()}); err != nil {
			t.Fatal(err)
		}
	})
}
