package nonce_test

import (
	"context"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/nonce"
)

// TestPurgeSkipsLocked: one replica's purge does not wait behind rows another replica's purge
// holds: it takes the other expired nonces and leaves the held one, whichever the server
// reports first, the purge's end or the purge waiting on the holder's lock.
func TestPurgeSkipsLocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO sweeprail.replay_nonce
SELECT gen_random_uuid(), now() - interval '1 minute' FROM generate_series(1, 10)`); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck
	var held string
	var pid int
	if err := holder.QueryRow(ctx, `SELECT nonce::text, pg_backend_pid() FROM sweeprail.replay_nonce ORDER BY nonce LIMIT 1 FOR UPDATE`).Scan(&held, &pid); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := nonce.New(pool).Purge(ctx)
		done <- result{n, err}
	}()
	for deadline := time.Now().Add(time.Minute); ; {
		select {
		case r := <-done:
			if r.err != nil || r.n != 9 {
				t.Fatalf("purge: %d %v, want the 9 expired nonces no other purge holds", r.n, r.err)
			}
			if left := count(t, pool); left != 1 {
				t.Fatalf("%d nonces left, want the held one", left)
			}
			return
		default:
		}
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)))`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			_ = holder.Rollback(ctx)
			<-done
			t.Fatalf("the purge waits behind another session's lock on nonce %s", held)
		}
		if time.Now().After(deadline) {
			t.Fatal("the purge neither ended nor waited within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
