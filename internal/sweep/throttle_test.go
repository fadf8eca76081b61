package sweep_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/replica"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestReplicaThrottle runs a sweep against a primary whose streaming standby has paused its
// replay: the run waits for it until its budget is spent and answers truncated with budget, having
// deleted nothing; once the standby catches up, the next run drains.
func TestReplicaThrottle(t *testing.T) {
	t.Parallel()
	cluster := dbtest.NewCluster(t)
	u := cluster.Database(t)
	standby := dbtest.StartStandby(t, cluster.URL)
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	at := dbNow(t, pool)
	exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com')`)
	exec(t, pool, `INSERT INTO notifications (account_id, kind, read_at)
		SELECT '00000000-0000-0000-0000-000000000001', 'old', $1::timestamptz - interval '40 days' FROM generate_series(1, 5000)`, at)
	standby.WaitCaughtUp(t)

	limits := replica.Limits{MaxLag: time.Second, MaxLagBytes: 1 << 20}
	standby.PauseReplay(t)
	// Over 1 MiB of WAL the standby has not replayed.
	exec(t, pool, `CREATE TABLE ballast AS SELECT repeat('x', 1000) AS pad FROM generate_series(1, 4000)`)

	clock := newFakeClock()
	sleep := func(_ context.Context, d time.Duration) { clock.Advance(d) }
	s := settings()
	s.Deadline = 10 * time.Second
	th := replica.New(replica.Config{Limits: limits, Pool: pool, Now: clock.Now, Sleep: sleep})
	r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec(t, "notifications")}, Settings: s,
		AsOf: fixedAsOf(at), Now: clock.Now, Sleep: sleep, Throttle: th})
	res := run(t, r, "notifications")
	if res.StopReason != wire.StopBudget || !res.Truncated || res.Deleted != 0 {
		t.Fatalf("run behind a paused standby: %+v, want budget, truncated, nothing deleted", res)
	}
	if res.ThrottledMs < 9000 || res.Passes[0].ThrottledMs != res.ThrottledMs {
		t.Fatalf("throttled %d ms (pass %d), want about the 10s budget", res.ThrottledMs, res.Passes[0].ThrottledMs)
	}

	standby.ResumeReplay(t)
	standby.WaitCaughtUp(t)
	r = newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec(t, "notifications")}, Settings: settings(),
		AsOf: fixedAsOf(at), Throttle: replica.New(replica.Config{Limits: limits, Pool: pool})})
	if res := run(t, r, "notifications"); res.StopReason != wire.StopExhausted || res.Deleted != 5000 {
		t.Fatalf("run after the standby caught up: %+v, want all 5000 deleted", res)
	}
}
