package sweep_test

import (
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/lease"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestLeaseTakeover: a run takes over at once the lease of a run whose session is gone and says
// so in its answer; a run whose session lives, blocked mid-batch on another connection's lock,
// keeps its lease against a second run, directly and behind a pooler in transaction mode.
func TestLeaseTakeover(t *testing.T) {
	t.Parallel()

	t.Run("a dead holder's lease", func(t *testing.T) {
		t.Parallel()
		pool, u := poolAndURL(t)
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings()})
		dead := dbtest.Conn(t, u)
		held, err := lease.Acquire(ctx, dead, "notifications", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pid := int32(dead.PgConn().PID())
		if err := dead.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid) > 0 {
			time.Sleep(5 * time.Millisecond) // the backend's exit, read from the server
		}
		res := run(t, r, "notifications")
		if res.Skipped || res.StopReason != wire.StopExhausted || res.TookOverLease != held.Owner.String() {
			t.Fatalf("run %+v, want it run, saying it took over %s", res, held.Owner)
		}
		if n := count(t, pool, `SELECT count(*) FROM sweeprail.sweep_lock`); n != 0 {
			t.Errorf("%d leases left, want the run's released", n)
		}
	})

	// Through a pooler in transaction mode, a session is a backend only while a transaction
	// holds it: the lease's session must be one, or the pooler could retire the backend the
	// lease names while the run goes on, and a second run take the lease over.
	for _, via := range []string{"direct", "transaction"} {
		t.Run("two live runs never overlap, "+via, func(t *testing.T) {
			t.Parallel()
			direct, u := poolAndURL(t)
			pool := direct
			if via != "direct" {
				var err error
				if pool, err = dbpool.NewPool(ctx, dbtest.PoolerURL(t, via, u)); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pool.Close)
			}
			s := settings()
			s.LockTimeout = 30 * time.Second
			r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s})
			seedNotifications(t, direct, dbNow(t, direct), 10, 0)
			tx, pid := begin(t, u)
			if _, err := tx.Exec(ctx, `LOCK TABLE notifications IN ACCESS EXCLUSIVE MODE`); err != nil {
				t.Fatal(err)
			}
			first := make(chan *wire.Result, 1)
			go func() {
				res, _ := r.Run(ctx, "notifications", sweep.Options{})
				first <- res
			}()
			waitBlockedBy(t, direct, pid)
			if n := count(t, direct, `SELECT count(*) FROM sweeprail.sweep_lock l JOIN pg_stat_activity a
  ON a.pid = l.holder_pid AND a.backend_start = l.holder_started AND a.state = 'idle in transaction'`); n != 1 {
				t.Fatalf("%d leases naming a session held in a transaction, want the blocked run's", n)
			}
			if second := run(t, r, "notifications"); !second.Skipped || second.StopReason != wire.StopLeaseHeld {
				t.Fatalf("second run while the first is blocked: %+v, want lease-held", second)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if res := <-first; res == nil || res.Deleted != 10 || res.TookOverLease != "" {
				t.Fatalf("first run %+v, want 10 deleted and no takeover", res)
			}
		})
	}
}
