package sweep_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// poolAndURL returns a fresh database's pool and URL, for tests that open a second connection.
func poolAndURL(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	u := dbtest.URL(t)
	pool, err := dbpool.NewPool(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, u
}

// begin opens a transaction on a second, real connection and returns it with its backend pid.
func begin(t *testing.T, u string) (pgx.Tx, int32) {
	t.Helper()
	conn := dbtest.Conn(t, u)
	var pid int32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx, pid
}

// waitBlockedBy waits until some session is waiting on a lock that pid holds: the deterministic
// point at which the race under test is set up. It reads the server's own lock graph, never a
// timer; the bound only keeps a broken test from hanging.
func waitBlockedBy(t *testing.T, pool *pgxpool.Pool, pid int32) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		var blocked int32
		err := pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)) LIMIT 1`, pid).Scan(&blocked)
		if err == nil {
			// The query text is read again, in a statement of its own: pg_stat_activity is a
			// snapshot taken before pg_blocking_pids ran, and it may still show the statement
			// before the blocked one. The session stays blocked until the test lets pid go, so
			// a snapshot taken now shows the statement that waits.
			var query string
			if err := pool.QueryRow(ctx, `SELECT query FROM pg_stat_activity WHERE pid = $1`, blocked).Scan(&query); err != nil {
				t.Fatal(err)
			}
			return query
		}
		if err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no session became blocked by pid %d", pid)
	return ""
}

func insertClaim(t *testing.T, pool *pgxpool.Pool, at time.Time, key string) int64 {
	t.Helper()
	var id int64
	if err := pool.QueryRow(ctx, `
INSERT INTO idempotency_records (idempotency_key, request_hash, status, created_at, lease_expires_at)
VALUES ($2, '\x00', 'in_progress', $1::timestamptz - interval '49 hours', now() - interval '1 hour')
RETURNING id`, at, key).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestIdempotencyRaces races the abandoned pass's DELETE against a worker that touches the claim
// while the DELETE waits for its row lock.
//
// The single pass is DELETE FROM idempotency_records t WHERE <predicate>: after the lock wait,
// READ COMMITTED re-evaluates that WHERE on the row's new version, sees a live lease (or a
// completed status) and keeps the row. The form DELETE ... WHERE id IN (SELECT id ... WHERE
// <predicate>) would delete it: the re-check after the wait only re-tests id = id against the
// subquery's row from the statement's snapshot, where the lease is still expired. The last subtest
// runs that form under the same race and watches it delete the live claim. (A ctid IN form happens
// to be safe, since the renewed row's new version has a new ctid; keying on id is the trap.)
func TestIdempotencyRaces(t *testing.T) {
	t.Parallel()
	catalog := policy.Catalog()

	raceWith := func(t *testing.T, change string, sweepFn func(pool *pgxpool.Pool, at time.Time) error) (pool *pgxpool.Pool, id int64) {
		t.Helper()
		pool, u := poolAndURL(t)
		at := dbNow(t, pool)
		id = insertClaim(t, pool, at, "k1")
		worker, pid := begin(t, u)
		if _, err := worker.Exec(ctx, change, id); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- sweepFn(pool, at) }()
		waitBlockedBy(t, pool, pid)
		if err := worker.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return pool, id
	}
	runSweep := func(pool *pgxpool.Pool, at time.Time) error {
		r := newRunner(t, sweep.Config{Pool: pool, Specs: catalog, Settings: settings(), AsOf: fixedAsOf(at)})
		res, err := r.Run(ctx, "idempotency-records", sweep.Options{})
		if err == nil && (res.Deleted != 0 || res.StopReason != wire.StopExhausted) {
			t.Errorf("run: deleted %d, %s; want 0, exhausted", res.Deleted, res.StopReason)
		}
		return err
	}

	t.Run("lease renewed while the delete waits: kept", func(t *testing.T) {
		pool, id := raceWith(t, `UPDATE idempotency_records SET lease_expires_at = now() + interval '5 minutes' WHERE id = $1`, runSweep)
		if n := count(t, pool, `SELECT count(*) FROM idempotency_records WHERE id = $1`, id); n != 1 {
			t.Fatal("the sweep deleted a claim whose lease was renewed under it")
		}
	})

	t.Run("claim completed while the delete waits: kept by both passes", func(t *testing.T) {
		pool, id := raceWith(t, `UPDATE idempotency_records SET status = 'completed', completed_at = now() WHERE id = $1`, runSweep)
		// Created long ago but completed just now: the completed pass keys on completion.
		r := newRunner(t, sweep.Config{Pool: pool, Specs: catalog, Settings: settings()})
		run(t, r, "idempotency-records")
		if n := count(t, pool, `SELECT count(*) FROM idempotency_records WHERE id = $1`, id); n != 1 {
			t.Fatal("a claim completed just now was deleted")
		}
	})

	// The same races against the abandoned pass's predicate run as a batched pass, on every path
	// and every form. The first form of each path takes no row lock before deleting, so it waits
	// on the worker's row like the single statement does, and READ COMMITTED re-checks the
	// predicate standing on the target after the wait; with the wait made long, the worker
	// commits inside it (the deterministic point: the batch shows up blocked by the worker). When
	// the worker holds the row through the first attempt's short lock timeout instead, the batch
	// is retried in the locking form, which skips the row; the locking form, forced, skips it
	// from the start. Every way, the changed claim survives, and the run ends exhausted.
	changes := []struct{ name, sql string }{
		{"lease renewed", `UPDATE idempotency_records SET lease_expires_at = now() + interval '5 minutes' WHERE id = $1`},
		{"claim completed", `UPDATE idempotency_records SET status = 'completed', completed_at = now() WHERE id = $1`},
	}
	abandoned := spec(t, "idempotency-records").Passes[1]
	abandoned.Mode = policy.ModeBatched
	batched := []policy.Spec{{Name: "abandoned", Passes: []policy.Pass{abandoned}}}
	for _, tp := range testPaths {
		for _, ch := range changes {
			if !tp.locking {
				t.Run(tp.name+"/"+ch.name+" while the batch waits: kept", func(t *testing.T) {
					t.Parallel()
					var res *wire.Result
					pool, id := raceWith(t, ch.sql, func(pool *pgxpool.Pool, at time.Time) error {
						cfg := sweep.WithTestKnobs(sweep.Config{Pool: pool, Specs: batched, Settings: settings(), AsOf: fixedAsOf(at)},
							tp.path, 1, time.Minute, false)
						var err error
						res, err = newRunner(t, cfg).Run(ctx, "abandoned", sweep.Options{})
						return err
					})
					if res.Deleted != 0 || res.StopReason != wire.StopExhausted || res.Passes[0].LockRetries != 0 || res.Passes[0].Path != string(tp.path) {
						t.Errorf("run: %+v, want nothing deleted, exhausted on %s, no lock retry (the wait ended with the commit)", res.Passes[0], tp.path)
					}
					if n := count(t, pool, `SELECT count(*) FROM idempotency_records WHERE id = $1`, id); n != 1 {
						t.Fatalf("the batch deleted a claim changed under it (%s)", ch.name)
					}
				})
			}
			t.Run(tp.name+"/"+ch.name+", held through the batch: skipped, kept", func(t *testing.T) {
				t.Parallel()
				pool, u := poolAndURL(t)
				at := dbNow(t, pool)
				id := insertClaim(t, pool, at, "k1")
				insertClaim(t, pool, at, "k2") // abandoned, and not held: deleted
				worker, _ := begin(t, u)
				if _, err := worker.Exec(ctx, ch.sql, id); err != nil {
					t.Fatal(err)
				}
				cfg := sweep.WithTestKnobs(sweep.Config{Pool: pool, Specs: batched, Settings: settings(), AsOf: fixedAsOf(at)},
					tp.path, 1, 0, tp.locking)
				r := newRunner(t, cfg)
				res := run(t, r, "abandoned")
				wantRetries := 1
				if tp.locking {
					wantRetries = 0 // the locking form skips the held row at once
				}
				if res.Deleted != 1 || res.StopReason != wire.StopExhausted || res.Error != nil || res.Passes[0].LockRetries != wantRetries {
					t.Errorf("run: %+v (error %+v), want the unheld claim deleted, exhausted, %d lock retries", res.Passes[0], res.Error, wantRetries)
				}
				if err := worker.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				if res := run(t, r, "abandoned"); res.Deleted != 0 {
					t.Errorf("the next run deleted %d, want the changed claim kept", res.Deleted)
				}
				if n := count(t, pool, `SELECT count(*) FROM idempotency_records WHERE id = $1`, id); n != 1 {
					t.Fatalf("the claim changed under the run was deleted (%s)", ch.name)
				}
			})
		}
	}

	t.Run("the id IN (subquery) form would delete the renewed claim", func(t *testing.T) {
		pool, id := raceWith(t, `UPDATE idempotency_records SET lease_expires_at = now() + interval '5 minutes' WHERE id = $1`,
			func(pool *pgxpool.Pool, at time.Time) error {
				_, err := pool.Exec(ctx, `
DELETE FROM idempotency_records WHERE id IN (
  SELECT id FROM idempotency_records
   WHERE status = 'in_progress' AND lease_expires_at < now() AND created_at < $1::timestamptz - interval '48 hours')`, at)
				return err
			})
		if n := count(t, pool, `SELECT count(*) FROM idempotency_records WHERE id = $1`, id); n != 0 {
			t.Fatal("the id IN form kept the row; this test no longer shows why the predicate must stand on the target")
		}
	})
}

func seedErasure(t *testing.T, pool *pgxpool.Pool, at time.Time, n int) {
	t.Helper()
	exec(t, pool, `
WITH a AS (
  INSERT INTO accounts (email, deletion_requested_at)
  SELECT 'erase' || i || '@example.com', $1::timestamptz - interval '31 days' - i * interval '1 second'
  FROM generate_series(1, $2::int) i RETURNING id)
INSERT INTO notifications (account_id, kind, body) SELECT id, 'mention', 'personal' FROM a`, at, n)
}

func TestAccountErasure(t *testing.T) {
	t.Parallel()
	t.Run("two runs at once wipe each account exactly once", func(t *testing.T) {
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		const n = 60
		seedErasure(t, pool, at, n)
		exec(t, pool, `INSERT INTO accounts (email, deletion_requested_at) VALUES ('recent@example.com', $1::timestamptz - interval '29 days')`, at)
		// Two sweeps over the same pass, under different lease labels, so the lease does not
		// serialise them: what keeps the wipes single is SKIP LOCKED and wipe_account's guard.
		pass := spec(t, "account-erasure").Passes[0]
		specs := []policy.Spec{{Name: "erasure-a", Passes: []policy.Pass{pass}}, {Name: "erasure-b", Passes: []policy.Pass{pass}}}
		r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Settings: settings(), AsOf: fixedAsOf(at)})
		var wg sync.WaitGroup
		results := make([]*wire.Result, 2)
		start := make(chan struct{})
		for i, name := range []string{"erasure-a", "erasure-b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := r.Run(ctx, name, sweep.Options{})
				if err != nil {
					t.Error(err)
					return
				}
				results[i] = res
			}()
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		if got := results[0].Processed + results[1].Processed; got != n {
			t.Errorf("runs wiped %d + %d accounts, want %d in all", results[0].Processed, results[1].Processed, n)
		}
		// Per-row mode is its own path whatever the table: it locks each key (SKIP LOCKED)
		// before calling the function, which must not run twice.
		for _, res := range results {
			if p := res.Passes[0].Path; p != string(sweep.PathPerRow) {
				t.Errorf("path %q, want per-row", p)
			}
		}
		checks := []struct {
			what, sql string
			want      int64
		}{
			{"wiped accounts", `SELECT count(*) FROM accounts WHERE deleted_at IS NOT NULL`, n},
			{"recent request untouched", `SELECT count(*) FROM accounts WHERE email = 'recent@example.com' AND deleted_at IS NULL`, 1},
			{"ACCOUNT_WIPED audit rows", `SELECT count(*) FROM audit_log WHERE action = 'ACCOUNT_WIPED'`, n},
			{"accounts with more than one audit row", `SELECT count(*) FROM (SELECT details->>'account_id' FROM audit_log
				WHERE action = 'ACCOUNT_WIPED' GROUP BY 1 HAVING count(*) > 1) d`, 0},
			{"account.wiped events", `SELECT count(DISTINCT aggregate_id) FROM outbox_events WHERE event_type = 'account.wiped'`, n},
			{"all account.wiped events", `SELECT count(*) FROM outbox_events WHERE event_type = 'account.wiped'`, n},
			{"personal notifications left", `SELECT count(*) FROM notifications`, 0},
		}
		for _, c := range checks {
			if got := count(t, pool, c.sql); got != c.want {
				t.Errorf("%s = %d, want %d", c.what, got, c.want)
			}
		}
	})

	t.Run("wipe_account called twice at once writes once", func(t *testing.T) {
		pool, u := poolAndURL(t)
		at := dbNow(t, pool)
		seedErasure(t, pool, at, 1)
		var id string
		if err := pool.QueryRow(ctx, `SELECT id::text FROM accounts`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		first, pid := begin(t, u)
		var wiped bool
		if err := first.QueryRow(ctx, `SELECT wipe_account($1)`, id).Scan(&wiped); err != nil || !wiped {
			t.Fatalf("first wipe = %v, %v", wiped, err)
		}
		second := make(chan bool, 1)
		go func() {
			var w bool
			if err := pool.QueryRow(ctx, `SELECT wipe_account($1)`, id).Scan(&w); err != nil {
				t.Error(err)
			}
			second <- w
		}()
		waitBlockedBy(t, pool, pid)
		if err := first.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if <-second {
			t.Fatal("the second wipe re-wiped an account wiped while it waited")
		}
		if n := count(t, pool, `SELECT count(*) FROM audit_log WHERE action = 'ACCOUNT_WIPED'`); n != 1 {
			t.Fatalf("%d audit rows, want 1", n)
		}
	})

	// The budget is checked between wipes, never inside one: every account is either wholly wiped
	// (with its audit row) or wholly untouched.
	t.Run("deadline between wipes", func(t *testing.T) {
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedErasure(t, pool, at, 10)
		clock := newFakeClock()
		s := settings()
		s.Deadline, s.Pause = 90*time.Second, time.Millisecond
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at), Now: clock.Now, Sleep: func(context.Context, time.Duration) { clock.Advance(30 * time.Second) }})
		res := run(t, r, "account-erasure")
		if res.StopReason != wire.StopBudget || res.Processed != 3 || !res.Truncated {
			t.Fatalf("got %s, %d wiped, truncated %v; want budget after 3 wipes", res.StopReason, res.Processed, res.Truncated)
		}
		half := count(t, pool, `
SELECT count(*) FROM accounts a
 WHERE (a.deleted_at IS NOT NULL) <> EXISTS (SELECT 1 FROM audit_log l WHERE l.details->>'account_id' = a.id::text)
    OR (a.deleted_at IS NOT NULL) = EXISTS (SELECT 1 FROM notifications n WHERE n.account_id = a.id)`)
		if half != 0 {
			t.Fatalf("%d accounts half wiped", half)
		}
		if n := count(t, pool, `SELECT count(*) FROM accounts WHERE deleted_at IS NOT NULL`); n != 3 {
			t.Fatalf("%d accounts wiped, want 3", n)
		}
	})
}

// TestSkipLocked: a row that another transaction holds through a batch costs that batch one
// retry in the locking form, which skips it, never a batch-error; a row that transaction makes
// ineligible is kept once it commits. On every path: the locking forms skip it at once.
func TestSkipLocked(t *testing.T) {
	t.Parallel()
	for _, tp := range testPaths {
		t.Run(tp.name, func(t *testing.T) {
			t.Parallel()
			pool, u := poolAndURL(t)
			at := dbNow(t, pool)
			seedNotifications(t, pool, at, 50, 0)
			var held int64
			if err := pool.QueryRow(ctx, `SELECT min(id) FROM notifications`).Scan(&held); err != nil {
				t.Fatal(err)
			}
			worker, _ := begin(t, u)
			// The user marks it unread again: no longer eligible, not yet committed.
			if _, err := worker.Exec(ctx, `UPDATE notifications SET read_at = NULL WHERE id = $1`, held); err != nil {
				t.Fatal(err)
			}
			s := fixed(settings(), 10)
			s.LockTimeout = 500 * time.Millisecond // were the retry to wait, it would fail fast with 55P03
			r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at)}, 10))
			res := run(t, r, "notifications")
			wantRetries := 1
			if tp.locking {
				wantRetries = 0
			}
			if res.StopReason != wire.StopExhausted || res.Deleted != 49 || res.Passes[0].LockRetries != wantRetries {
				t.Fatalf("got %s, %d deleted, %d lock retries (error %+v); want exhausted, 49: the held row skipped, %d retries",
					res.StopReason, res.Deleted, res.Passes[0].LockRetries, res.Error, wantRetries)
			}
			if err := worker.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			run(t, r, "notifications")
			if n := count(t, pool, `SELECT count(*) FROM notifications WHERE id = $1`, held); n != 1 {
				t.Fatal("the row made ineligible under the sweep was deleted")
			}
		})
	}
}

// TestChangedAfterTheIndexRead changes an eligible row after an index-path batch read it from the
// age index and before the batch's delete reaches it: the worker's change is in flight when the
// batch starts, so the batch's read (its statement's snapshot) still sees the row eligible, and
// its delete waits on the row. The worker commits inside that wait (the deterministic point: the
// batch shows up blocked by the worker), READ COMMITTED re-checks the delete's target on the
// row's new version, and the row, no longer eligible, is kept while the rest of the batch goes.
// Two things hold it, each enough alone on a server that re-checks a TID scan's TIDs after the
// wait: the predicate standing on the target, and the delete keyed by ctid (the new version has
// another). Keyed by id without the predicate, the batch deletes the changed row.
func TestChangedAfterTheIndexRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, change string }{
		{"marked unread", `UPDATE notifications SET read_at = NULL WHERE id = $1`},
		{"read again just now", `UPDATE notifications SET read_at = now() WHERE id = $1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, u := poolAndURL(t)
			at := dbNow(t, pool)
			seedNotifications(t, pool, at, 20, 0)
			var changed int64
			if err := pool.QueryRow(ctx, `SELECT id FROM notifications ORDER BY read_at OFFSET 10 LIMIT 1`).Scan(&changed); err != nil {
				t.Fatal(err)
			}
			worker, pid := begin(t, u)
			if _, err := worker.Exec(ctx, tc.change, changed); err != nil {
				t.Fatal(err)
			}
			// One batch holds every row; the first attempt waits on the held row for a minute
			// rather than giving up and skipping it.
			cfg := sweep.WithTestKnobs(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: fixed(settings(), 100), AsOf: fixedAsOf(at)},
				sweep.PathIndex, 0, time.Minute, false)
			r := newRunner(t, cfg)
			done := make(chan *wire.Result, 1)
			go func() {
				res, err := r.Run(ctx, "notifications", sweep.Options{})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			if query := waitBlockedBy(t, pool, pid); !strings.Contains(query, "DELETE FROM") {
				t.Fatalf("blocked by the worker: %s, want the batch's delete", query)
			}
			if err := worker.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			res := <-done
			if res == nil {
				t.FailNow()
			}
			if p := res.Passes[0]; p.Path != string(sweep.PathIndex) || p.Deleted != 19 || p.BatchCount != 1 || p.LockRetries != 0 || res.Error != nil {
				t.Fatalf("run: %+v (error %+v), want one index-path batch deleting the 19 unchanged rows", p, res.Error)
			}
			if n := count(t, pool, `SELECT count(*) FROM notifications WHERE id = $1`, changed); n != 1 {
				t.Fatal("the batch deleted a row changed after it read the index")
			}
		})
	}
}
