package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbtest"
)

// TestStandby covers the bench's own standby: it streams, a pause holds its replay while it still
// receives, resume lets it catch up, and the duty cycle pauses and resumes it on its schedule and
// leaves it replaying when stopped. Every wait polls; none sleeps.
//
// Not parallel with TestRuns: two clusters started at once by scripts/pg can pick the same port.
func TestStandby(t *testing.T) {
	ctx := t.Context()
	// A cluster of its own: a standby is server-wide state.
	cluster := dbtest.NewCluster(t)
	sb, err := startStandby(ctx, cluster.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.stop)
	primary, err := pgx.Connect(ctx, cluster.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close(context.Background())
	exec := func(c *pgx.Conn, sql string) {
		t.Helper()
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	pauseState := func() string {
		t.Helper()
		var s string
		if err := sb.ctl.QueryRow(ctx, "SELECT pg_get_wal_replay_pause_state()").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// poll waits for cond, at most a minute, every 10ms.
	poll := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	t.Run("its postmaster is known, for the CPU meter", func(t *testing.T) {
		procs, err := readProcs()
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := sb.ctl.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if _, ok := procs[sb.postmaster]; !ok || procs[pid].ppid != sb.postmaster {
			t.Errorf("postmaster %d; the standby backend %d's parent is %d", sb.postmaster, pid, procs[pid].ppid)
		}
	})

	t.Run("a pause holds replay while WAL still arrives; resume catches up", func(t *testing.T) {
		if err := sb.pause(); err != nil {
			t.Fatal(err)
		}
		exec(primary, "CREATE TABLE IF NOT EXISTS standby_probe (n int)")
		exec(primary, "INSERT INTO standby_probe SELECT generate_series(1, 10000)")
		var target string
		if err := primary.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&target); err != nil {
			t.Fatal(err)
		}
		// Received and flushed by the standby, as the primary sees it.
		poll("the standby to receive the write", func() bool {
			var ok bool
			err := primary.QueryRow(ctx, `SELECT coalesce(bool_and(flush_lsn >= $2::pg_lsn), false)
				FROM pg_stat_replication WHERE application_name = $1`, sb.name, target).Scan(&ok)
			return err == nil && ok
		})
		poll("the pause to take effect", func() bool { return pauseState() == "paused" })
		var replayed bool
		if err := sb.ctl.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", target).Scan(&replayed); err != nil {
			t.Fatal(err)
		}
		if replayed {
			t.Fatal("the standby replayed the write while paused")
		}
		if err := sb.resume(); err != nil {
			t.Fatal(err)
		}
		if err := sb.waitCaughtUp(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the duty cycle pauses and resumes, and leaves replay on", func(t *testing.T) {
		d := sb.startDutyCycle(ctx, 20*time.Millisecond, 15*time.Millisecond)
		poll("three cycles", func() bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.cycles >= 3
		})
		cycles, err := d.stop(sb)
		if err != nil || cycles < 3 {
			t.Fatalf("stop: %d cycles, %v", cycles, err)
		}
		if s := pauseState(); s != "not paused" {
			t.Errorf("after the cycle stopped the standby is %q", s)
		}
		exec(primary, "INSERT INTO standby_probe SELECT generate_series(1, 1000)")
		if err := sb.waitCaughtUp(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	})
}
