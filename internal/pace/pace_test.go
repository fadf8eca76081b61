package pace_test

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/pace"
)

var ctx = context.Background()

// fakeClock moves only when the pacer sleeps; after runs at each sleep (once per sleep).
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	slept time.Duration
	after func()
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(_ context.Context, d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.slept += d
	after := c.after
	c.mu.Unlock()
	if after != nil {
		after()
	}
}

// railURL is u with the rail's application_name.
func railURL(t *testing.T, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := pu.Query()
	q.Set("application_name", "sweeprail")
	pu.RawQuery = q.Encode()
	return pu.String()
}

func openPool(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// busy holds n sessions of application appName active in pg_sleep on the database at u, and
// returns once pg_stat_activity shows them all active; cancel ends them.
func busy(t *testing.T, u, appName string, n int) (cancel func()) {
	t.Helper()
	pu, _ := url.Parse(u)
	q := pu.Query()
	q.Set("application_name", appName)
	pu.RawQuery = q.Encode()
	var pids []int32
	var wg sync.WaitGroup
	for range n {
		c := dbtest.Conn(t, pu.String())
		pids = append(pids, int32(c.PgConn().PID()))
		wg.Add(1)
		go func(c *pgx.Conn) {
			defer wg.Done()
			_, _ = c.Exec(ctx, `SELECT pg_sleep(60)`)
		}(c)
	}
	watch := dbtest.Conn(t, u)
	deadline := time.Now().Add(15 * time.Second)
	for {
		var active int
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY ($1) AND state = 'active'
			AND query LIKE 'SELECT pg_sleep%'`, pids).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if active == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d busy sessions active after 15s", active, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var once sync.Once
	cancel = func() {
		once.Do(func() {
			if _, err := watch.Exec(ctx, `SELECT pg_cancel_backend(pid) FROM unnest($1::int[]) AS pid`, pids); err != nil {
				t.Error(err)
			}
			wg.Wait()
		})
	}
	t.Cleanup(cancel)
	return cancel
}

func TestActiveSessions(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t)
	rail := openPool(t, railURL(t, u))
	busy(t, u, "app", 3)
	busy(t, railURL(t, u), "sweeprail", 2) // the rail's own: same role and application_name
	idle := dbtest.Conn(t, u)              // an idle session of the application
	_ = idle
	n, err := pace.ActiveSessions(ctx, rail)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("ActiveSessions = %d, want the application's 3 busy sessions, not the rail's own nor the idle ones", n)
	}
}

func TestPassWaitSessions(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t)
	rail := openPool(t, railURL(t, u))
	end := busy(t, u, "app", 3)
	const budget = 10 * time.Second
	wait := func(t *testing.T, l pace.Limits, after func(c *fakeClock)) (pace.Waited, *fakeClock, error) {
		t.Helper()
		clock := newFakeClock()
		if after != nil {
			clock.after = func() { after(clock) }
		}
		p := pace.New(pace.Config{Limits: l, Now: clock.now, Sleep: clock.sleep})
		w, err := p.Pass(nil).Wait(ctx, rail, clock.now().Add(budget))
		return w, clock, err
	}
	t.Run("within the limit: no wait", func(t *testing.T) {
		w, _, err := wait(t, pace.Limits{MaxSessions: 3, CriticalSessions: 3}, nil)
		if err != nil || w != (pace.Waited{}) {
			t.Fatalf("Wait = %+v, %v; want no wait", w, err)
		}
	})
	t.Run("over the limit: waits until the deadline", func(t *testing.T) {
		w, _, err := wait(t, pace.Limits{MaxSessions: 2}, nil)
		if err != nil || w.ActiveSessions != budget || w.WALRate != 0 {
			t.Fatalf("Wait = %+v, %v; want the %s budget on active sessions", w, err, budget)
		}
	})
	t.Run("over the critical level: stops at once", func(t *testing.T) {
		w, _, err := wait(t, pace.Limits{MaxSessions: 1, CriticalSessions: 2}, nil)
		var crit *pace.CriticalError
		if !errors.As(err, &crit) || crit.Active != 3 || crit.Critical != 2 || w.ActiveSessions != 0 {
			t.Fatalf("Wait = %+v, %v; want a CriticalError of 3 over 2, no wait", w, err)
		}
	})
	// Last: it ends the busy sessions.
	t.Run("the wait ends when the sessions do", func(t *testing.T) {
		w, _, err := wait(t, pace.Limits{MaxSessions: 2}, func(*fakeClock) { end() })
		if err != nil || w.ActiveSessions != pace.DefaultRecheck {
			t.Fatalf("Wait = %+v, %v; want one recheck (%s)", w, err, pace.DefaultRecheck)
		}
	})
}

func TestPassWaitWAL(t *testing.T) {
	t.Parallel()
	pool := openPool(t, dbtest.URL(t))
	const rate = 1 << 20
	clock := newFakeClock()
	p := pace.New(pace.Config{Limits: pace.Limits{WALRate: rate}, Now: clock.now, Sleep: clock.sleep})
	ps := p.Pass(nil)
	until := clock.now().Add(time.Minute)
	// The WAL is the whole server's, which the tests of other packages write to as well: the
	// positions read around the pacer's own reads bound what it can have measured.
	beforeMark := walInsertLSN(t, pool)
	if w, err := ps.Wait(ctx, pool, until); err != nil || w.WALRate != 0 {
		t.Fatalf("first Wait = %+v, %v; want no wait: it only marks the WAL position", w, err)
	}
	afterMark := walInsertLSN(t, pool)
	if got := ps.MaxRows(50000); got != 50000 {
		t.Fatalf("MaxRows before any batch = %d, want the bound", got)
	}
	// About 1.5 MiB of WAL in no time on the clock: the debt is forgiven past one second's budget.
	if _, err := pool.Exec(ctx, `CREATE TABLE ballast AS SELECT repeat(md5(g::text), 30) AS pad FROM generate_series(1, 1500) g`); err != nil {
		t.Fatal(err)
	}
	const rows = 1500
	ps.Batch(rows)
	from := walInsertLSN(t, pool)
	w, err := ps.Wait(ctx, pool, until)
	if err != nil || w.WALRate < 900*time.Millisecond || w.ActiveSessions != 0 {
		t.Fatalf("Wait after 1.5 MiB at 1 MiB/s = %+v, %v; want about a second on the WAL rate", w, err)
	}
	// A row cost about 1 kB, plus whatever other writers wrote meanwhile: a batch's WAL stays
	// within an eighth of the second's budget at the cost the pacer measured.
	cheapest := float64(from-afterMark) / rows
	dearest := float64(walInsertLSN(t, pool)-beforeMark) / rows
	if cheapest < 960 {
		t.Fatalf("the ballast cost %.0f bytes a row, want at least its 960 bytes of padding", cheapest)
	}
	lo, hi := int(rate/8/dearest), int(rate/8/cheapest)+1
	if got := ps.MaxRows(50000); got < lo || got > hi {
		t.Fatalf("MaxRows after rows of %.0f to %.0f bytes = %d, want %d to %d", cheapest, dearest, got, lo, hi)
	}
	w, err = ps.Wait(ctx, pool, until)
	others := time.Duration(float64(walInsertLSN(t, pool)-from) / rate * float64(time.Second))
	if err != nil || w.WALRate > others+100*time.Millisecond {
		t.Fatalf("Wait with nothing written here = %+v, %v; want almost none beyond the %v the server's other writers' WAL costs", w, err, others)
	}
}

// walInsertLSN is the server's WAL insert position, in bytes.
func walInsertLSN(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var lsn int64
	if err := pool.QueryRow(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsn
}

func TestCheck(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t)
	role := "pace_reader_" + time.Now().Format("150405000000")
	exec := func(sql string) {
		if _, err := dbtest.Conn(t, u).Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec(`CREATE ROLE ` + role + ` LOGIN`)
	t.Cleanup(func() { _, _ = dbtest.Conn(t, u).Exec(ctx, `DROP ROLE IF EXISTS `+role) })
	pu, _ := url.Parse(railURL(t, u))
	pu.User = url.User(role)
	reader := openPool(t, pu.String())
	sessions := pace.New(pace.Config{Limits: pace.Limits{MaxSessions: 10}})
	tests := []struct {
		name  string
		p     *pace.Pacer
		q     pace.Querier
		grant bool
		want  error
	}{
		{"off checks nothing", pace.New(pace.Config{}), reader, false, nil},
		{"the WAL rate needs no privilege", pace.New(pace.Config{Limits: pace.Limits{WALRate: 1 << 20}}), reader, false, nil},
		{"sessions without an application_name", sessions, openPool(t, u), false, pace.ErrNoApplicationName},
		{"sessions by a role that cannot see them", sessions, reader, false, pace.ErrNoPrivilege},
		{"sessions by a role granted pg_monitor", sessions, reader, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.grant {
				exec(`GRANT pg_monitor TO ` + role)
			}
			if err := tt.p.Check(ctx, tt.q); !errors.Is(err, tt.want) {
				t.Fatalf("Check = %v, want %v", err, tt.want)
			}
		})
	}
}

// countingQuerier counts the reads sent through a real pool.
type countingQuerier struct {
	pool  *pgxpool.Pool
	reads int
}

func (c *countingQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.reads++
	return c.pool.QueryRow(ctx, sql, args...)
}

// TestPassEndRead checks the WAL position read behind a batch's COMMIT: the next Wait spends it
// instead of a read of its own, once, and only while it is fresh; a failed one is not spent.
func TestPassEndRead(t *testing.T) {
	t.Parallel()
	pool := openPool(t, dbtest.URL(t))
	t.Run("off without a WAL rate", func(t *testing.T) {
		t.Parallel()
		ps := pace.New(pace.Config{Limits: pace.Limits{MaxSessions: 5}}).Pass(nil)
		if sql, scan := ps.EndRead(); sql != "" || scan != nil {
			t.Fatalf("EndRead = %q, want none: the pass does not pace the WAL rate", sql)
		}
	})
	cases := []struct {
		name string
		// end reads behind the "batch" ("ok", "fail"; "": none); then the clock moves by age,
		// which earns the bucket far more than the server writes meanwhile.
		end   string
		age   time.Duration
		reads []int // the reads of each Wait after it
	}{
		{"a fresh read is spent once", "ok", time.Millisecond, []int{0, 1}},
		{"a stale read is not spent", "ok", time.Second, []int{1, 1}},
		{"a failed read is not spent", "fail", time.Millisecond, []int{1, 1}},
		{"without one the Wait reads", "", time.Millisecond, []int{1, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			ps := pace.New(pace.Config{Limits: pace.Limits{WALRate: 1 << 40}, Now: clock.now, Sleep: clock.sleep}).Pass(nil)
			until := clock.now().Add(time.Hour)
			q := &countingQuerier{pool: pool}
			if _, err := ps.Wait(ctx, q, until); err != nil || q.reads != 1 {
				t.Fatalf("first Wait: %v, %d reads; want one", err, q.reads)
			}
			ps.Batch(10)
			if tc.end != "" {
				sql, scan := ps.EndRead()
				if sql == "" {
					t.Fatal("EndRead gave no read with the WAL rate on")
				}
				if tc.end == "fail" {
					sql = `SELECT 1/0`
				}
				scan(pool.QueryRow(ctx, sql))
			}
			clock.sleep(ctx, tc.age)
			for i, want := range tc.reads {
				q.reads = 0
				if _, err := ps.Wait(ctx, q, until); err != nil || q.reads != want {
					t.Fatalf("Wait %d after the batch: %v, %d reads; want %d", i+1, err, q.reads, want)
				}
			}
		})
	}
}
