package dbtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/pgserver"
	"github.com/sweeprail/sweeprail/migrations"
)

// Cluster is a PostgreSQL cluster of one test's own, started by scripts/pg under a temporary
// PG_DIR and destroyed at cleanup (about a second). Tests that read server-wide state need one:
// on the shared server another package's paused standby would throttle every replica-lag test.
type Cluster struct {
	// URL names the cluster's maintenance database, "postgres", as superuser postgres.
	URL string
	dir string
}

// NewCluster starts a private cluster, destroyed when the test ends. Each setting is a
// "name=value" server option added at start (PG_OPTS), such as "wal_level=logical". Like every
// database test, it is skipped without TEST_DATABASE_URL (failed under CI=true), though it does
// not use that server: its absence means this machine is not set up for database tests.
func NewCluster(t testing.TB, settings ...string) *Cluster {
	t.Helper()
	ServerURL(t)
	script, err := scriptPath()
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	dir := ownedTempDir(t, "sweeprail-cluster-")
	var opts []string
	for _, s := range settings {
		opts = append(opts, "-c "+s)
	}
	env := append(os.Environ(), "PG_DIR="+dir, "PG_OPTS="+strings.Join(opts, " "))
	t.Cleanup(func() {
		cmd := exec.Command(script, "destroy")
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("dbtest: PG_DIR=%s scripts/pg destroy: %v\n%s", dir, err, out)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "start")
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dbtest: PG_DIR=%s scripts/pg start: %v\n%s", dir, err, stderr.String())
	}
	u := strings.TrimSpace(string(out))
	if !strings.HasPrefix(u, "postgres://") {
		t.Fatalf("dbtest: scripts/pg start printed %q, want a URL", out)
	}
	return &Cluster{URL: u, dir: dir}
}

// Database creates a fresh, migrated database on the cluster and returns its URL. It runs the
// migrations itself (no template): a private cluster usually holds one or two databases.
func (c *Cluster) Database(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	u := create(ctx, t, c.URL, "")
	for _, set := range migrations.Sets() {
		if err := set.Up(ctx, u, io.Discard); err != nil {
			t.Fatalf("dbtest: migrate: %v", err)
		}
	}
	return u
}

// Standby is a streaming hot standby of a primary, on loopback, made by pg_basebackup -R, or,
// with server programs that lack it (the npm bundles of scripts/pg's PG_VERSION), by copyBackup.
type Standby struct {
	// URL names the standby's maintenance database, "postgres" (read-only: it is in recovery).
	URL string
	// Name is the standby's application_name in the primary's pg_stat_replication (its
	// cluster_name, which the WAL receiver reports).
	Name string
	// Primary is the URL of the primary it streams from.
	Primary string
	dir     string
}

// standbyStatusInterval is the standby's wal_receiver_status_interval. The primary learns how far
// a standby has replayed only from the standby's status messages; while WAL flows the standby
// sends one per chunk it receives, but when the primary is quiet (a throttled sweep waits, so
// nothing writes) only every wal_receiver_status_interval, 10s by default. 1s keeps a test that
// waits for the primary to see a standby catch up short.
const standbyStatusInterval = "1s"

// StartStandby copies primaryURL's cluster with pg_basebackup -R and starts it as a hot standby
// on a free loopback port, stopped and deleted when the test ends; it returns once the primary
// sees it streaming. The primary must accept replication connections from 127.0.0.1 as the URL's
// user (initdb's defaults do). As root, both run as user postgres, which PostgreSQL requires.
func StartStandby(t testing.TB, primaryURL string) *Standby {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bindir, err := pgserver.Bindir()
	if err != nil {
		t.Fatalf("dbtest: standby: %v", err)
	}
	pu, err := url.Parse(primaryURL)
	if err != nil {
		t.Fatalf("dbtest: standby: parse primary URL: %v", err)
	}
	dir := ownedTempDir(t, "sweeprail-standby-")
	s := &Standby{Name: "standby_" + randomHex(4), Primary: primaryURL, dir: dir}
	data, logFile := filepath.Join(dir, "data"), filepath.Join(dir, "log")

	// A hot standby refuses to start with fewer of these than its primary has; scripts/pg starts
	// its clusters with max_connections=300 on the command line, which the copy does not carry.
	primary := connect(ctx, t, primaryURL)
	settings := map[string]string{}
	for _, name := range []string{"max_connections", "max_worker_processes", "max_wal_senders",
		"max_prepared_transactions", "max_locks_per_transaction"} {
		var v string
		if err := primary.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			t.Fatalf("dbtest: standby: read primary's %s: %v", name, err)
		}
		settings[name] = v
	}
	primary.Close(context.Background())

	// Registered before the start so that a standby that started but never streamed is stopped too.
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err != nil {
			return
		}
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := pgserver.AsOwner(stopCtx, filepath.Join(bindir, "pg_ctl"), "-D", data, "-w", "-t", "60", "-m", "immediate", "stop"); err != nil {
			t.Errorf("dbtest: stop standby: %v\n%s", err, out)
		}
	})

	if _, err := os.Stat(filepath.Join(bindir, "pg_basebackup")); err == nil {
		// pg_basebackup ignores the URL's database name; -R writes the rest of the URL into the
		// copy's primary_conninfo. -c fast checkpoints at once rather than waiting for a spread
		// checkpoint; -X stream copies the WAL written meanwhile.
		if out, err := pgserver.AsOwner(ctx, filepath.Join(bindir, "pg_basebackup"), "-d", primaryURL, "-D", data,
			"-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
			t.Fatalf("dbtest: pg_basebackup: %v\n%s", err, out)
		}
	} else {
		copyBackup(ctx, t, pu, data)
	}
	port, err := pgserver.FreePort()
	if err != nil {
		t.Fatalf("dbtest: standby: %v", err)
	}
	opts := []string{
		"-c listen_addresses=127.0.0.1", "-p " + strconv.Itoa(port), "-c unix_socket_directories=''",
		"-c cluster_name=" + s.Name, "-c hot_standby=on", "-c wal_receiver_status_interval=" + standbyStatusInterval,
		"-c fsync=off", "-c full_page_writes=off", "-c shared_buffers=32MB", "-c log_min_messages=warning",
	}
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		opts = append(opts, "-c "+name+"="+settings[name])
	}
	if out, err := pgserver.AsOwner(ctx, filepath.Join(bindir, "pg_ctl"), "-D", data, "-l", logFile, "-w", "-t", "60",
		"start", "-o", strings.Join(opts, " ")); err != nil {
		logTail, _ := os.ReadFile(logFile)
		t.Fatalf("dbtest: start standby: %v\n%s\n%s", err, out, logTail)
	}
	su := *pu
	su.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	su.Path = "/postgres"
	s.URL = su.String()

	// Streaming, and the primary has had its first status message: until then it does not know
	// the standby's replay position (NULL), and a throttle cannot measure it.
	s.waitFor(t, "the primary to list the standby as streaming", func(c *pgx.Conn) (bool, error) {
		var n int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication
			WHERE application_name = $1 AND state = 'streaming' AND replay_lsn IS NOT NULL`, s.Name).Scan(&n)
		return n == 1, err
	})
	return s
}

// PauseReplay pauses the standby's replay (pg_wal_replay_pause): it still receives and flushes
// WAL, and acknowledges it, but applies none, so its replay lag grows with every write on the
// primary, as a standby busy with a long query or a slow disk does. The pause takes effect before
// the next WAL record; a standby with nothing to replay stays "pause requested" until one comes.
func (s *Standby) PauseReplay(t testing.TB) {
	t.Helper()
	s.exec(t, "SELECT pg_wal_replay_pause()")
}

// ResumeReplay resumes the standby's replay (pg_wal_replay_resume).
func (s *Standby) ResumeReplay(t testing.TB) {
	t.Helper()
	s.exec(t, "SELECT pg_wal_replay_resume()")
}

// WaitCaughtUp waits until the primary sees the standby replayed everything the primary had
// written when WaitCaughtUp was called. It reads the primary's view (pg_stat_replication), which
// is what a throttle reads, and which trails the standby by up to its status interval (1s).
func (s *Standby) WaitCaughtUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := connect(ctx, t, s.Primary)
	defer c.Close(context.Background())
	var target string
	if err := c.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&target); err != nil {
		t.Fatalf("dbtest: standby: read primary's WAL position: %v", err)
	}
	s.waitFor(t, "the standby to replay up to "+target, func(c *pgx.Conn) (bool, error) {
		var done bool
		err := c.QueryRow(ctx, `SELECT coalesce(bool_and(replay_lsn >= $2::pg_lsn), false)
			FROM pg_stat_replication WHERE application_name = $1`, s.Name, target).Scan(&done)
		return done, err
	})
}

// waitFor polls cond on a connection to the primary every 20ms, for at most a minute.
func (s *Standby) waitFor(t testing.TB, what string, cond func(*pgx.Conn) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := connect(ctx, t, s.Primary)
	defer c.Close(context.Background())
	for {
		ok, err := cond(c)
		if err != nil {
			t.Fatalf("dbtest: standby %s: waiting for %s: %v", s.Name, what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			logTail, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			t.Fatalf("dbtest: standby %s: gave up waiting for %s\nstandby log:\n%s", s.Name, what, logTail)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Standby) exec(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := connect(ctx, t, s.URL)
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatalf("dbtest: standby %s: %s: %v", s.Name, sql, err)
	}
}

// ownedTempDir makes a temporary folder that the server's user owns and can reach (as root:
// postgres, under /tmp, which it can enter), removed when the test ends.
func ownedTempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := pgserver.OwnedTempDir(prefix)
	if dir != "" {
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return dir
}

// scriptPath finds scripts/pg from the test's working folder (its package), up to the module root.
func scriptPath() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", "pg"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working folder: cannot find scripts/pg")
		}
		dir = parent
	}
}

// copyBackup takes a base backup of the primary at pu into data without pg_basebackup: the
// low-level backup API (pg_backup_start/pg_backup_stop; pg_start_backup/pg_stop_backup before
// PostgreSQL 15) around a copy of the primary's data folder, which is on this machine, then the
// WAL written meanwhile, the backup label, and what pg_basebackup -R writes to make it a standby.
func copyBackup(ctx context.Context, t testing.TB, pu *url.URL, data string) {
	t.Helper()
	c := connect(ctx, t, pu.String())
	defer c.Close(context.Background())
	var num int
	var src string
	if err := c.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, current_setting('data_directory')").Scan(&num, &src); err != nil {
		t.Fatalf("dbtest: standby: read the primary's version: %v", err)
	}
	start, stop := "SELECT pg_backup_start($1, true)", "SELECT labelfile FROM pg_backup_stop(false)"
	if num < 150000 {
		start, stop = "SELECT pg_start_backup($1, true, false)", "SELECT labelfile FROM pg_stop_backup(false, false)"
	}
	if _, err := c.Exec(ctx, start, "sweeprail-standby"); err != nil {
		t.Fatalf("dbtest: standby: start the backup: %v", err)
	}
	// Files the server removes while cp reads the folder (temporary files, old WAL) are no loss:
	// replay recreates what it needs from the WAL.
	copyTree := func(from, to string) {
		out, err := pgserver.AsOwner(ctx, "cp", "-a", from, to)
		if err == nil {
			return
		}
		for line := range strings.Lines(string(out)) {
			if !strings.Contains(line, "No such file or directory") {
				t.Fatalf("dbtest: standby: cp -a %s %s: %v\n%s", from, to, err, out)
			}
		}
	}
	copyTree(src+"/.", data)
	var label string
	if err := c.QueryRow(ctx, stop).Scan(&label); err != nil {
		t.Fatalf("dbtest: standby: stop the backup: %v", err)
	}
	copyTree(src+"/pg_wal/.", filepath.Join(data, "pg_wal"))
	for _, f := range []string{"postmaster.pid", "postmaster.opts", "standby.signal", "recovery.signal"} {
		if _, err := pgserver.AsOwner(ctx, "rm", "-f", filepath.Join(data, f)); err != nil {
			t.Fatalf("dbtest: standby: remove %s: %v", f, err)
		}
	}
	conninfo := fmt.Sprintf("host=%s port=%s user=%s", pu.Hostname(), pu.Port(), pu.User.Username())
	if pw, ok := pu.User.Password(); ok {
		conninfo += " password=" + pw
	}
	autoConf, err := pgserver.AsOwner(ctx, "cat", filepath.Join(data, "postgresql.auto.conf"))
	if err != nil {
		t.Fatalf("dbtest: standby: read postgresql.auto.conf: %v\n%s", err, autoConf)
	}
	for name, content := range map[string]string{
		"backup_label":         label,
		"standby.signal":       "",
		"postgresql.auto.conf": string(autoConf) + "primary_conninfo = '" + strings.ReplaceAll(conninfo, "'", "''") + "'\n",
	} {
		if err := writeOwned(filepath.Join(data, name), content); err != nil {
			t.Fatalf("dbtest: standby: write %s: %v", name, err)
		}
	}
}

// writeOwned writes a file of a data folder, owned by the server's user when we are root.
func writeOwned(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(path, uid, gid)
}
