package reliability

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestKillMidSweep: kill -9 of the api in the middle of a sweep.
//
//   - No batch is half-applied: every fresh row is still there, unchanged (count and checksum),
//     eligible rows only went down, and by whole batches (the batch size is pinned, see below).
//   - The dead run's lease is taken over at once: its session ended with the process, so a new
//     process's first run, well before the lease's TTL (2 × SWEEP_DEADLINE), takes it over, says
//     so (tookOverLease names the dead run's owner) and finishes: every eligible row gone, every
//     fresh row kept.
func TestKillMidSweep(t *testing.T) {
	t.Parallel()
	const (
		eligible = 5000
		fresh    = 1000
		batch    = 100
		deadline = 30 * time.Second // lease TTL 60s: a takeover is not the TTL passing
	)
	u := dbtest.URL(t)
	pool := openPool(t, u)
	seedNotifications(t, pool, eligible, fresh)
	before := notificationsState(t, pool)

	// Sizing pinned at 100 rows: BATCH_TARGET=1us makes every batch "too slow", and the sizer
	// never goes below its floor of 100; so committed work is a whole number of batches of 100.
	// The pause keeps the run mid-sweep for as long as the test needs.
	env := map[string]string{
		"SWEEP_DEADLINE":          deadline.String(),
		"BATCH_STATEMENT_TIMEOUT": "1s",
		"BATCH_LOCK_TIMEOUT":      "1s",
		"COUNT_TIMEOUT":           "1s",
		"SERVER_WRITE_TIMEOUT":    "40s",
		"SHUTDOWN_GRACE":          "2s",
		"BATCH_SIZE":              fmt.Sprint(batch),
		"BATCH_TARGET":            "1us",
		"BATCH_PAUSE":             "100ms",
	}
	first := startAPI(t, "reliability-kill-first", u, env)

	req := signed{path: "/internal/sweep-notifications", body: fmt.Sprintf(`{"batchSize": %d}`, batch)}.request(t, first.url)
	answered := make(chan answer, 1)
	go func() { answered <- send(req) }()

	// Mid-sweep, deterministically: the run holds its lease and has committed three batches.
	waitFor(t, "the run to hold its lease and commit three batches", 15*time.Second, func() bool {
		return scalar[int64](t, pool, `SELECT count(*) FROM sweeprail.sweep_lock WHERE label = 'notifications'`) == 1 &&
			notificationsState(t, pool).eligible <= eligible-3*batch
	})
	owner := scalar[string](t, pool, `SELECT owner::text FROM sweeprail.sweep_lock WHERE label = 'notifications'`)
	first.kill9(t)
	if a := <-answered; a.err == nil {
		t.Fatalf("the killed process answered HTTP %d: %s", a.status, a.body)
	}

	// PostgreSQL rolls back the dead client's open transaction when it notices the closed socket;
	// its sessions vanishing is the sign it has, and that nothing of it still runs.
	waitFor(t, "the killed process's sessions to end", 10*time.Second, func() bool {
		return sessions(t, pool, first.app) == 0
	})
	afterKill := notificationsState(t, pool)
	t.Logf("killed after %d of %d eligible rows were deleted", eligible-afterKill.eligible, eligible)
	if afterKill.fresh != before.fresh || afterKill.freshSum != before.freshSum {
		t.Fatalf("fresh rows changed by the killed run: %d rows sum %s, were %d sum %s",
			afterKill.fresh, afterKill.freshSum, before.fresh, before.freshSum)
	}
	if afterKill.eligible >= eligible || afterKill.eligible == 0 {
		t.Fatalf("%d eligible rows left of %d: the kill did not land mid-sweep", afterKill.eligible, eligible)
	}
	if gone := eligible - afterKill.eligible; gone%batch != 0 {
		t.Errorf("%d rows deleted, not a whole number of %d-row batches: a batch was half applied", gone, batch)
	}
	if got := scalar[string](t, pool, `SELECT owner::text FROM sweeprail.sweep_lock WHERE label = 'notifications'`); got != owner {
		t.Fatalf("lease owner %s, want the dead run's %s", got, owner)
	}

	// A new process, as an orchestrator would start. No pause, default sizing: once it gets the
	// lease it finishes in one run.
	env["BATCH_PAUSE"], env["BATCH_TARGET"] = "0s", ""
	second := startAPI(t, "reliability-kill-second", u, env)

	t.Run("taken over at once, the dead run's session being gone", func(t *testing.T) {
		if left := scalar[float64](t, pool, `SELECT extract(epoch FROM locked_until - now()) FROM sweeprail.sweep_lock WHERE label = 'notifications'`); left <= 0 {
			t.Fatalf("the dead run's lease expired %.1fs ago: a takeover would prove nothing", -left)
		}
		a := second.post(t, "notifications", `{}`)
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("HTTP %d %v: %s", a.status, a.err, a.body)
		}
		res := a.result(t)
		if res.Skipped || res.StopReason != wire.StopExhausted || res.Deleted != afterKill.eligible || res.TookOverLease != owner {
			t.Errorf("answer %s, want exhausted with the %d rows left deleted, taking over lease %s", a.body, afterKill.eligible, owner)
		}
		end := notificationsState(t, pool)
		if end.eligible != 0 {
			t.Errorf("%d eligible rows survive", end.eligible)
		}
		if end.fresh != before.fresh || end.freshSum != before.freshSum {
			t.Errorf("fresh rows: %d sum %s, want %d sum %s (rows lost or changed)", end.fresh, end.freshSum, before.fresh, before.freshSum)
		}
		if n := scalar[int64](t, pool, `SELECT count(*) FROM sweeprail.sweep_lock`); n != 0 {
			t.Errorf("%d lease rows left after the completing run", n)
		}
	})
	if err := second.terminate(t, 10*time.Second); err != nil {
		t.Errorf("second api exited with %v, want 0", err)
	}
}
