package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/pgserver"
)

// standby is a streaming hot standby of the bench cluster, on loopback, made by pg_basebackup -R:
// the bench's own variant of internal/dbtest's StartStandby, which needs a testing.TB.
type standby struct {
	// url names the standby's maintenance database (read-only: it is in recovery).
	url string
	// name is its application_name in the primary's pg_stat_replication.
	name    string
	primary string
	dir     string
	bindir  string
	// ctl is a connection to the standby, for pausing and resuming its replay.
	ctl *pgx.Conn
	// postmaster is the standby's postmaster's pid: pg_ctl detaches it from the bench, so the
	// CPU meter must be told that its replay is the bench's own work, not another tenant's.
	postmaster int
}

// standbyStatusInterval is the standby's wal_receiver_status_interval. While WAL flows the
// standby reports its replay position on every chunk it receives; when the primary goes quiet (a
// throttled rail waits, so nothing writes) only every status interval, 10s by default. 1s, the
// smallest the setting takes, lets the primary see a standby catch up within a second.
const standbyStatusInterval = "1s"

// startStandby copies the cluster of primaryURL with pg_basebackup -R into a new folder under
// the system's temporary folder, starts it as a hot standby on a free loopback port, and waits
// until the primary lists it as streaming and knows its replay position. The standby runs with
// the primary's fsync and shared_buffers, so that its replay costs what a real standby's would.
// As root, the copy and the server run as user postgres, which PostgreSQL requires.
func startStandby(ctx context.Context, primaryURL string) (s *standby, err error) {
	bindir, err := pgserver.Bindir()
	if err != nil {
		return nil, err
	}
	pu, err := url.Parse(primaryURL)
	if err != nil {
		return nil, fmt.Errorf("parse the primary's URL: %w", err)
	}
	dir, err := pgserver.OwnedTempDir("sweepbench-standby-")
	if err != nil {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
		return nil, err
	}
	s = &standby{name: fmt.Sprintf("sweepbench_standby_%d", os.Getpid()), primary: primaryURL, dir: dir, bindir: bindir}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()

	// A hot standby refuses to start with fewer of these than its primary has; scripts/pg starts
	// its clusters with max_connections=300 on the command line, which the copy does not carry.
	settings := map[string]string{}
	primary, err := pgx.Connect(ctx, primaryURL)
	if err != nil {
		return s, fmt.Errorf("standby: connect to the primary: %w", err)
	}
	for _, name := range []string{"max_connections", "max_worker_processes", "max_wal_senders",
		"max_prepared_transactions", "max_locks_per_transaction", "fsync", "full_page_writes", "shared_buffers"} {
		var v string
		if err := primary.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			primary.Close(context.Background())
			return s, fmt.Errorf("standby: read the primary's %s: %w", name, err)
		}
		settings[name] = v
	}
	primary.Close(context.Background())

	data, logFile := filepath.Join(dir, "data"), filepath.Join(dir, "log")
	// pg_basebackup ignores the URL's database name; -R writes the rest of it into the copy's
	// primary_conninfo. -c fast checkpoints at once; -X stream copies the WAL written meanwhile.
	if out, err := pgserver.AsOwner(ctx, filepath.Join(bindir, "pg_basebackup"), "-d", primaryURL, "-D", data,
		"-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return s, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	port, err := pgserver.FreePort()
	if err != nil {
		return s, err
	}
	opts := []string{
		"-c listen_addresses=127.0.0.1", "-p " + strconv.Itoa(port), "-c unix_socket_directories=''",
		"-c cluster_name=" + s.name, "-c hot_standby=on", "-c wal_receiver_status_interval=" + standbyStatusInterval,
		"-c log_min_messages=warning",
	}
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		opts = append(opts, "-c "+name+"="+settings[name])
	}
	if out, err := pgserver.AsOwner(ctx, filepath.Join(bindir, "pg_ctl"), "-D", data, "-l", logFile, "-w", "-t", "60",
		"start", "-o", strings.Join(opts, " ")); err != nil {
		tail, _ := os.ReadFile(logFile)
		return s, fmt.Errorf("start the standby: %w\n%s\n%s", err, out, tail)
	}
	su := *pu
	su.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	su.Path = "/postgres"
	s.url = su.String()
	if s.ctl, err = pgx.Connect(ctx, s.url); err != nil {
		return s, fmt.Errorf("connect to the standby: %w", err)
	}
	// The first line of postmaster.pid is the postmaster's pid.
	pidFile, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return s, fmt.Errorf("read the standby's pid: %w", err)
	}
	first, _, _ := strings.Cut(string(pidFile), "\n")
	if s.postmaster, err = strconv.Atoi(strings.TrimSpace(first)); err != nil {
		return s, fmt.Errorf("the standby's postmaster.pid: %w", err)
	}
	// Streaming, and the primary has had its first status message: until then it does not know
	// the standby's replay position (NULL), and neither a throttle nor a watch can measure it.
	err = s.waitFor(ctx, time.Minute, "the primary to list the standby as streaming", func(c *pgx.Conn) (bool, error) {
		var n int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication
			WHERE application_name = $1 AND state = 'streaming' AND replay_lsn IS NOT NULL`, s.name).Scan(&n)
		return n == 1, err
	})
	return s, err
}

// stop stops the standby at once (its data is thrown away) and deletes its folder.
func (s *standby) stop() {
	if s.ctl != nil {
		s.ctl.Close(context.Background())
	}
	data := filepath.Join(s.dir, "data")
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = pgserver.AsOwner(ctx, filepath.Join(s.bindir, "pg_ctl"), "-D", data, "-w", "-t", "60", "-m", "immediate", "stop")
	}
	_ = os.RemoveAll(s.dir)
}

// pause and resume stop and restart the standby's replay (pg_wal_replay_pause and _resume): it
// still receives, flushes and acknowledges WAL, but applies none while paused. Neither is cut by
// a cancelled context (pgx closes a connection whose query is cancelled, and the cycle's last
// resume must get through): each is bounded by its own timeout.
func (s *standby) pause() error { return s.call("SELECT pg_wal_replay_pause()") }

func (s *standby) resume() error { return s.call("SELECT pg_wal_replay_resume()") }

func (s *standby) call(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.ctl.Exec(ctx, sql)
	return err
}

// waitCaughtUp waits, at most within, until the primary sees the standby replayed everything
// the primary had written when it was called. It reads the primary's view (pg_stat_replication),
// which a throttle reads too and which trails the standby by up to the status interval.
func (s *standby) waitCaughtUp(ctx context.Context, within time.Duration) error {
	c, err := pgx.Connect(ctx, s.primary)
	if err != nil {
		return err
	}
	var target string
	err = c.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&target)
	c.Close(context.Background())
	if err != nil {
		return fmt.Errorf("read the primary's WAL position: %w", err)
	}
	return s.waitFor(ctx, within, "the standby to replay up to "+target, func(c *pgx.Conn) (bool, error) {
		var done bool
		err := c.QueryRow(ctx, `SELECT coalesce(bool_and(replay_lsn >= $2::pg_lsn), false)
			FROM pg_stat_replication WHERE application_name = $1`, s.name, target).Scan(&done)
		return done, err
	})
}

// waitFor polls cond on a connection to the primary every 20ms, for at most within.
func (s *standby) waitFor(ctx context.Context, within time.Duration, what string, cond func(*pgx.Conn) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	c, err := pgx.Connect(ctx, s.primary)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for {
		ok, err := cond(c)
		if err != nil {
			return fmt.Errorf("standby: waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			tail, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("standby: gave up after %s waiting for %s\nstandby log:\n%s", within, what, tail)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dutyCycle makes the standby slow on purpose, as a busy one is: its replay is paused for
// pausedFor of every period and runs the rest, until stop. docs/BENCHMARKS.md ("Replica lag")
// says why not recovery_min_apply_delay, and why a short period.
type dutyCycle struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	err    error
	cycles int
}

func (s *standby) startDutyCycle(ctx context.Context, period, pausedFor time.Duration) *dutyCycle {
	ctx, cancel := context.WithCancel(ctx)
	d := &dutyCycle{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		// Sleeps are to absolute times, so the schedule does not drift by the calls' own time.
		next := time.Now()
		for {
			if err := s.pause(); err != nil {
				d.fail(ctx, err)
				return
			}
			if !sleepUntil(ctx, next.Add(pausedFor)) {
				return
			}
			if err := s.resume(); err != nil {
				d.fail(ctx, err)
				return
			}
			d.mu.Lock()
			d.cycles++
			d.mu.Unlock()
			next = next.Add(period)
			if !sleepUntil(ctx, next) {
				return
			}
		}
	}()
	return d
}

func (d *dutyCycle) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	d.mu.Lock()
	d.err = fmt.Errorf("standby duty cycle: %w", err)
	d.mu.Unlock()
}

// stop ends the cycle and leaves the standby replaying, however the cycle ended.
func (d *dutyCycle) stop(s *standby) (cycles int, err error) {
	d.cancel()
	<-d.done
	d.mu.Lock()
	cycles, err = d.cycles, d.err
	d.mu.Unlock()
	return cycles, errors.Join(err, s.resume())
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
