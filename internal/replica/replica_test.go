package replica_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/replica"
)

func TestLimitsOver(t *testing.T) {
	const mb = 1 << 20
	standby := func(bytes int64, replay time.Duration) replica.Lag {
		return replica.Lag{Kind: replica.KindStandby, Name: "s", Bytes: bytes, Replay: replay}
	}
	slot := func(bytes int64) replica.Lag { return replica.Lag{Kind: replica.KindSlot, Name: "slot", Bytes: bytes} }
	both := replica.Limits{MaxLag: time.Second, MaxLagBytes: 16 * mb}
	tests := []struct {
		name   string
		limits replica.Limits
		lags   []replica.Lag
		over   bool
		worst  string
	}{
		{"no standby", both, nil, false, ""},
		{"within both", both, []replica.Lag{standby(mb, 500*time.Millisecond)}, false, ""},
		{"at the limits is within", both, []replica.Lag{standby(16*mb, time.Second)}, false, ""},
		{"bytes over", both, []replica.Lag{standby(16*mb+1, 0)}, true, "s"},
		{"replay lag over", both, []replica.Lag{standby(1, time.Second+time.Microsecond)}, true, "s"},
		// PostgreSQL keeps the last measured replay_lag for a while after the standby caught up.
		{"stale replay lag of a caught-up standby", both, []replica.Lag{standby(0, time.Hour)}, false, ""},
		{"bytes limit off", replica.Limits{MaxLag: time.Second}, []replica.Lag{standby(1<<40, 0)}, false, ""},
		{"time limit off", replica.Limits{MaxLagBytes: mb}, []replica.Lag{standby(1, time.Hour)}, false, ""},
		{"slot over in bytes", both, []replica.Lag{slot(17 * mb)}, true, "slot"},
		// A slot has no replay lag, and a Lag of a slot never carries one; none is inferred.
		{"slot under the time limit only", replica.Limits{MaxLag: time.Second}, []replica.Lag{
			{Kind: replica.KindSlot, Name: "slot", Bytes: 1 << 40, Replay: time.Hour}}, false, ""},
		{"worst is the furthest behind in bytes", both, []replica.Lag{
			standby(2, 2*time.Second), {Kind: replica.KindStandby, Name: "far", Bytes: 20 * mb}, slot(17 * mb)}, true, "far"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			worst, over := tt.limits.Over(tt.lags)
			if over != tt.over || worst.Name != tt.worst {
				t.Errorf("Over = %+v, %v; want %q, %v", worst, over, tt.worst, tt.over)
			}
		})
	}
}

func TestThrottleOff(t *testing.T) {
	for _, tt := range []struct {
		name string
		th   *replica.Throttle
	}{
		{"nil", nil},
		// No pool: an off throttle must not read anything.
		{"no limits", replica.New(replica.Config{})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.th.Enabled() {
				t.Error("Enabled")
			}
			waited, err := tt.th.Wait(context.Background(), time.Now().Add(time.Hour))
			if waited != 0 || err != nil {
				t.Errorf("Wait = %v, %v; want 0, nil", waited, err)
			}
			if err := tt.th.Check(context.Background()); err != nil {
				t.Errorf("Check: %v", err)
			}
		})
	}
}

// fakeClock is a clock whose sleep advances it instead of sleeping: a wait until a deadline
// ends exactly on it, at once, whatever the machine's load.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
	// onSleep, when set, runs at each sleep (a test cancels its context there).
	onSleep func()
	// step advances the clock at every reading, as the time a query takes does.
	step time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

func (c *fakeClock) sleep(_ context.Context, d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.sleeps = append(c.sleeps, d)
	f := c.onSleep
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// TestThrottle runs the throttle against a real streaming standby of a private cluster (a
// standby on the shared test server would be seen by every other package's throttle, and theirs
// by this one). Lag is made by pausing the standby's replay and writing on the primary.
func TestThrottle(t *testing.T) {
	t.Parallel()
	start := time.Now()
	// wal_level=logical only for the logical slot case; a standby streams the same way.
	cluster := dbtest.NewCluster(t, "wal_level=logical")
	standby := dbtest.StartStandby(t, cluster.URL)
	t.Logf("cluster and streaming standby ready in %s", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	pool := openPool(t, cluster.URL)
	exec(t, pool, `CREATE TABLE filler (id bigserial PRIMARY KEY, pad text NOT NULL)`)
	// write puts about 4 MB of WAL on the primary and returns the WAL position after it.
	var lastWrite string
	write := func(t *testing.T) {
		t.Helper()
		exec(t, pool, `INSERT INTO filler (pad) SELECT repeat('x', 1000) FROM generate_series(1, 4000)`)
		if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lastWrite); err != nil {
			t.Fatal(err)
		}
	}
	// replayLagOver300ms waits until the primary shows the paused standby's replay_lag over
	// 300ms. The primary computes replay_lag when the standby reports: at once when it receives
	// the write, then every second (its status interval) while it is paused and the primary
	// quiet. Requiring the report of the last write rules out a stale value left by an earlier
	// case: the report that moves flush_lsn recomputes replay_lag with it.
	replayLagOver300ms := func(t *testing.T) {
		t.Helper()
		waitFor(t, pool, "replay_lag over 300ms", `SELECT flush_lsn >= $2::pg_lsn AND replay_lag > interval '300 ms'
			FROM pg_stat_replication WHERE application_name = $1`, standby.Name, lastWrite)
	}
	const mb = 1 << 20
	throttle := func(limits replica.Limits, clock *fakeClock) *replica.Throttle {
		return replica.New(replica.Config{Limits: limits, Pool: pool, Recheck: 300 * time.Millisecond, Now: clock.now, Sleep: clock.sleep})
	}
	// waitsUntilDeadline asserts that a Wait on a standby that stays over lasts exactly until
	// its deadline, rechecking, without ever sleeping past it.
	waitsUntilDeadline := func(t *testing.T, limits replica.Limits) {
		t.Helper()
		clock := newFakeClock()
		until := clock.now().Add(time.Second)
		waited, err := throttle(limits, clock).Wait(ctx, until)
		if err != nil {
			t.Fatal(err)
		}
		if waited != time.Second || !clock.now().Equal(until) {
			t.Errorf("waited %v, clock at until%+v; want 1s, at until", waited, clock.now().Sub(until))
		}
		// 300ms rechecks, the last one cut to what is left.
		want := []time.Duration{300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond, 100 * time.Millisecond}
		if !slices.Equal(clock.sleeps, want) {
			t.Errorf("slept %v, want %v", clock.sleeps, want)
		}
	}
	// noWait asserts that a Wait returns at once, having waited 0: the read that found every
	// standby within the limits is not throttled time, though it takes time (a step per reading).
	noWait := func(t *testing.T, limits replica.Limits) {
		t.Helper()
		clock := newFakeClock()
		clock.step = time.Millisecond
		waited, err := throttle(limits, clock).Wait(ctx, clock.now().Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if waited != 0 || len(clock.sleeps) != 0 {
			t.Errorf("waited %v, slept %v; want no wait", waited, clock.sleeps)
		}
	}
	both := replica.Limits{MaxLag: 200 * time.Millisecond, MaxLagBytes: mb}

	t.Run("Read lists the standby", func(t *testing.T) {
		lags, err := replica.Read(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if len(lags) != 1 || lags[0].Kind != replica.KindStandby || lags[0].Name != standby.Name {
			t.Fatalf("Read = %+v, want the one standby %s", lags, standby.Name)
		}
		if err := replica.Check(ctx, pool); err != nil {
			t.Errorf("Check: %v", err)
		}
	})

	t.Run("healthy standby: no wait", func(t *testing.T) {
		write(t)
		standby.WaitCaughtUp(t)
		noWait(t, both)
	})

	t.Run("paused replay, bytes over: waits until the deadline", func(t *testing.T) {
		standby.PauseReplay(t)
		write(t)
		waitsUntilDeadline(t, replica.Limits{MaxLagBytes: mb})
	})

	t.Run("paused replay, replay lag over: waits until the deadline", func(t *testing.T) {
		replayLagOver300ms(t)
		waitsUntilDeadline(t, replica.Limits{MaxLag: 200 * time.Millisecond})
	})

	t.Run("cancelled while waiting: returns at once with the context's error", func(t *testing.T) {
		clock := newFakeClock()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		clock.onSleep = cancel
		waited, err := throttle(both, clock).Wait(cctx, clock.now().Add(time.Hour))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, %v; want context.Canceled", waited, err)
		}
		if len(clock.sleeps) != 1 || waited != 300*time.Millisecond {
			t.Errorf("waited %v after sleeps %v; want one recheck", waited, clock.sleeps)
		}
	})

	t.Run("resumed: the wait ends when the primary sees the standby caught up", func(t *testing.T) {
		standby.ResumeReplay(t)
		th := replica.New(replica.Config{Limits: both, Pool: pool, Recheck: 20 * time.Millisecond})
		begin := time.Now()
		waited, err := th.Wait(ctx, begin.Add(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// The primary hears of the replay at the standby's next status message: within its
		// 1s status interval, plus the replay of 4 MB.
		t.Logf("waited %s after the resume", waited.Round(time.Millisecond))
		if waited > 5*time.Second {
			t.Errorf("waited %v; want the wait to end within the standby's status interval and the replay", waited)
		}
		lags, err := replica.Read(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if _, over := both.Over(lags); over {
			t.Errorf("Wait returned with %+v still over %+v", lags, both)
		}
	})

	t.Run("caught up while the primary still shows the old replay_lag: no wait", func(t *testing.T) {
		standby.PauseReplay(t)
		write(t)
		replayLagOver300ms(t)
		standby.ResumeReplay(t)
		standby.WaitCaughtUp(t)
		// After a standby catches up, the primary keeps the last measured replay_lag until the
		// standby's next status message (then NULL). When seen, the case is the one that
		// matters: replay_lag over the limit, nothing left to replay.
		var stale bool
		if err := pool.QueryRow(ctx, `SELECT coalesce(replay_lag > interval '200 ms', false) FROM pg_stat_replication WHERE application_name = $1`,
			standby.Name).Scan(&stale); err != nil {
			t.Fatal(err)
		}
		t.Logf("replay_lag still over the limit after the catch-up: %v", stale)
		noWait(t, replica.Limits{MaxLag: 200 * time.Millisecond})
	})

	t.Run("Watch keeps the peak", func(t *testing.T) {
		standby.WaitCaughtUp(t)
		w := replica.StartWatch(ctx, pool, 20*time.Millisecond)
		standby.PauseReplay(t)
		write(t)
		replayLagOver300ms(t)
		standby.ResumeReplay(t)
		standby.WaitCaughtUp(t)
		peak, err := w.Stop()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("peak over %d samples: %d bytes, replay lag %s", peak.Samples, peak.Bytes, peak.Replay)
		if peak.Bytes < 3*mb || peak.Replay <= 300*time.Millisecond {
			t.Errorf("peak %+v, want at least the 4 MB written while paused and the replay lag waited for", peak)
		}
		// A standby that keeps up: the peak is small.
		w = replica.StartWatch(ctx, pool, 20*time.Millisecond)
		write(t)
		standby.WaitCaughtUp(t)
		if peak, err = w.Stop(); err != nil {
			t.Fatal(err)
		}
		t.Logf("keeping up, peak over %d samples: %d bytes, replay lag %s", peak.Samples, peak.Bytes, peak.Replay)
		if peak.Samples == 0 || peak.Replay > 300*time.Millisecond {
			t.Errorf("peak %+v of a standby that keeps up", peak)
		}
	})

	t.Run("a physical slot behind counts in bytes, not in time", func(t *testing.T) {
		exec(t, pool, `SELECT pg_create_physical_replication_slot('lagging', true)`)
		defer exec(t, pool, `SELECT pg_drop_replication_slot('lagging')`)
		write(t)
		standby.WaitCaughtUp(t)
		waitsUntilDeadline(t, replica.Limits{MaxLagBytes: mb})
		noWait(t, replica.Limits{MaxLag: 200 * time.Millisecond})
	})

	t.Run("a logical slot behind does not count", func(t *testing.T) {
		exec(t, pool, `SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')`)
		defer exec(t, pool, `SELECT pg_drop_replication_slot('cdc')`)
		write(t)
		standby.WaitCaughtUp(t)
		noWait(t, both)
	})

	t.Run("a role that cannot see the standbys is refused, not blind", func(t *testing.T) {
		exec(t, pool, `CREATE ROLE lag_reader LOGIN`)
		u, err := url.Parse(cluster.URL)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User("lag_reader")
		reader := openPool(t, u.String())
		if _, err := replica.Read(ctx, reader); !errors.Is(err, replica.ErrNoPrivilege) {
			t.Errorf("Read: %v, want ErrNoPrivilege", err)
		}
		if err := replica.Check(ctx, reader); !errors.Is(err, replica.ErrNoPrivilege) {
			t.Errorf("Check: %v, want ErrNoPrivilege", err)
		}
		clock := newFakeClock()
		th := replica.New(replica.Config{Limits: both, Pool: reader, Now: clock.now, Sleep: clock.sleep})
		if waited, err := th.Wait(ctx, clock.now().Add(time.Second)); !errors.Is(err, replica.ErrNoPrivilege) || waited != 0 {
			t.Errorf("Wait = %v, %v; want 0, ErrNoPrivilege", waited, err)
		}
		exec(t, pool, `GRANT pg_monitor TO lag_reader`)
		if err := replica.Check(ctx, reader); err != nil {
			t.Errorf("Check after GRANT pg_monitor: %v", err)
		}
	})

	t.Run("a standby is refused as the server to read", func(t *testing.T) {
		sb := openPool(t, standby.URL)
		if _, err := replica.Read(ctx, sb); !errors.Is(err, replica.ErrNotPrimary) {
			t.Errorf("Read: %v, want ErrNotPrimary", err)
		}
		if err := replica.Check(ctx, sb); !errors.Is(err, replica.ErrNotPrimary) {
			t.Errorf("Check: %v, want ErrNotPrimary", err)
		}
	})
	t.Logf("TestThrottle took %s", time.Since(start).Round(time.Millisecond))
}

func openPool(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := dbpool.NewPool(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// waitFor polls a boolean query every 20ms until it is true, for at most 30s.
func waitFor(t *testing.T, pool *pgxpool.Pool, what, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var ok *bool
		if err := pool.QueryRow(ctx, sql, args...).Scan(&ok); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok != nil && *ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
