package sweep_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestIdleRunsCoalesced: runs that find nothing to do share one row per sweep and minute, which
// counts them and keeps the last one's reference time; a run that deleted, failed or was cut
// short keeps a row of its own, between them.
func TestIdleRunsCoalesced(t *testing.T) {
	t.Parallel()
	const runs = 300
	pool := dbtest.Pool(t)
	store := history.New(pool, 30*24*time.Hour)
	r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), History: store})
	var last *wire.Result
	for i := range runs {
		res, err := r.Run(ctx, "notifications", sweep.Options{RequestID: fmt.Sprintf("req-%03d", i)})
		if err != nil || res.StopReason != wire.StopExhausted || res.Deleted != 0 {
			t.Fatalf("run %d: %+v, %v; want exhausted with nothing deleted", i, res, err)
		}
		last = res
	}
	rows := count(t, pool, `SELECT count(*) FROM sweeprail.run WHERE sweep = 'notifications'`)
	t.Logf("%d rows in sweeprail.run after %d runs that found nothing", rows, runs)
	// One row per minute: two when the runs straddle a minute's end.
	if rows < 1 || rows > 2 {
		t.Fatalf("%d rows for %d idle runs, want one per minute", rows, runs)
	}
	list, err := store.List(ctx, "notifications", 10)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, h := range list {
		total += h.Requests
		if h.Skipped || h.StopReason == nil || *h.StopReason != wire.StopExhausted || h.FinishedAt == nil || h.FinishedAt.Before(h.StartedAt) {
			t.Errorf("row %+v", h)
		}
	}
	if total != runs {
		t.Fatalf("the rows count %d runs, want %d", total, runs)
	}
	if newest := list[0]; newest.RequestID != "req-299" || newest.ReferenceTime == nil || last.ReferenceTime == nil || !newest.ReferenceTime.Equal(*last.ReferenceTime) ||
		len(newest.Passes) != len(last.Passes) {
		t.Errorf("newest row %+v, want the last run's request id, reference time %v and passes", newest, last.ReferenceTime)
	}

	t.Run("a run with work and one stopped early keep their own rows", func(t *testing.T) {
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 5, 0)
		if res := run(t, r, "notifications"); res.Deleted != 5 {
			t.Fatalf("run %+v, want 5 deleted", res)
		}
		tight := settings()
		tight.Deadline = time.Nanosecond
		cut := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: tight, History: store})
		seedNotifications(t, pool, at, 5, 0)
		res, err := cut.Run(ctx, "notifications", sweep.Options{})
		if err != nil || res.StopReason == wire.StopExhausted {
			t.Fatalf("run under a deadline of 1ns: %+v, %v; want stopped early", res, err)
		}
		if n := count(t, pool, `SELECT count(*) FROM sweeprail.run WHERE sweep = 'notifications' AND requests = 1 AND idle_minute IS NULL`); n != 2 {
			t.Errorf("%d rows of their own, want the run that deleted and the one stopped early", n)
		}
	})
}
