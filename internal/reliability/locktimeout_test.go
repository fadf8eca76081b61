package reliability

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestLockTimeout: a batch blocked by another transaction's ACCESS EXCLUSIVE lock on its table
// gives up after BATCH_LOCK_TIMEOUT with SQLSTATE 55P03, well before the statement timeout, and
// nothing hangs: the answer is a 500 batch-error naming the code, the lease is released, no
// session of the api is left waiting or idle in a transaction, the lock holder is untouched, and
// sweepcron reports the route as batch-error and goes on with the next one. Once the lock is
// gone, the next run deletes everything eligible.
func TestLockTimeout(t *testing.T) {
	t.Parallel()
	const (
		lockTimeout = 500 * time.Millisecond
		// The statement timeout is six times longer: an answer after it would mean the lock
		// timeout never fired.
		statementTimeout = 3 * time.Second
	)
	u := dbtest.URL(t)
	pool := openPool(t, u)
	seedNotifications(t, pool, 500, 50)
	seedTokens(t, pool, 200, 20)
	before, tokensBefore := notificationsState(t, pool), tokensState(t, pool)

	api := startAPI(t, "reliability-lock", u, map[string]string{
		"BATCH_LOCK_TIMEOUT":      lockTimeout.String(),
		"BATCH_STATEMENT_TIMEOUT": statementTimeout.String(),
		"SWEEP_DEADLINE":          "10s",
		"SERVER_WRITE_TIMEOUT":    "20s",
	})

	// The other transaction: a migration or a VACUUM FULL holding the table.
	holder := dbtest.Conn(t, u)
	holderPID := holder.PgConn().PID()
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE notifications IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	t.Run("the run gives up with 55P03", func(t *testing.T) {
		req := signed{path: "/internal/sweep-notifications", body: `{}`}.request(t, api.url)
		answered := make(chan answer, 1)
		go func() { answered <- send(req) }()
		// The batch is really waiting on our lock, not failing for some other reason.
		waitFor(t, "the batch to wait on the holder's lock", 5*time.Second, func() bool {
			return blockedBy(t, pool, api.app, holderPID)
		})
		var a answer
		select {
		case a = <-answered:
		case <-time.After(statementTimeout + 5*time.Second):
			t.Fatal("no answer: the blocked batch hangs")
		}
		if a.err != nil || a.status != http.StatusInternalServerError {
			t.Fatalf("HTTP %d %v: %s, want 500", a.status, a.err, a.body)
		}
		res := a.result(t)
		if res.StopReason != wire.StopBatchError || res.Error == nil || res.Error.Code != "55P03" || res.Error.Pass != "read" || res.Deleted != 0 {
			t.Fatalf("answer %s, want batch-error with error.code 55P03 in pass read", a.body)
		}
		if a.took < lockTimeout || a.took >= statementTimeout {
			t.Errorf("answered after %s, want within [%s, %s): the lock timeout bounds the wait", a.took, lockTimeout, statementTimeout)
		}
		t.Logf("gave up after %s: %s", a.took.Round(time.Millisecond), res.Error.Message)
	})

	t.Run("nothing hangs", func(t *testing.T) {
		if n := scalar[int64](t, pool, `SELECT count(*) FROM sweeprail.sweep_lock`); n != 0 {
			t.Errorf("%d lease rows left after the failed run", n)
		}
		// Pooled sessions stay, idle; none may still wait on a lock or sit in a transaction.
		stuck := scalar[int64](t, pool, `SELECT count(*) FROM pg_stat_activity
WHERE application_name = $1 AND (wait_event_type = 'Lock' OR state LIKE 'idle in transaction%')`, api.app)
		if stuck != 0 {
			t.Errorf("%d sessions of the api still wait on a lock or hold a transaction", stuck)
		}
		// The holder's transaction is its own business: still open, still holding the lock.
		held := scalar[bool](t, pool, `SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE pid = $1 AND relation = 'notifications'::regclass AND mode = 'AccessExclusiveLock' AND granted)`, int(holderPID))
		if !held {
			t.Error("the holder lost its lock")
		}
	})

	t.Run("sweepcron reports batch-error and goes on", func(t *testing.T) {
		_, cronBin := binaries(t)
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out := &lineBuffer{}
		cmd := execCommand(c, cronBin, []string{"--only", "notifications,refresh-tokens", "--json"}, cronEnv(api, "30s"))
		cmd.Stdout = out
		err := cmd.Run()
		if code := exitCode(err); code != 1 {
			t.Errorf("sweepcron exited %d (%v), want 1: a route failed", code, err)
		}
		reps := cronReports(t, out)
		if len(reps) != 1 || len(reps[0].Routes) != 2 {
			t.Fatalf("want one report of two routes, got %+v", reps)
		}
		n, tok := reps[0].Routes[0], reps[0].Routes[1]
		if n.Sweep != "notifications" || n.Category != "batch-error" || n.Answer == nil || n.Answer.Error == nil || n.Answer.Error.Code != "55P03" {
			t.Errorf("notifications: %+v, want batch-error 55P03", n)
		}
		if tok.Sweep != "refresh-tokens" || tok.Category != "ok" || tok.Answer == nil || tok.Answer.Deleted != tokensBefore.eligible {
			t.Errorf("refresh-tokens: %+v, want ok with %d deleted: sweepcron must go on after a failed route", tok, tokensBefore.eligible)
		}
	})

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("the next run finishes once the lock is gone", func(t *testing.T) {
		a := api.post(t, "notifications", `{}`)
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("HTTP %d %v: %s", a.status, a.err, a.body)
		}
		if res := a.result(t); res.StopReason != wire.StopExhausted || res.Deleted != before.eligible {
			t.Errorf("answer %s, want exhausted with %d deleted", a.body, before.eligible)
		}
		end, tokensEnd := notificationsState(t, pool), tokensState(t, pool)
		if end.eligible != 0 || tokensEnd.eligible != 0 {
			t.Errorf("eligible rows left: %d notifications, %d tokens", end.eligible, tokensEnd.eligible)
		}
		if end.freshSum != before.freshSum || tokensEnd.freshSum != tokensBefore.freshSum {
			t.Error("fresh rows changed")
		}
	})
}
