package lease_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/lease"
)

// waitGone waits, without sleeping blind, until backend pid has left pg_stat_activity.
func waitGone(t *testing.T, conn *pgx.Conn, pid uint32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var there bool
		if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, int32(pid)).Scan(&there); err != nil {
			t.Fatal(err)
		}
		if !there {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d never ended", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTakeover: a lease whose holder's session is gone is taken over at once, whatever its TTL,
// and the new lease says whose it replaced; a lease whose holder's session lives is never taken,
// on two real connections.
func TestTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a dead holder's lease is taken over at once", func(t *testing.T) {
		t.Parallel()
		u := dbtest.SweeprailURL(t)
		holder, other := dbtest.Conn(t, u), dbtest.Conn(t, u)
		first, err := lease.Acquire(ctx, holder, "notifications", time.Hour)
		if err != nil || first.TookOver != nil {
			t.Fatalf("first acquire: %+v, %v", first, err)
		}
		if _, err := lease.Acquire(ctx, other, "notifications", time.Hour); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("while the holder's session lives: %v, want ErrHeld", err)
		}
		pid := holder.PgConn().PID()
		if err := holder.Close(ctx); err != nil {
			t.Fatal(err)
		}
		waitGone(t, other, pid)
		second, err := lease.Acquire(ctx, other, "notifications", time.Hour)
		if err != nil {
			t.Fatalf("after the holder's session ended: %v, want the lease", err)
		}
		if second.TookOver == nil || *second.TookOver != first.Owner {
			t.Errorf("TookOver %v, want the dead holder %s", second.TookOver, first.Owner)
		}
	})

	t.Run("a live holder's lease is never taken, its session busy or idle", func(t *testing.T) {
		t.Parallel()
		u := dbtest.SweeprailURL(t)
		holder, other := dbtest.Conn(t, u), dbtest.Conn(t, u)
		if _, err := lease.Acquire(ctx, holder, "notifications", time.Hour); err != nil {
			t.Fatal(err)
		}
		tx, err := holder.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := lease.Acquire(ctx, other, "notifications", time.Hour); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("acquire against a live holder: %v, want ErrHeld", err)
			}
		}
	})

	t.Run("a holder of another role, whose start is hidden, counts as alive", func(t *testing.T) {
		t.Parallel()
		u := dbtest.SweeprailURL(t)
		admin := dbtest.Conn(t, u)
		role := fmt.Sprintf("lease_peer_%d", time.Now().UnixNano())
		if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN PASSWORD 'change-me';
GRANT USAGE ON SCHEMA sweeprail TO `+role+`; GRANT SELECT, INSERT, UPDATE, DELETE ON sweeprail.sweep_lock TO `+role); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c, err := pgx.Connect(ctx, u)
			if err == nil {
				_, _ = c.Exec(ctx, `DROP OWNED BY `+role+`; DROP ROLE `+role)
				c.Close(ctx)
			}
		})
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		pu.User = url.UserPassword(role, "change-me")
		peer := dbtest.Conn(t, pu.String())
		if _, err := lease.Acquire(ctx, admin, "notifications", time.Hour); err != nil {
			t.Fatal(err)
		}
		var hidden bool
		if err := peer.QueryRow(ctx, `SELECT backend_start IS NULL FROM pg_stat_activity WHERE pid = $1`, int32(admin.PgConn().PID())).Scan(&hidden); err != nil || !hidden {
			t.Fatalf("the holder's start is visible to the peer (%v, %v): the case is not set up", hidden, err)
		}
		if _, err := lease.Acquire(ctx, peer, "notifications", time.Hour); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("acquire as another role: %v, want ErrHeld", err)
		}
	})

	t.Run("a lease of an older version, with no session, waits for its TTL", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		if _, err := pool.Exec(ctx, `INSERT INTO sweeprail.sweep_lock (label, owner, locked_at, locked_until)
VALUES ('notifications', gen_random_uuid(), now(), now() + interval '1 hour')`); err != nil {
			t.Fatal(err)
		}
		if _, err := lease.Acquire(ctx, pool, "notifications", time.Hour); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("acquire: %v, want ErrHeld", err)
		}
		expire(t, pool, "notifications")
		if l, err := lease.Acquire(ctx, pool, "notifications", time.Hour); err != nil || l.TookOver != nil {
			t.Fatalf("acquire after the TTL: %+v, %v, want the lease, no takeover", l, err)
		}
	})
}
