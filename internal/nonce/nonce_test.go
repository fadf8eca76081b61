package nonce_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/nonce"
)

func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	s := nonce.New(pool)
	n := uuid.New()
	for i, want := range []bool{true, false, false} {
		fresh, err := s.Admit(ctx, n, time.Now().Add(time.Minute))
		if err != nil || fresh != want {
			t.Fatalf("admit #%d: %t %v, want %t", i+1, fresh, err, want)
		}
	}
	t.Run("an expired record admits its nonce again, and is purged", func(t *testing.T) {
		old := uuid.New()
		if _, err := pool.Exec(ctx, `INSERT INTO sweeprail.replay_nonce VALUES ($1, now() - interval '1 minute'), (gen_random_uuid(), now() - interval '1 hour')`, old); err != nil {
			t.Fatal(err)
		}
		purged, err := s.Purge(ctx)
		if err != nil || purged != 2 {
			t.Fatalf("purge: %d %v, want the 2 expired", purged, err)
		}
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM sweeprail.replay_nonce`).Scan(&left); err != nil || left != 1 {
			t.Fatalf("%d nonces left (%v), want the live one", left, err)
		}
		if fresh, err := s.Admit(ctx, old, time.Now().Add(time.Minute)); err != nil || !fresh {
			t.Fatalf("admit after purge: %t %v", fresh, err)
		}
	})
}
