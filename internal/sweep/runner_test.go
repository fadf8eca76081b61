package sweep_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// seedNotifications inserts n read notifications past the 30-day cutoff of at, then keep fresh
// ones, a row per page (onePerPage), the oldest first: a heap range of k blocks holds k rows.
func seedNotifications(t *testing.T, pool *pgxpool.Pool, at time.Time, n, keep int) {
	t.Helper()
	exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'n@example.com') ON CONFLICT DO NOTHING`)
	onePerPage(t, pool, "notifications")
	exec(t, pool, `
INSERT INTO notifications (account_id, kind, body, created_at, read_at)
SELECT '00000000-0000-0000-0000-000000000001', 'mention', 'old ' || i || ' ' || `+pad+`, $1::timestamptz - interval '60 days', $1::timestamptz - interval '31 days' - ($2 - i) * interval '1 second'
FROM generate_series(1, $2::int) i`, at, n)
	exec(t, pool, `
INSERT INTO notifications (account_id, kind, body, created_at, read_at)
SELECT '00000000-0000-0000-0000-000000000001', 'mention', 'fresh ' || i || ' ' || `+pad+`, $1::timestamptz - interval '2 days', $1::timestamptz - interval '1 day'
FROM generate_series(1, $2::int) i`, at, keep)
}

func remaining(t *testing.T, pool *pgxpool.Pool) (old, fresh int64) {
	t.Helper()
	return count(t, pool, `SELECT count(*) FROM notifications WHERE body LIKE 'old %'`),
		count(t, pool, `SELECT count(*) FROM notifications WHERE body LIKE 'fresh %'`)
}

// fixed keeps every batch at one size, so batch counts are exact.
func fixed(s sweep.Settings, size int) sweep.Settings {
	s.BatchSize, s.MinBatchSize, s.MaxBatchSize = size, size, size
	return s
}

// TestRun holds the batch loop's promises: exactness, the budget, the batch cap, shutdown and
// resumption, each on every path (testPaths): the heap path and the index path, in their first
// form and in their locking form. The tables are laid out a row per page, so a heap range of k
// blocks holds k rows and every path meets the same expectations.
func TestRun(t *testing.T) {
	t.Parallel()
	for _, tp := range testPaths {
		t.Run(tp.name, func(t *testing.T) {
			t.Parallel()
			testRunOn(t, tp)
		})
	}

	t.Run("request batch size overrides the setting", func(t *testing.T) {
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 250, 0)
		s := settings()
		s.MinBatchSize, s.MaxBatchSize = 1, 100
		r := newRunner(t, testPaths[0].config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at), Now: func() time.Time { return time.Unix(0, 0) }}, 0)) // every batch "takes" 0s: sizes may only grow
		res, err := r.Run(ctx, "notifications", sweep.Options{BatchSize: 50})
		if err != nil {
			t.Fatal(err)
		}
		// 50, then doubled to 100 (the max), then the last 100, past which no row was left.
		if res.Deleted != 250 || res.BatchCount != 3 {
			t.Fatalf("deleted %d in %d batches; want 250 in 3", res.Deleted, res.BatchCount)
		}
	})

	t.Run("slow batches shrink toward the target", func(t *testing.T) {
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 2000, 0)
		clock := newFakeClock()
		s := settings()
		s.BatchSize, s.MinBatchSize, s.BatchTarget = 1000, 100, 100*time.Millisecond
		// Every reading of the clock moves it 500ms: each batch "takes" 500ms, five times the target.
		r := newRunner(t, testPaths[0].config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at), Now: func() time.Time { clock.Advance(500 * time.Millisecond); return clock.Now() }}, 0))
		res := run(t, r, "notifications")
		// Halving at most per batch, floored at 100: 1000, 500, 250, 125, 100, then 25 of 100.
		if res.Deleted != 2000 || res.BatchCount != 6 {
			t.Fatalf("deleted %d in %d batches; want 2000 in 6", res.Deleted, res.BatchCount)
		}
	})

	t.Run("lease held: skipped, nothing deleted", func(t *testing.T) {
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 10, 0)
		exec(t, pool, `INSERT INTO sweeprail.sweep_lock VALUES ('notifications', gen_random_uuid(), now(), now() + interval '1 hour')`)
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), AsOf: fixedAsOf(at)})
		res := run(t, r, "notifications")
		old, _ := remaining(t, pool)
		if !res.Skipped || res.StopReason != wire.StopLeaseHeld || res.Truncated || len(res.Passes) != 0 || old != 10 {
			t.Fatalf("got skipped %v, %s, truncated %v, %d passes, %d old left; want skipped lease-held, nothing done",
				res.Skipped, res.StopReason, res.Truncated, len(res.Passes), old)
		}
		if n := count(t, pool, `SELECT count(*) FROM sweeprail.sweep_lock`); n != 1 {
			t.Fatal("a skipped run released the holder's lease")
		}
	})

	t.Run("unknown sweep", func(t *testing.T) {
		pool, err := dbpool.NewPool(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1") // never connects
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings()})
		if _, err := r.Run(ctx, "nope", sweep.Options{}); !errors.Is(err, sweep.ErrUnknownSweep) {
			t.Fatalf("unknown sweep: err = %v, want ErrUnknownSweep", err)
		}
	})
}

// testRunOn is TestRun's correctness subtests on one path.
func testRunOn(t *testing.T, tp testPath) {
	t.Run("backlog larger than a batch drains fully", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 2500, 100)
		r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: fixed(settings(), 1000), AsOf: fixedAsOf(at)}, 1000))
		res := run(t, r, "notifications")
		old, fresh := remaining(t, pool)
		if old != 0 || fresh != 100 {
			t.Fatalf("left %d old, %d fresh; want 0, 100", old, fresh)
		}
		// 1000, 1000, then 500: a short batch (the index path), or the range that reaches the
		// last block (the heap path: 500 old rows and the 100 fresh ones), ends the pass without
		// an extra round trip.
		if res.Deleted != 2500 || res.BatchCount != 3 || res.StopReason != wire.StopExhausted || res.Truncated {
			t.Fatalf("got deleted %d in %d batches, %s, truncated %v; want 2500 in 3, exhausted",
				res.Deleted, res.BatchCount, res.StopReason, res.Truncated)
		}
		if p := res.Passes[0]; p.Path != string(tp.path) || p.LockRetries != 0 {
			t.Fatalf("pass answer %+v, want path %s and no lock retries", p, tp.path)
		}
		if n := count(t, pool, `SELECT count(*) FROM sweeprail.sweep_lock`); n != 0 {
			t.Fatalf("%d lease rows left after the run", n)
		}
	})

	// The index path: each batch resumes at the newest age the previous one deleted, so no batch
	// re-reads what the earlier ones emptied (make bench: the last batch of a free-plan drain was
	// O(table)); a row older than the cursor that appears mid-run waits for the next run. The
	// heap path: batches end at the table's size at the pass's start, and a row inserted mid-run
	// lands past it (the pages before are full), so it too waits for the next run.
	t.Run("batches resume at the cursor, and end where the table ended", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 250, 0)
		s := fixed(settings(), 100)
		s.Pause = time.Millisecond
		inserted := false
		r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at), Sleep: func(context.Context, time.Duration) {
			if !inserted {
				inserted = true
				exec(t, pool, `INSERT INTO notifications (account_id, kind, body, read_at)
						VALUES ('00000000-0000-0000-0000-000000000001', 'mention', 'late', $1::timestamptz - interval '400 days')`, at)
			}
		}}, 100))
		res := run(t, r, "notifications")
		if res.Deleted != 250 || count(t, pool, `SELECT count(*) FROM notifications WHERE body = 'late'`) != 1 {
			t.Fatalf("first run deleted %d; want the 250 seeded and not the row older than its cursor", res.Deleted)
		}
		if res = run(t, r, "notifications"); res.Deleted != 1 {
			t.Fatalf("next run deleted %d, want the late row", res.Deleted)
		}
	})

	// The budget is checked between batches: a fake clock advanced in the pause between batches
	// makes the third check find the budget spent, with no real sleeping.
	t.Run("budget", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 5000, 10)
		clock := newFakeClock()
		s := fixed(settings(), 1000)
		s.Deadline, s.Pause = 90*time.Second, time.Millisecond
		r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at), Now: clock.Now, Sleep: func(context.Context, time.Duration) { clock.Advance(30 * time.Second) }}, 1000))
		res := run(t, r, "notifications")
		old, fresh := remaining(t, pool)
		if res.StopReason != wire.StopBudget || !res.Truncated || res.BatchCount != 3 || res.Deleted != 3000 {
			t.Fatalf("got %s, truncated %v, %d batches, %d deleted; want budget, truncated, 3 batches, 3000",
				res.StopReason, res.Truncated, res.BatchCount, res.Deleted)
		}
		if old != 2000 || fresh != 10 {
			t.Fatalf("left %d old, %d fresh; want the three batches committed: 2000, 10", old, fresh)
		}
	})

	t.Run("a pause never outlasts the budget", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 3000, 0)
		clock := newFakeClock()
		s := fixed(settings(), 1000)
		s.Deadline, s.Pause = 10*time.Second, 8*time.Second
		var slept []time.Duration
		r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at), Now: clock.Now, Sleep: func(_ context.Context, d time.Duration) { slept = append(slept, d); clock.Advance(d) }}, 1000))
		res := run(t, r, "notifications")
		// Batch at 0s, pause 8s, batch at 8s, pause cut to the 2s left, then the budget stops it.
		if res.StopReason != wire.StopBudget || res.BatchCount != 2 || len(slept) != 2 || slept[1] != 2*time.Second {
			t.Fatalf("got %s after %d batches, pauses %v; want budget after 2 batches, pauses [8s 2s]", res.StopReason, res.BatchCount, slept)
		}
	})

	t.Run("batch cap", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 5000, 10)
		s := fixed(settings(), 1000)
		s.MaxBatches = 2
		r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at)}, 1000))
		res := run(t, r, "notifications")
		old, _ := remaining(t, pool)
		if res.StopReason != wire.StopBatchCap || !res.Truncated || res.BatchCount != 2 || old != 3000 {
			t.Fatalf("got %s, truncated %v, %d batches, %d old left; want batch-cap, truncated, 2, 3000",
				res.StopReason, res.Truncated, res.BatchCount, old)
		}
	})

	t.Run("shutdown stops between batches", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 5000, 10)
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		s := fixed(settings(), 1000)
		s.Pause = time.Millisecond
		r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at), Sleep: func(context.Context, time.Duration) { cancel() }}, 1000)) // SIGTERM arrives after the first batch
		res, err := r.Run(runCtx, "notifications", sweep.Options{})
		if err != nil {
			t.Fatal(err)
		}
		old, _ := remaining(t, pool)
		if res.StopReason != wire.StopShutdown || !res.Truncated || res.BatchCount != 1 || old != 4000 {
			t.Fatalf("got %s, truncated %v, %d batches, %d old left; want shutdown, truncated, 1, 4000",
				res.StopReason, res.Truncated, res.BatchCount, old)
		}
		if n := count(t, pool, `SELECT count(*) FROM sweeprail.sweep_lock`); n != 0 {
			t.Fatal("lease not released after shutdown")
		}
	})

	// The lease is held while the run works, with a TTL of twice the budget: read it from inside
	// the pause between two batches.
	t.Run("lease held during the run for 2x the deadline", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 300, 0)
		s := fixed(settings(), 100)
		s.Deadline, s.Pause = 45*time.Second, time.Millisecond
		var ttls []time.Duration
		r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at), Sleep: func(context.Context, time.Duration) {
			var us int64
			if err := pool.QueryRow(ctx, `SELECT (EXTRACT(EPOCH FROM locked_until - locked_at) * 1e6)::bigint
					FROM sweeprail.sweep_lock WHERE label = 'notifications'`).Scan(&us); err != nil {
				t.Error(err)
			}
			ttls = append(ttls, time.Duration(us)*time.Microsecond)
		}}, 100))
		run(t, r, "notifications")
		if len(ttls) == 0 {
			t.Fatal("no pause between batches")
		}
		for _, ttl := range ttls {
			if ttl != 90*time.Second {
				t.Fatalf("lease ttl %s during the run, want 2 x 45s", ttl)
			}
		}
	})

	// An outbox event referenced from a table the keep guard does not know: the foreign key stops
	// the batch, which rolls back whole; the batches before it stay committed.
	t.Run("a failed batch rolls back whole", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		exec(t, pool, `CREATE TABLE invoices (id bigint PRIMARY KEY, outbox_event_id bigint NOT NULL REFERENCES outbox_events (id))`)
		// Four unreferenced events first, then two more of which one is referenced: with batches
		// of two, batches one and two succeed and batch three fails.
		onePerPage(t, pool, "outbox_events")
		exec(t, pool, `
INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, dispatched_at)
SELECT 'order', 'e' || i, 'order.paid', jsonb_build_object('pad', `+pad+`), $1::timestamptz - interval '30 days' + i * interval '1 minute'
FROM generate_series(1, 6) i`, at)
		exec(t, pool, `INSERT INTO invoices SELECT 1, id FROM outbox_events WHERE aggregate_id = 'e6'`)
		r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: fixed(settings(), 2), AsOf: fixedAsOf(at)}, 2))
		res := run(t, r, "outbox")

		if res.StopReason != wire.StopBatchError || res.Truncated || !res.Failed() {
			t.Fatalf("got %s, truncated %v; want batch-error, not truncated", res.StopReason, res.Truncated)
		}
		if res.Error == nil || res.Error.Code != "23503" || res.Error.Pass != "dispatched" {
			t.Fatalf("error = %+v, want code 23503 in pass dispatched", res.Error)
		}
		if res.Deleted != 4 || res.BatchCount != 3 {
			t.Fatalf("deleted %d in %d batches, want 4 in 3", res.Deleted, res.BatchCount)
		}
		left := count(t, pool, `SELECT count(*) FROM outbox_events WHERE aggregate_id IN ('e5', 'e6')`)
		if left != 2 {
			t.Fatalf("%d of the failed batch's two events left; the batch must roll back whole", left)
		}
		if n := count(t, pool, `SELECT count(*) FROM sweeprail.sweep_lock`); n != 0 {
			t.Fatal("lease not released after a failed batch")
		}
	})
}

func TestDryRun(t *testing.T) {
	t.Parallel()
	t.Run("counts without deleting", func(t *testing.T) {
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 1234, 10)
		analyze(t, pool, `ANALYZE notifications`)
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), AsOf: fixedAsOf(at)})
		dr, err := r.DryRun(ctx, "notifications")
		if err != nil {
			t.Fatal(err)
		}
		p := dr.Passes[0]
		if !dr.DryRun || p.Pass != "read" || p.Eligible == nil || *p.Eligible != 1234 || p.CountTimedOut || !p.Indexed {
			t.Fatalf("dry run = %+v (eligible %v)", p, p.Eligible)
		}
		if p.Estimate < 1000 || p.Estimate > 1500 {
			t.Errorf("estimate %d, want near 1234 after ANALYZE", p.Estimate)
		}
		// 1234 of 1244 rows eligible: the heap path (TestAccessPath has the rest).
		if p.Path != string(sweep.PathHeap) {
			t.Errorf("path %q, want heap", p.Path)
		}
		if old, _ := remaining(t, pool); old != 1234 {
			t.Fatal("dry run deleted rows")
		}
	})

	// Each delete_with child is counted by the rows that reference an eligible parent (never an
	// open event's), answered in the policy's order, and a run then deletes exactly those.
	t.Run("counts delete_with children", func(t *testing.T) {
		pool := dbtest.Pool(t)
		exec(t, pool, familySchema)
		at := dbNow(t, pool)
		seedFamilies(t, pool, at, false)
		eligible, deliveries, receipts := familyOracle()
		receiptsFirst := "        delete_with:\n          - {table: receipts, column: event_id}\n          - {table: deliveries, column: event_id}\n"
		for _, tc := range []struct {
			name, children string
			want           []wire.ChildRows
		}{
			{"in the policy's order", familyBoth, []wire.ChildRows{{Table: "deliveries", Column: "event_id", Rows: deliveries}, {Table: "receipts", Column: "event_id", Rows: receipts}}},
			{"the other order", receiptsFirst, []wire.ChildRows{{Table: "receipts", Column: "event_id", Rows: receipts}, {Table: "deliveries", Column: "event_id", Rows: deliveries}}},
		} {
			r := newRunner(t, sweep.Config{Pool: pool, Specs: load(t, familyPolicy(tc.children)).Specs, Settings: settings(), AsOf: fixedAsOf(at)})
			dr, err := r.DryRun(ctx, "events")
			if err != nil {
				t.Fatal(err)
			}
			if p := dr.Passes[0]; p.Eligible == nil || *p.Eligible != eligible || !slices.Equal(p.Children, tc.want) {
				t.Fatalf("%s: eligible %v, children %+v; want %d, %+v", tc.name, p.Eligible, p.Children, eligible, tc.want)
			}
		}
		// seedFamilies' 1500 deliveries and 1000 receipts.
		if n := count(t, pool, `SELECT (SELECT count(*) FROM deliveries) + (SELECT count(*) FROM receipts)`); n != 2500 {
			t.Fatalf("%d children left after the dry runs, want all 2500", n)
		}
		// A count cut by its timeout answers no children rather than a partial number.
		s := settings()
		s.CountTimeout = 100 * time.Millisecond
		slow := strings.Replace(familyPolicy(familyBoth), "where: t.state = 'terminal'", "where: t.state = 'terminal' AND pg_sleep(0.01) IS NOT NULL", 1)
		dr, err := newRunner(t, sweep.Config{Pool: pool, Specs: load(t, slow).Specs, Settings: s, AsOf: fixedAsOf(at)}).DryRun(ctx, "events")
		if err != nil {
			t.Fatal(err)
		}
		if p := dr.Passes[0]; !p.CountTimedOut || p.Eligible != nil || p.Children != nil {
			t.Fatalf("timed-out dry run = %+v, want no eligible count and no children", p)
		}
		r := newRunner(t, sweep.Config{Pool: pool, Specs: load(t, familyPolicy(familyBoth)).Specs, Settings: settings(), AsOf: fixedAsOf(at)})
		res := run(t, r, "events")
		if p := res.Passes[0]; p.Deleted != eligible || p.Children[0].Rows != deliveries || p.Children[1].Rows != receipts {
			t.Fatalf("run: %+v, want what the dry run counted", p)
		}
	})

	t.Run("count timeout is an answer, not an error", func(t *testing.T) {
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 20, 0)
		slow := []policy.Spec{{Name: "slow", Passes: []policy.Pass{{Name: "read", Table: "notifications", AgeColumn: "read_at",
			Where: "pg_sleep(0.05) IS NOT NULL", Retention: 30 * 24 * time.Hour}}}}
		s := settings()
		s.CountTimeout = 100 * time.Millisecond
		r := newRunner(t, sweep.Config{Pool: pool, Specs: slow, Settings: s, AsOf: fixedAsOf(at)})
		dr, err := r.DryRun(ctx, "slow")
		if err != nil {
			t.Fatal(err)
		}
		if p := dr.Passes[0]; p.Eligible != nil || !p.CountTimedOut {
			t.Fatalf("dry run = %+v, want eligible nil and countTimedOut", p)
		}
	})

	t.Run("unindexed predicate", func(t *testing.T) {
		pool := dbtest.Pool(t)
		unindexed := []policy.Spec{{Name: "by-created", Passes: []policy.Pass{{Name: "all", Table: "notifications", AgeColumn: "created_at",
			Retention: 30 * 24 * time.Hour}}}}
		r := newRunner(t, sweep.Config{Pool: pool, Specs: unindexed, Settings: settings()})
		dr, err := r.DryRun(ctx, "by-created")
		if err != nil {
			t.Fatal(err)
		}
		if dr.Passes[0].Indexed {
			t.Fatal("created_at has no index, but the dry run says indexed")
		}
	})
}

// TestBatchTargetLeavesOutCommit checks that adaptive sizing aims a self-flushing batch's work
// at the target, not its COMMIT: a commit that waits (a deferred trigger sleeping once per
// batch, as a slow disk's WAL flush would) longer than the target must not shrink fast batches
// to the least size, whose drain would take a commit's wait per ten rows. A batch that commits
// without waiting for its flush counts its commit, where only deferred work can take time.
func TestBatchTargetLeavesOutCommit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		sync bool
		// The rows the run deletes, from least to most, in at most batches batches.
		least, most int64
		batches     int
	}{
		// Growing from 100 rows, doubling each batch to the most: 100+200+400+800+1000+1000
		// rows after six, each batch's work far under 100 ms. Sized by the whole batch, every
		// one over the target by its commit's 150 ms, they would halve to 10 rows: 20 batches
		// of some 400 rows.
		{"a commit that waits for its flush is left out", true, 3000, 3000, 10},
		{"a commit that does not wait is counted in", false, 1, 999, 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := poolAndURL(t)
			at := dbNow(t, pool)
			seedNotifications(t, pool, at, 3000, 0)
			exec(t, pool, `CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('test.slept', true) IS DISTINCT FROM 'yes' THEN
    PERFORM set_config('test.slept', 'yes', true);
    PERFORM pg_sleep(0.15);
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER slow_commit AFTER DELETE ON notifications DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION slow_commit()`)
			s := settings()
			s.BatchSize, s.MinBatchSize, s.MaxBatchSize = 100, 10, 1000
			s.BatchTarget, s.MaxBatches, s.SyncCommit = 100*time.Millisecond, 20, tc.sync
			r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec(t, "notifications")}, Settings: s, AsOf: fixedAsOf(at)})
			res := run(t, r, "notifications")
			n := res.Passes[0].BatchCount
			if res.Deleted < tc.least || res.Deleted > tc.most || n > tc.batches {
				t.Fatalf("run: %s, %d rows in %d batches; want %d to %d rows in at most %d batches",
					res.StopReason, res.Deleted, n, tc.least, tc.most, tc.batches)
			}
		})
	}
}
