package nonce_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/nonce"
	"github.com/sweeprail/sweeprail/internal/signing"
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
		if left := count(t, pool); left != 1 {
			t.Fatalf("%d nonces left, want the live one", left)
		}
		if fresh, err := s.Admit(ctx, old, time.Now().Add(time.Minute)); err != nil || !fresh {
			t.Fatalf("admit after purge: %t %v", fresh, err)
		}
	})
}

// TestPurge: one purge takes a flood's expired nonces in bounded statements, never a live one,
// and stops at its bound, leaving the rest to the next interval.
func TestPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name            string
		expired, live   int
		purged, remains int64
	}{
		{"a flood's expired nonces, in one purge", 30_000, 10, 30_000, 10},
		{"at most the bound in one purge", 100_003, 0, 100_000, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			if _, err := pool.Exec(ctx, `INSERT INTO sweeprail.replay_nonce
SELECT gen_random_uuid(), now() - interval '1 second' * (1 + g % 600) FROM generate_series(1, $1) g
UNION ALL SELECT gen_random_uuid(), now() + interval '1 minute' FROM generate_series(1, $2)`, tc.expired, tc.live); err != nil {
				t.Fatal(err)
			}
			n, err := nonce.New(pool).Purge(ctx)
			if err != nil || n != tc.purged {
				t.Fatalf("purge: %d %v, want %d", n, err, tc.purged)
			}
			if left := count(t, pool); left != tc.remains {
				t.Fatalf("%d nonces left, want %d", left, tc.remains)
			}
		})
	}
}

// TestRun: expired nonces leave on the store's own schedule, with no request arriving.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pool := dbtest.Pool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO sweeprail.replay_nonce
SELECT gen_random_uuid(), now() - interval '1 minute' FROM generate_series(1, 12000)
UNION ALL SELECT gen_random_uuid(), now() + interval '1 hour' FROM generate_series(1, 5)`); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		nonce.New(pool).Run(ctx, 10*time.Millisecond, slog.New(slog.DiscardHandler))
	}()
	// A condition, not a duration: the first tick purges everything expired.
	deadline := time.Now().Add(30 * time.Second)
	for count(t, pool) != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d nonces left after 30s, want the 5 live ones", count(t, pool))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

// TestVerifierFlood: a key holder's flood fills a replica's replay cache; valid requests with
// fresh nonces are still accepted, because the shared store's unique key decides once the cache
// is full, and replays are still refused, whether their nonce is in the cache or only in the
// store, and by another replica too.
func TestVerifierFlood(t *testing.T) {
	t.Parallel()
	const (
		cacheSize = 100
		flood     = 1000
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool := dbtest.Pool(t)
	key := [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	now := time.Now()
	verifier := func() *signing.Verifier {
		return signing.NewVerifier(key, time.Minute, func() time.Time { return now }, cacheSize).WithStore(nonce.New(pool))
	}
	v := verifier()
	nonces := make([]string, flood)
	send := func(v *signing.Verifier, n string) error {
		h := signing.Sign(key, now, n, "POST", "/internal/sweep-notifications", "", []byte("{}"))
		return v.VerifyContext(ctx, h, "POST", "/internal/sweep-notifications", "", []byte("{}"))
	}
	for i := range nonces {
		nonces[i] = signing.NewNonce()
		if err := send(v, nonces[i]); err != nil {
			t.Fatalf("request %d of %d (cache of %d): %v", i+1, flood, cacheSize, err)
		}
	}
	if n := count(t, pool); n != flood {
		t.Fatalf("the store holds %d nonces, want %d", n, flood)
	}
	for _, tc := range []struct {
		name string
		v    *signing.Verifier
		n    string
	}{
		{"a replay of a nonce the cache holds", v, nonces[0]},
		{"a replay of a nonce only the store holds", v, nonces[flood-1]},
		{"a replay to another replica", verifier(), nonces[flood/2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var se *signing.Error
			if err := send(tc.v, tc.n); !errors.As(err, &se) || se.Reason != signing.ReasonReplayed {
				t.Fatalf("err %v, want %s", err, signing.ReasonReplayed)
			}
		})
	}
}

func count(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM sweeprail.replay_nonce`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
