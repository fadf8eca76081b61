package sweep_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

var ctx = context.Background()

// settings are roomy bounds for tests that are not about bounds.
func settings() sweep.Settings {
	return sweep.Settings{
		Deadline: time.Minute, StatementTimeout: 5 * time.Second, LockTimeout: 2 * time.Second,
		CountTimeout: 5 * time.Second, BatchSize: 1000, MinBatchSize: 100, MaxBatchSize: 50000,
		BatchTarget: 100 * time.Millisecond, MaxBatches: 1000,
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeClock is a clock that moves only when told, so budget tests never sleep.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// dbNow reads the database clock: tests place rows relative to it and pin runs to it with
// WithAsOf, so "exactly at the cutoff" is exact.
func dbNow(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	if err := pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

func fixedAsOf(at time.Time) func(context.Context) (time.Time, error) {
	return func(context.Context) (time.Time, error) { return at, nil }
}

// newRunner builds a runner from cfg, quiet unless cfg says otherwise, and fails the test if cfg
// does not validate.
func newRunner(t *testing.T, cfg sweep.Config) *sweep.Runner {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	r, err := sweep.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
}

// analyze runs an ANALYZE statement once the writes before it have reached the statistics, and
// returns once the ANALYZE has too. The access-path choice calls statistics stale when more rows
// changed since the last ANALYZE than it allows (pg_stat_get_mod_since_analyze), so counts of a
// seed that arrive after the ANALYZE, or an ANALYZE not yet seen, make a dense table look stale.
//
// PostgreSQL 15 and later flush a backend's counts before its next answer when asked to, and an
// ANALYZE's own counts before it answers. PostgreSQL 14 keeps a backend's counts until one of
// its transactions ends at least half a second (PGSTAT_STAT_INTERVAL) after its last report, and
// its statistics collector answers from a file up to that old: so each idle connection ends a
// transaction past that interval, and the wait afterwards is for the collector to show the
// ANALYZE, bounded.
func analyze(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	v14 := flushStats(t, pool)
	began := dbNow(t, pool)
	exec(t, pool, sql)
	if !v14 {
		return
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		var seen bool
		if err := pool.QueryRow(ctx, `SELECT coalesce(max(greatest(last_analyze, last_autoanalyze)) >= $1, false)
			FROM pg_stat_user_tables`, began).Scan(&seen); err != nil {
			t.Fatal(err)
		}
		if seen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the statistics collector did not show %q within 10s", sql)
		}
		time.Sleep(pgstatInterval / 5)
	}
}

// pgstatInterval is PostgreSQL 14's PGSTAT_STAT_INTERVAL: how long a backend keeps its counts,
// and how old a statistics file its collector may answer from.
const pgstatInterval = 500 * time.Millisecond

// flushStats has every idle connection of pool report its statistics, as analyze says, and
// answers whether the server is PostgreSQL 14, whose collector takes them asynchronously.
func flushStats(t *testing.T, pool *pgxpool.Pool) (v14 bool) {
	t.Helper()
	v14 = count(t, pool, "SELECT current_setting('server_version_num')::int") < 150000
	flush := "SELECT pg_stat_force_next_flush()"
	if v14 {
		flush = "SELECT 1"
		time.Sleep(pgstatInterval + 10*time.Millisecond)
	}
	for _, c := range pool.AcquireAllIdle(ctx) {
		_, err := c.Exec(ctx, flush)
		c.Release()
		if err != nil {
			t.Fatalf("flush the statistics: %v", err)
		}
	}
	return v14
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	return n
}

func spec(t *testing.T, name string) policy.Spec {
	t.Helper()
	for _, s := range policy.Catalog() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no sweep %q in the catalog", name)
	return policy.Spec{}
}

func run(t *testing.T, r *sweep.Runner, name string) *wire.Result {
	t.Helper()
	res, err := r.Run(ctx, name, sweep.Options{})
	if err != nil {
		t.Fatalf("run %s: %v", name, err)
	}
	return res
}

// testPath is one way a batched pass can run, which the correctness tests loop over: each access
// path in its first form (no row locks: what every batch runs), and in its locking form (FOR
// UPDATE SKIP LOCKED: the retry of a batch that met a held row lock), forced for every batch.
type testPath struct {
	name    string
	path    sweep.Path
	locking bool
}

var testPaths = []testPath{
	{"index", sweep.PathIndex, false},
	{"heap", sweep.PathHeap, false},
	{"index-locking", sweep.PathIndex, true},
	{"heap-locking", sweep.PathHeap, true},
}

// config returns cfg running every batched pass on tp with batches of size rows: on the heap path,
// ranges of size blocks, which hold size rows of a table laid out a row per page (onePerPage).
func (tp testPath) config(cfg sweep.Config, size int) sweep.Config {
	var blocks uint32
	if tp.path == sweep.PathHeap {
		blocks = uint32(size)
	}
	return sweep.WithTestKnobs(cfg, tp.path, blocks, 0, tp.locking)
}

// onePerPage lays table out a row per page for the rows inserted next (fillfactor 10, with rows
// of about a kilobyte, which the caller pads): heap ranges of k blocks then hold k rows, in
// insertion order, and a test's expectations are the same on every path.
func onePerPage(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	exec(t, pool, "ALTER TABLE "+table+" SET (fillfactor = 10)")
}

// pad is about a kilobyte of text unique to row i (held inline: short of TOAST's threshold).
const pad = `repeat(md5(i::text), 30)`
