package dbtest_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbtest"
)

// TestStandby: a private cluster with a migrated database, and a standby of it that holds what
// the primary writes, replays only while not paused, and is gone when its test ends.
func TestStandby(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := dbtest.NewCluster(t)
	db := cluster.Database(t)
	var standbyURL string
	t.Run("streams, pauses, resumes", func(t *testing.T) {
		standby := dbtest.StartStandby(t, cluster.URL)
		standbyURL = standby.URL
		primary := dbtest.Conn(t, db)
		if _, err := primary.Exec(ctx, `INSERT INTO accounts (email) VALUES ('before@example.com')`); err != nil {
			t.Fatal(err)
		}
		standby.WaitCaughtUp(t)
		// The standby's copy of the migrated database, read-only.
		replicaDB := sameDatabase(t, standby.URL, db)
		sb := dbtest.Conn(t, replicaDB)
		// The cluster and its standby run the version under test (make test-matrix).
		server := dbtest.Conn(t, dbtest.ServerURL(t))
		if sv, pv, want := version(t, sb), version(t, primary), version(t, server); sv != want || pv != want {
			t.Fatalf("standby runs %s, its primary %s; want the server under test's %s", sv, pv, want)
		}
		if n := count(t, sb); n != 1 {
			t.Fatalf("standby holds %d accounts, want the 1 written on the primary", n)
		}
		if _, err := sb.Exec(ctx, `INSERT INTO accounts (email) VALUES ('x@example.com')`); err == nil {
			t.Fatal("the standby accepted a write")
		}

		standby.PauseReplay(t)
		if _, err := primary.Exec(ctx, `INSERT INTO accounts (email) VALUES ('paused@example.com')`); err != nil {
			t.Fatal(err)
		}
		// Received but not replayed: the primary sees the standby flush the insert, not apply it.
		var lsn string
		if err := primary.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		waitTrue(t, primary, `SELECT flush_lsn >= $2::pg_lsn FROM pg_stat_replication WHERE application_name = $1`, standby.Name, lsn)
		if n := count(t, sb); n != 1 {
			t.Fatalf("paused standby holds %d accounts, want 1", n)
		}
		standby.ResumeReplay(t)
		standby.WaitCaughtUp(t)
		if n := count(t, sb); n != 2 {
			t.Fatalf("resumed standby holds %d accounts, want 2", n)
		}
	})
	// The subtest's cleanups ran: the standby no longer answers.
	c, err := pgx.Connect(ctx, standbyURL)
	if err == nil {
		c.Close(ctx)
		t.Fatal("the standby still answers after its test ended")
	}
}

func count(t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var n int
	if err := c.QueryRow(context.Background(), `SELECT count(*) FROM accounts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitTrue(t *testing.T, c *pgx.Conn, sql string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok *bool
		if err := c.QueryRow(context.Background(), sql, args...).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok != nil && *ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", sql)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sameDatabase is server's URL naming the database of db.
func sameDatabase(t *testing.T, server, db string) string {
	t.Helper()
	s, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	d, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	s.Path = d.Path
	return s.String()
}

func version(t *testing.T, c *pgx.Conn) string {
	t.Helper()
	var v string
	if err := c.QueryRow(context.Background(), `SELECT current_setting('server_version')`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
