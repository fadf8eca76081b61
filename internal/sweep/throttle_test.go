package sweep_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/metrics"
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
	pool, err := dbpool.NewPool(ctx, u)
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

// lagReadSchema shadows pg_stat_replication for a session whose search_path puts schema lagread
// before pg_catalog: the throttle's read goes through lagread.standbys(), which answers the real
// view's rows until lagread.refuse says otherwise, then fails as a role without pg_monitor's read
// would if PostgreSQL refused it outright.
const lagReadSchema = `
CREATE SCHEMA lagread;
CREATE TABLE lagread.refuse (refused boolean NOT NULL);
INSERT INTO lagread.refuse VALUES (false);
CREATE FUNCTION lagread.standbys() RETURNS SETOF pg_catalog.pg_stat_replication LANGUAGE plpgsql AS $$
BEGIN
	IF (SELECT refused FROM lagread.refuse) THEN
		RAISE EXCEPTION 'permission denied for view pg_stat_replication' USING ERRCODE = '42501';
	END IF;
	RETURN QUERY SELECT * FROM pg_catalog.pg_stat_replication;
END $$;
CREATE VIEW lagread.pg_stat_replication AS SELECT * FROM lagread.standbys();`

// TestReplicaThrottleFailsClosed makes the lag read fail between two batches: the pass stops with
// batch-error naming the cause and the limit it could not keep, the run's later pass never
// starts, and the runs metric counts a batch-error. A throttle that cannot read the lag never
// lets a batch through unthrottled.
func TestReplicaThrottleFailsClosed(t *testing.T) {
	t.Parallel()
	pool, u := poolAndURL(t)
	exec(t, pool, lagReadSchema)
	lagPool := poolWith(t, u, map[string]string{"search_path": "lagread, pg_catalog, public"})
	at := dbNow(t, pool)
	exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com')`)
	exec(t, pool, `INSERT INTO notifications (account_id, kind, read_at)
		SELECT '00000000-0000-0000-0000-000000000001', CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END, $1::timestamptz - interval '40 days'
		FROM generate_series(1, 1000) i`, at)
	pass := func(name, kind string) policy.Pass {
		return policy.Pass{Name: name, Table: "notifications", AgeColumn: "read_at", Where: "t.kind = '" + kind + "'", Retention: 30 * 24 * time.Hour}
	}
	specs := []policy.Spec{{Name: "notifications", Passes: []policy.Pass{pass("even", "even"), pass("odd", "odd")}}}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Labels{Sweeps: []metrics.Sweep{{Name: "notifications", Passes: []string{"even", "odd"}}}, Outcomes: wire.Outcomes()})
	if err != nil {
		t.Fatal(err)
	}
	s := fixed(settings(), 100)
	s.Pause = time.Millisecond
	batches := 0
	r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Settings: s, AsOf: fixedAsOf(at), Metrics: m,
		Throttle: replica.New(replica.Config{Limits: replica.Limits{MaxLag: time.Second}, Pool: lagPool}),
		// The pause between batches: after the second, the lag can no longer be read.
		Sleep: func(context.Context, time.Duration) {
			if batches++; batches == 2 {
				exec(t, pool, `UPDATE lagread.refuse SET refused = true`)
			}
		}})
	res := run(t, r, "notifications")
	const want = `no batch runs while the replica lag cannot be read (MAX_REPLICA_LAG 1s): throttle on replica lag: read replica lag: ERROR: permission denied for view pg_stat_replication (SQLSTATE 42501)`
	if res.StopReason != wire.StopBatchError || res.Error == nil || res.Error.Pass != "even" || res.Error.Code != "42501" ||
		!strings.Contains(res.Error.Message, want) {
		t.Fatalf("run: %+v, error %+v; want batch-error in pass even: %s", res, res.Error, want)
	}
	if len(res.Passes) != 1 || res.Deleted != 200 || res.Passes[0].BatchCount != 2 {
		t.Fatalf("run: %+v; want the two batches before the failed read, and pass odd never started", res)
	}
	if n := count(t, pool, `SELECT count(*) FROM notifications`); n != 800 {
		t.Fatalf("%d rows left, want 800: a batch ran after the lag read failed", n)
	}
	if got := runsCounted(t, reg, "notifications", string(wire.StopBatchError)); got != 1 {
		t.Errorf("sweeprail_runs_total{outcome=batch-error} is %v, want 1", got)
	}
}

// runsCounted reads sweeprail_runs_total of sweep and outcome from reg.
func runsCounted(t *testing.T, reg *prometheus.Registry, sweep, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sweeprail_runs_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range mt.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["sweep"] == sweep && labels["outcome"] == outcome {
				return mt.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no sweeprail_runs_total{sweep=%q,outcome=%q}", sweep, outcome)
	return 0
}

// TestThrottleOneConnection: a pass holds a connection for its batches, and gives it back before
// each wait; so a throttle that reads the lag from the same pool of a single connection reads it
// between batches instead of waiting on the pass for its query timeout.
func TestThrottleOneConnection(t *testing.T) {
	t.Parallel()
	pool, u := poolAndURL(t)
	one, err := dbpool.NewPool(ctx, u+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	at := dbNow(t, pool)
	seedNotifications(t, pool, at, 300, 0)
	specs := []policy.Spec{{Name: "notifications", Passes: []policy.Pass{{
		Name: "read", Table: "notifications", AgeColumn: "read_at", Retention: 30 * 24 * time.Hour}}}}
	r := newRunner(t, sweep.Config{Pool: one, Specs: specs, Settings: fixed(settings(), 100), AsOf: fixedAsOf(at),
		Throttle: replica.New(replica.Config{Limits: replica.Limits{MaxLag: time.Second}, Pool: one, QueryTimeout: 2 * time.Second})})
	res := run(t, r, "notifications")
	if res.Error != nil || res.Deleted != 300 || res.StopReason != wire.StopExhausted {
		t.Fatalf("run: deleted %d, stop %s, error %+v; want all 300 rows, exhausted", res.Deleted, res.StopReason, res.Error)
	}
}
