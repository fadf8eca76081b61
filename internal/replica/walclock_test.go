package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/replica"
)

// TestThrottleBehind checks the time limit on a standby that stopped replaying: it counts from the
// throttle's own reads, so it is over once MaxLag has passed since the first read that saw WAL the
// standby has not replayed, whatever replay_lag (computed from the standby's reports of WAL it
// did replay) still says. make bench's replica run measured a 1s limit let a slow standby fall 3s
// behind on replay_lag alone.
func TestThrottleBehind(t *testing.T) {
	t.Parallel()
	cluster := dbtest.NewCluster(t)
	standby := dbtest.StartStandby(t, cluster.URL)
	ctx := context.Background()
	pool := openPool(t, cluster.URL)
	exec(t, pool, `CREATE TABLE filler (id bigserial PRIMARY KEY, pad text NOT NULL)`)
	standby.WaitCaughtUp(t)
	standby.PauseReplay(t)
	t.Cleanup(func() { standby.ResumeReplay(t) })

	clock := newFakeClock()
	// A limit far above any replay_lag this test can make in real time: only Behind can pass it.
	limits := replica.Limits{MaxLag: 5 * time.Second}
	th := replica.New(replica.Config{Limits: limits, Pool: pool, Recheck: 300 * time.Millisecond, Now: clock.now, Sleep: clock.sleep})

	exec(t, pool, `INSERT INTO filler (pad) SELECT repeat('x', 1000) FROM generate_series(1, 1000)`)
	// The first read dates the new WAL: written just now, nothing to wait for yet.
	if waited, err := th.Wait(ctx, clock.now().Add(time.Second)); err != nil || waited != 0 {
		t.Fatalf("first Wait = %v, %v; want no wait", waited, err)
	}
	lags, err := replica.Read(ctx, pool)
	if err != nil || len(lags) != 1 || lags[0].Bytes == 0 || lags[0].Replay >= limits.MaxLag {
		t.Fatalf("precondition: the paused standby behind in bytes, replay_lag under the limit: %+v %v", lags, err)
	}
	// Six seconds later by the throttle's clock, with the standby still paused.
	clock.sleep(ctx, 6*time.Second)
	exec(t, pool, `INSERT INTO filler (pad) SELECT repeat('x', 1000) FROM generate_series(1, 1000)`)
	until := clock.now().Add(time.Second)
	waited, err := th.Wait(ctx, until)
	if err != nil || waited != time.Second || !clock.now().Equal(until) {
		t.Fatalf("Wait = %v, %v; want a wait until the deadline (1s): the standby is 6s behind", waited, err)
	}

	// A fresh throttle (no history): a standby that replayed nothing over 300ms of reads while it
	// had WAL to replay will not catch up in any time: over at once, not MaxLag later.
	clock2 := newFakeClock()
	th2 := replica.New(replica.Config{Limits: limits, Pool: pool, Recheck: 300 * time.Millisecond, Now: clock2.now, Sleep: clock2.sleep})
	if waited, err := th2.Wait(ctx, clock2.now().Add(time.Second)); err != nil || waited != 0 {
		t.Fatalf("fresh throttle, first Wait = %v, %v; want no wait (no replay rate yet)", waited, err)
	}
	clock2.sleep(ctx, 300*time.Millisecond)
	until = clock2.now().Add(time.Second)
	if waited, err := th2.Wait(ctx, until); err != nil || waited != time.Second {
		t.Fatalf("stalled standby: Wait = %v, %v; want a wait until the deadline: it replays nothing", waited, err)
	}

	standby.ResumeReplay(t)
	standby.WaitCaughtUp(t)
	if waited, err := th.Wait(ctx, clock.now().Add(time.Second)); err != nil || waited != 0 {
		t.Fatalf("after catching up: Wait = %v, %v; want no wait", waited, err)
	}
}
