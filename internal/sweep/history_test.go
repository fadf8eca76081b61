package sweep_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestRunHistory checks that every run leaves its row, skipped and failed ones included, that a
// run cut before its end leaves a row without an end, and that runs prune the history.
func TestRunHistory(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	at := dbNow(t, pool)
	store := history.New(pool, 30*24*time.Hour)
	exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com')`)
	exec(t, pool, `INSERT INTO notifications (account_id, kind, read_at)
		SELECT '00000000-0000-0000-0000-000000000001', 'old', $1::timestamptz - interval '40 days' FROM generate_series(1, 10)`, at)
	// Old runs past the 30-day retention, and one within it.
	exec(t, pool, `INSERT INTO sweeprail.run (run_id, sweep, started_at) SELECT gen_random_uuid(), 'notifications', now() - interval '31 days'
		FROM generate_series(1, 3)`)
	exec(t, pool, `INSERT INTO sweeprail.run (run_id, sweep, started_at) VALUES (gen_random_uuid(), 'outbox', now() - interval '29 days')`)
	r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), AsOf: fixedAsOf(at), History: store})

	res, err := r.Run(ctx, "notifications", sweep.Options{RequestID: "req-1"})
	if err != nil || res.Deleted != 10 {
		t.Fatalf("run: %+v %v", res, err)
	}
	if n := count(t, pool, `SELECT count(*) FROM sweeprail.run WHERE started_at < now() - interval '30 days'`); n != 0 {
		t.Fatalf("%d runs past the retention left: the run did not prune", n)
	}
	// A skipped run: the lease is held.
	exec(t, pool, `INSERT INTO sweeprail.sweep_lock VALUES ('outbox', gen_random_uuid(), now(), now() + interval '1 hour')`)
	if res := run(t, r, "outbox"); !res.Skipped {
		t.Fatalf("outbox: %+v, want skipped", res)
	}
	// A failed run: a batch that fails on a trigger.
	exec(t, pool, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no deletes today' USING ERRCODE = 'P0001'; END $$`)
	exec(t, pool, `CREATE TRIGGER refuse BEFORE DELETE ON refresh_tokens FOR EACH ROW EXECUTE FUNCTION refuse()`)
	exec(t, pool, `INSERT INTO refresh_tokens (account_id, token_hash, expires_at) VALUES ('00000000-0000-0000-0000-000000000001', '\x00', now() - interval '3 days')`)
	if res := run(t, r, "refresh-tokens"); !res.Failed() {
		t.Fatalf("refresh-tokens: %+v, want batch-error", res)
	}

	runs, err := store.List(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 {
		t.Fatalf("%d runs listed, want the 3 new and the one within the retention", len(runs))
	}
	failed, skipped, done := runs[0], runs[1], runs[2]
	if failed.Sweep != "refresh-tokens" || failed.StopReason == nil || *failed.StopReason != wire.StopBatchError ||
		failed.Error == nil || failed.Error.Code != "P0001" || failed.FinishedAt == nil {
		t.Errorf("failed run %+v", failed)
	}
	if skipped.Sweep != "outbox" || !skipped.Skipped || skipped.StopReason == nil || *skipped.StopReason != wire.StopLeaseHeld {
		t.Errorf("skipped run %+v", skipped)
	}
	if done.Sweep != "notifications" || done.Deleted != 10 || done.RequestID != "req-1" || done.FinishedAt == nil ||
		len(done.Passes) != 1 || done.Passes[0].Deleted != 10 || done.RunID != res.RunID {
		t.Errorf("run %+v", done)
	}
	// The swept table's size at the run's end, from the catalog.
	if p := done.Passes[0]; p.Path != res.Passes[0].Path || p.TableRows == nil || p.TableBytes == nil || *p.TableBytes <= 0 {
		t.Errorf("pass %+v: want its path and its table's size", p)
	}

	t.Run("a run cut before its end keeps its start", func(t *testing.T) {
		if err := store.Start(ctx, "0192a000-0000-7000-8000-000000000001", "notifications", ""); err != nil {
			t.Fatal(err)
		}
		runs, err := store.List(ctx, "notifications", 1)
		if err != nil || len(runs) != 1 || runs[0].FinishedAt != nil || runs[0].StopReason != nil {
			t.Fatalf("%+v %v, want an unfinished run", runs, err)
		}
	})
}

// TestLeaseHeldAnswersCoalesced: a flood of requests against a held lease adds a row per sweep and
// minute, not per request, and the row keeps how many answers it stands for, from when to when,
// and the last request's id.
func TestLeaseHeldAnswersCoalesced(t *testing.T) {
	t.Parallel()
	const (
		requests = 300
		workers  = 6
	)
	pool := dbtest.Pool(t)
	store := history.New(pool, 30*24*time.Hour)
	r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), History: store})
	exec(t, pool, `INSERT INTO sweeprail.sweep_lock VALUES ('outbox', gen_random_uuid(), now(), now() + interval '1 hour')`)

	ids := make(chan string, requests)
	for i := range requests {
		ids <- fmt.Sprintf("req-%03d", i)
	}
	close(ids)
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				res, err := r.Run(ctx, "outbox", sweep.Options{RequestID: id})
				if err == nil && (!res.Skipped || res.StopReason != wire.StopLeaseHeld) {
					err = fmt.Errorf("%s: %+v, want skipped lease-held", id, res)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	runs, err := store.List(ctx, "outbox", 1000)
	if err != nil {
		t.Fatal(err)
	}
	// One row per minute: two when the requests straddle a minute's end.
	if len(runs) < 1 || len(runs) > 2 {
		t.Fatalf("%d rows for %d lease-held answers, want one per minute", len(runs), requests)
	}
	var total int64
	for _, run := range runs {
		total += run.Requests
		if !run.Skipped || run.StopReason == nil || *run.StopReason != wire.StopLeaseHeld || run.FinishedAt == nil ||
			run.FinishedAt.Before(run.StartedAt) || !strings.HasPrefix(run.RequestID, "req-") {
			t.Errorf("row %+v", run)
		}
	}
	if total != requests {
		t.Fatalf("the rows count %d answers, want %d", total, requests)
	}

	t.Run("a run that ran is not counted with the lease-held answers", func(t *testing.T) {
		exec(t, pool, `DELETE FROM sweeprail.sweep_lock`)
		for range 2 {
			run(t, r, "outbox")
		}
		// Both found nothing: they share a row of their own (two across a minute's end).
		if n := count(t, pool, `SELECT sum(requests) FROM sweeprail.run WHERE sweep = 'outbox' AND NOT skipped`); n != 2 {
			t.Fatalf("the runs' rows count %d runs, want 2", n)
		}
	})
}

// TestHistoryWriteFailure: a run whose end the history cannot write says so in its answer
// (historyError), in sweeprail_history_write_failures_total and in the store's unrecorded runs,
// which GET /internal/runs lists; the rows it deleted are reported as deleted all the same.
func TestHistoryWriteFailure(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	at := dbNow(t, pool)
	seedNotifications(t, pool, at, 20, 0)
	exec(t, pool, `CREATE FUNCTION sweeprail.refuse_run() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'history is read-only today' USING ERRCODE = 'P0001'; END $$`)
	exec(t, pool, `CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON sweeprail.run FOR EACH ROW EXECUTE FUNCTION sweeprail.refuse_run()`)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Labels{Sweeps: []metrics.Sweep{{Name: "notifications", Passes: []string{"read"}}}, Outcomes: wire.Outcomes()})
	if err != nil {
		t.Fatal(err)
	}
	store := history.New(pool, 30*24*time.Hour)
	r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), AsOf: fixedAsOf(at), History: store, Metrics: m})

	res := run(t, r, "notifications")
	if res.Deleted != 20 || res.Failed() {
		t.Fatalf("run %+v: want 20 deleted, not a failed run", res)
	}
	if res.HistoryError == nil || res.HistoryError.Code != "P0001" {
		t.Errorf("answer's historyError %+v, want the history's P0001", res.HistoryError)
	}
	const fails = `
		# HELP sweeprail_history_write_failures_total Runs whose end could not be written to the run history (sweeprail.run), by sweep.
		# TYPE sweeprail_history_write_failures_total counter
		sweeprail_history_write_failures_total{sweep="notifications"} 1
	`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(fails), "sweeprail_history_write_failures_total"); err != nil {
		t.Error(err)
	}
	un := store.UnrecordedRuns("notifications")
	if len(un) != 1 || un[0].RunID != res.RunID || !strings.Contains(un[0].Error, "history is read-only today") {
		t.Errorf("unrecorded %+v, want run %s", un, res.RunID)
	}
	if other := store.UnrecordedRuns("outbox"); len(other) != 0 {
		t.Errorf("outbox's unrecorded %+v, want none", other)
	}

	exec(t, pool, `DROP TRIGGER refuse ON sweeprail.run`)
	if res := run(t, r, "notifications"); res.HistoryError != nil {
		t.Errorf("with the history writable again: historyError %+v", res.HistoryError)
	}
}
