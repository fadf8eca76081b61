package partition_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/partition"
)

var ctx = context.Background()

// db is one test's database: a pool, and its URL for the extra sessions of race tests.
type db struct {
	t    *testing.T
	url  string
	pool *pgxpool.Pool
}

func newDB(t *testing.T) *db {
	t.Helper()
	u := dbtest.URL(t)
	pool, err := dbpool.NewPool(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &db{t: t, url: u, pool: pool}
}

func (d *db) exec(sql string, args ...any) {
	d.t.Helper()
	if _, err := d.pool.Exec(ctx, sql, args...); err != nil {
		d.t.Fatalf("%s: %v", firstLine(sql), err)
	}
}

func (d *db) int(sql string, args ...any) int64 {
	d.t.Helper()
	var n int64
	if err := d.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		d.t.Fatalf("%s: %v", firstLine(sql), err)
	}
	return n
}

func (d *db) list(table string) []partition.Partition {
	d.t.Helper()
	parts, err := partition.List(ctx, d.pool, table)
	if err != nil {
		d.t.Fatal(err)
	}
	return parts
}

// session opens another connection: the other party of a lock test.
func (d *db) session() *pgx.Conn {
	d.t.Helper()
	return dbtest.Conn(d.t, d.url)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// day is midnight UTC of a fixed day, far from any DST or month edge, so bounds are exact.
var day0 = time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)

func day(i int) time.Time { return day0.AddDate(0, 0, i) }

// daily creates table (key column "at" of type typ) with one partition per day for days [0, n)
// from day0, named <table>_d<i>, and a DEFAULT partition when withDefault; rowsPerDay rows per day
// (ids unique), spread over each day's hours, plus two rows in the default partition when there is
// one (one long before day0, one long after).
func (d *db) daily(table, typ string, n, rowsPerDay int, withDefault bool) {
	d.t.Helper()
	d.exec(fmt.Sprintf("CREATE TABLE %s (id bigint NOT NULL, at %s NOT NULL, note text) PARTITION BY RANGE (at)", table, typ))
	for i := range n {
		d.exec(fmt.Sprintf("CREATE TABLE %s_d%d PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')",
			table, i, table, day(i).Format("2006-01-02"), day(i+1).Format("2006-01-02")))
	}
	if withDefault {
		d.exec(fmt.Sprintf("CREATE TABLE %s_default PARTITION OF %s DEFAULT", table, table))
		d.exec(fmt.Sprintf("INSERT INTO %s VALUES (-1, $1, 'old'), (-2, $2, 'future')", table),
			day(-400), day(n+400))
	}
	if rowsPerDay > 0 {
		// Row i of day k sits at k days + i * (24h / rowsPerDay): the first at midnight exactly.
		d.exec(fmt.Sprintf(`INSERT INTO %s (id, at)
SELECT k * $3 + i, ($1::timestamp + k * interval '1 day' + i * (interval '1 day' / $3))::%s
FROM generate_series(0, $2 - 1) k, generate_series(0, $3 - 1) i`, table, typ),
			day0.Format("2006-01-02"), n, rowsPerDay)
	}
}

// pgCode returns the SQLSTATE of err's *pgconn.PgError, "" when there is none.
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// attached reports how partition name stands in the catalog: "attached", "pending", "detached"
// (a table of its own) or "gone".
func (d *db) attached(name string) string {
	d.t.Helper()
	var state string
	err := d.pool.QueryRow(ctx, `
SELECT CASE WHEN c.oid IS NULL THEN 'gone'
            WHEN i.inhrelid IS NULL THEN 'detached'
            WHEN i.inhdetachpending THEN 'pending'
            ELSE 'attached' END
FROM (SELECT to_regclass($1) AS oid) r
LEFT JOIN pg_class c ON c.oid = r.oid
LEFT JOIN pg_inherits i ON i.inhrelid = c.oid`, name).Scan(&state)
	if err != nil {
		d.t.Fatal(err)
	}
	return state
}

func byName(parts []partition.Partition, name string) partition.Partition {
	for _, p := range parts {
		if p.Name == name {
			return p
		}
	}
	return partition.Partition{}
}

func opts() partition.DropOptions {
	return partition.DropOptions{LockTimeout: 200 * time.Millisecond, StatementTimeout: 10 * time.Second}
}

// waitBlocked waits, without sleeping blind, until the backend pid waits on a lock that another
// session holds: pg_blocking_pids says so.
func (d *db) waitBlocked(pid uint32) {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var blocked bool
		if err := d.pool.QueryRow(ctx, "SELECT cardinality(pg_blocking_pids($1)) > 0", int32(pid)).Scan(&blocked); err != nil {
			d.t.Fatal(err)
		}
		if blocked {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("backend %d never blocked", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newSinglePool is a pool of one connection, so that a test can see what Drop left on it.
func newSinglePool(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func nameOf(p *partition.Partition) string {
	if p == nil {
		return ""
	}
	return p.Name
}

// waitQuery waits until a backend runs a statement like pattern (LIKE) and waits on a lock.
func (d *db) waitQuery(pattern string) {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		if err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE datname = current_database() AND query LIKE $1 AND wait_event_type = 'Lock')`, pattern).Scan(&waiting); err != nil {
			d.t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("no backend waits in %q", pattern)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
