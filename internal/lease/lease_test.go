package lease_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/lease"
	"github.com/sweeprail/sweeprail/migrations"
)

// expire moves a lease's expiry into the past on the database clock, as time passing would.
func expire(t *testing.T, pool *pgxpool.Pool, label string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(),
		`UPDATE sweeprail.sweep_lock SET locked_until = now() - interval '1 millisecond' WHERE label = $1`, label); err != nil {
		t.Fatal(err)
	}
}

func TestAcquire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("sixteen at once, one wins", func(t *testing.T) {
		pool := dbtest.Pool(t)
		const n = 16
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			won     = make(chan *lease.Lease, n)
			errs    = make(chan error, n)
			heldCnt int
		)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				l, err := lease.Acquire(ctx, pool, "notifications", time.Minute)
				if err != nil {
					errs <- err
					return
				}
				won <- l
			}()
		}
		close(start)
		wg.Wait()
		close(won)
		close(errs)
		for err := range errs {
			if !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("acquire: %v, want ErrHeld", err)
			}
			heldCnt++
		}
		if len(won) != 1 || heldCnt != n-1 {
			t.Fatalf("%d won, %d found it held; want exactly one winner", len(won), heldCnt)
		}
		var owner string
		if err := pool.QueryRow(ctx, `SELECT owner::text FROM sweeprail.sweep_lock WHERE label = 'notifications'`).Scan(&owner); err != nil {
			t.Fatal(err)
		}
		if l := <-won; owner != l.Owner.String() {
			t.Fatalf("row owner %s, winner %s", owner, l.Owner)
		}
	})

	t.Run("held lease is not taken, expired lease is", func(t *testing.T) {
		pool := dbtest.Pool(t)
		first, err := lease.Acquire(ctx, pool, "outbox", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		_, err = lease.Acquire(ctx, pool, "outbox", time.Hour)
		var held *lease.HeldError
		if !errors.As(err, &held) || held.Holder.Owner != first.Owner {
			t.Fatalf("second acquire: %v, want HeldError naming %s", err, first.Owner)
		}
		expire(t, pool, "outbox")
		second, err := lease.Acquire(ctx, pool, "outbox", time.Hour)
		if err != nil {
			t.Fatalf("acquire after expiry: %v", err)
		}
		if second.Owner == first.Owner {
			t.Fatal("takeover kept the old owner")
		}
	})

	t.Run("stale owner's release deletes nothing", func(t *testing.T) {
		pool := dbtest.Pool(t)
		stale, err := lease.Acquire(ctx, pool, "audit-log", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		expire(t, pool, "audit-log")
		successor, err := lease.Acquire(ctx, pool, "audit-log", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		released, err := lease.Release(ctx, pool, stale)
		if err != nil || released {
			t.Fatalf("stale release = %v, %v; want false, nil", released, err)
		}
		var owner string
		if err := pool.QueryRow(ctx, `SELECT owner::text FROM sweeprail.sweep_lock WHERE label = 'audit-log'`).Scan(&owner); err != nil {
			t.Fatalf("successor's lease is gone: %v", err)
		}
		if owner != successor.Owner.String() {
			t.Fatalf("owner %s, want successor %s", owner, successor.Owner)
		}
		released, err = lease.Release(ctx, pool, successor)
		if err != nil || !released {
			t.Fatalf("successor release = %v, %v; want true, nil", released, err)
		}
	})

	t.Run("ttl from the database clock", func(t *testing.T) {
		pool := dbtest.Pool(t)
		l, err := lease.Acquire(ctx, pool, "consents", 90*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var lockedAt time.Time
		if err := pool.QueryRow(ctx, `SELECT locked_at FROM sweeprail.sweep_lock WHERE label = 'consents'`).Scan(&lockedAt); err != nil {
			t.Fatal(err)
		}
		// A run reads its reference time from the lease: it must be the row's, the database's.
		if !l.LockedAt.Equal(lockedAt) || l.LockedUntil.Sub(l.LockedAt) != 90*time.Second {
			t.Fatalf("lease says locked at %s until %s; row says locked at %s", l.LockedAt, l.LockedUntil, lockedAt)
		}
		var ttl time.Duration
		var lockedAtIsNow bool
		if err := pool.QueryRow(ctx, `
			SELECT (EXTRACT(EPOCH FROM locked_until - locked_at) * 1e6)::bigint * 1000,
			       abs(EXTRACT(EPOCH FROM locked_at - now())) < 5
			  FROM sweeprail.sweep_lock WHERE label = 'consents'`).Scan(&ttl, &lockedAtIsNow); err != nil {
			t.Fatal(err)
		}
		if ttl != 90*time.Second || !lockedAtIsNow {
			t.Fatalf("locked_until - locked_at = %s (locked_at near now(): %v), want 1m30s", ttl, lockedAtIsNow)
		}
	})

	// Timestamps are timestamptz compared with now(): a session TimeZone far from UTC must change
	// nothing, neither for a live lease nor for an expired one.
	t.Run("session time zone is irrelevant", func(t *testing.T) {
		for _, tz := range []string{"Pacific/Kiritimati", "America/Adak"} {
			t.Run(tz, func(t *testing.T) {
				cfg, err := pgxpool.ParseConfig(dbtest.URL(t))
				if err != nil {
					t.Fatal(err)
				}
				cfg.ConnConfig.RuntimeParams["timezone"] = tz
				pool, err := pgxpool.NewWithConfig(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer pool.Close()
				var got string
				if err := pool.QueryRow(ctx, "SHOW TimeZone").Scan(&got); err != nil || got != tz {
					t.Fatalf("TimeZone = %q, %v", got, err)
				}
				if _, err := lease.Acquire(ctx, pool, "refresh-tokens", time.Minute); err != nil {
					t.Fatal(err)
				}
				if _, err := lease.Acquire(ctx, pool, "refresh-tokens", time.Minute); !errors.Is(err, lease.ErrHeld) {
					t.Fatalf("live lease taken in %s: %v", tz, err)
				}
				expire(t, pool, "refresh-tokens")
				if _, err := lease.Acquire(ctx, pool, "refresh-tokens", time.Minute); err != nil {
					t.Fatalf("expired lease not taken in %s: %v", tz, err)
				}
			})
		}
	})

	t.Run("ttl must be positive", func(t *testing.T) {
		if _, err := lease.Acquire(ctx, nil, "x", 0); err == nil {
			t.Fatal("zero ttl accepted")
		}
	})
}

// TestTable: the lease table is one that boot, /readyz and api policy check require, so a database
// without it is refused before a run could fail on it.
func TestTable(t *testing.T) {
	if !slices.Contains(migrations.Sweeprail.Required, lease.Table) {
		t.Fatalf("migrations.Sweeprail.Required = %v, want it to hold %s", migrations.Sweeprail.Required, lease.Table)
	}
}
