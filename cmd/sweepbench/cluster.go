package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// bench holds what every step shares: the settings, the cluster's maintenance connection and
// the machine the numbers come from.
type bench struct {
	s       settings
	admin   *pgx.Conn
	base    *url.URL
	machine machine
	cpu     cpuMeter
	logw    io.Writer
	began   time.Time
}

func newBench(ctx context.Context, s settings, logw io.Writer) (*bench, error) {
	base, err := url.Parse(s.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("-database-url: %w", err)
	}
	for _, bin := range []string{"api", "sweepcron"} {
		if _, err := os.Stat(filepath.Join(s.binDir, bin)); err != nil {
			return nil, fmt.Errorf("%s: build the binaries first (go build -o %s/ ./cmd/...)", err, s.binDir)
		}
	}
	admin, err := pgx.Connect(ctx, s.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect to the bench cluster: %w", err)
	}
	b := &bench{s: s, admin: admin, base: base, logw: logw, began: time.Now()}
	if b.machine, err = readMachine(ctx, admin); err != nil {
		admin.Close(ctx)
		return nil, err
	}
	// The postmaster is the parent of this session's backend.
	var backend int
	if err := admin.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		admin.Close(ctx)
		return nil, err
	}
	procs, err := readProcs()
	if err != nil {
		admin.Close(ctx)
		return nil, err
	}
	postmaster, ok := procs[backend]
	if !ok {
		admin.Close(ctx)
		return nil, fmt.Errorf("the bench cluster's backend (pid %d) is not visible in /proc: run the bench on the database's machine", backend)
	}
	b.cpu = newCPUMeter(postmaster.ppid, b.machine.cores)
	b.logf("%s; PostgreSQL %s, fsync %s", b.machine.cpu, b.machine.pgVersion, b.machine.fsync)
	if b.machine.fsync != "on" {
		// Realistic numbers need fsync: without it every commit is free and the
		// monolithic DELETE's WAL never waits on the disk.
		b.logf("warning: fsync is %s on the bench cluster; the numbers are not realistic", b.machine.fsync)
	}
	return b, nil
}

func (b *bench) close() { b.admin.Close(context.Background()) }

// logf prints progress, stamped with the time since the start, so a slow step shows.
func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.logw, "sweepbench [%6.1fs] %s\n", time.Since(b.began).Seconds(), fmt.Sprintf(format, args...))
}

// dbURL is the cluster's URL with the database swapped for name.
func (b *bench) dbURL(name string) string {
	u := *b.base
	u.Path = "/" + name
	return u.String()
}

func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// clone gives a contestant its own copy of template. FILE_COPY checkpoints and copies the files:
// faster than WAL_LOG for a large template, and every contestant starts from a checkpoint, with
// no dirty buffers of the one before.
func (b *bench) clone(ctx context.Context, name, template string) (string, error) {
	if err := b.drop(ctx, name); err != nil {
		return "", err
	}
	if _, err := b.admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s STRATEGY FILE_COPY",
		quoteIdent(name), quoteIdent(template))); err != nil {
		return "", fmt.Errorf("create %s from %s: %w", name, template, err)
	}
	return b.dbURL(name), nil
}

// drop removes a database; FORCE ends an autovacuum worker that a big delete woke up.
func (b *bench) drop(ctx context.Context, name string) error {
	if _, err := b.admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", quoteIdent(name))); err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	return nil
}

// checkpoint flushes what the previous step dirtied, so its write-back does not land on the next
// contestant, and every contestant pays the same full-page images after it.
func (b *bench) checkpoint(ctx context.Context) error {
	if _, err := b.admin.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// walPosition is the WAL's insert position in bytes: its advance over a window is the WAL written
// in it, cluster-wide (so it includes the foreground's, which is small).
func (b *bench) walPosition(ctx context.Context) (int64, error) {
	var pos int64
	err := b.admin.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn`).Scan(&pos)
	if err != nil {
		return 0, fmt.Errorf("read the WAL position: %w", err)
	}
	return pos, nil
}

// machine is what the report says the numbers were measured on.
type machine struct {
	cores                         int
	cpu, memory                   string
	pgVersion                     string
	fsync, sharedBuffers, walBufs string
	// minWAL and maxWAL are min_wal_size and max_wal_size: how much WAL a checkpoint recycles
	// for the next burst, and how much triggers one.
	minWAL, maxWAL string
	goVersion      string
}

func readMachine(ctx context.Context, admin *pgx.Conn) (machine, error) {
	m := machine{cores: runtime.NumCPU(), goVersion: runtime.Version(), cpu: "unknown CPU", memory: "unknown"}
	if f, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(f))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if f, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(f), "MemTotal: %d kB", &kb); err == nil {
			m.memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	err := admin.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('shared_buffers'), current_setting('wal_buffers'), current_setting('min_wal_size'),
		current_setting('max_wal_size')`).
		Scan(&m.pgVersion, &m.fsync, &m.sharedBuffers, &m.walBufs, &m.minWAL, &m.maxWAL)
	if err != nil {
		return m, fmt.Errorf("read server settings: %w", err)
	}
	return m, nil
}

// seedSQL fills notifications rows $2..$3 of a table of $1 rows, as of $4, deterministically
// (Knuth-style hashes of the row number):
//
//	created_at  400 days in id order: the heap in age order, as an append-mostly table's
//	read_at     within a day of created_at, for $5 / $6 of the rows past 31 days, else never
//	recent      the last 31 days unread or read within 29: never eligible
const seedSQL = `
INSERT INTO notifications (account_id, kind, body, created_at, read_at)
SELECT a.ids[1 + (i % array_length(a.ids, 1))::int], k.kind,
       'You have a new ' || k.kind || ' from user ' || (i * 7919 % 100000) || ' in #general', c.at,
       CASE
         WHEN c.at < $4::timestamptz - interval '31 days' AND (i * 2654435761) % $6::bigint < $5
           THEN c.at + ((i * 40503) % 86400) * interval '1 second'
         WHEN c.at >= $4::timestamptz - interval '31 days' AND i % 2 = 0
           THEN $4::timestamptz - ((i * 40503) % (29 * 86400)) * interval '1 second'
       END
FROM generate_series($2::bigint, $3::bigint) i
CROSS JOIN (SELECT array_agg(id ORDER BY id) AS ids FROM accounts) a
CROSS JOIN LATERAL (SELECT (ARRAY['mention', 'reply', 'follow', 'digest'])[1 + (i % 4)::int] AS kind) k
CROSS JOIN LATERAL (SELECT $4::timestamptz - interval '400 days' + (i::float8 / $1::bigint) * interval '400 days' AS at) c`

// The share of old rows that were read, seedSQL's $5 out of $6. denseRead (0.8672): with the 369
// days in 400 that are past the window, 80% of all rows are eligible, and each page keeps a few
// rows that must survive. sparseRead (0.01084): 1% of all rows eligible, scattered over the oldest
// 92% of the heap, one every hundred rows or so, and the rest of the old rows were never read.
const (
	denseRead, denseOf   = 8672, 10_000
	sparseRead, sparseOf = 1084, 100_000
)

// eligibleSQL counts the rows the notifications sweep's predicate holds at the database's now().
const eligibleSQL = `SELECT count(*) FROM notifications WHERE read_at IS NOT NULL AND read_at < now() - interval '30 days'`

// seedChunk bounds one INSERT, so progress shows and no single statement holds 5M rows' locks.
const seedChunk = 1_000_000
