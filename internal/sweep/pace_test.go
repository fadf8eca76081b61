package sweep_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/pace"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// holdBusy holds n sessions of the application active in pg_sleep on the database at u, until
// the returned func ends them; it returns once pg_stat_activity shows them all active.
func holdBusy(t *testing.T, pool *pgxpool.Pool, u string, n int) func() {
	t.Helper()
	var (
		pids []int32
		wg   sync.WaitGroup
	)
	for range n {
		c := dbtest.Conn(t, u+"&application_name=app")
		pids = append(pids, int32(c.PgConn().PID()))
		wg.Add(1)
		go func(c *pgx.Conn) {
			defer wg.Done()
			_, _ = c.Exec(ctx, `SELECT pg_sleep(60)`)
		}(c)
	}
	deadline := time.Now().Add(15 * time.Second)
	for count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY ($1) AND state = 'active'
		AND query LIKE 'SELECT pg_sleep%'`, pids) < int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("the %d busy sessions are not all active after 15s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var once sync.Once
	end := func() {
		once.Do(func() {
			exec(t, pool, `SELECT pg_cancel_backend(pid) FROM unnest($1::int[]) AS pid`, pids)
			wg.Wait()
		})
	}
	t.Cleanup(end)
	return end
}

// TestActiveSessionsPacer runs a sweep of two passes beside two busy sessions of the application:
// over MAX_ACTIVE_SESSIONS it waits its budget out, deleting nothing, the wait in throttledMs
// under its cause and in the metric; over the critical level it stops at once with
// critical-load, and its second pass never starts; once the sessions end, it drains.
func TestActiveSessionsPacer(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t)
	pool := poolWith(t, u, map[string]string{"application_name": "sweeprail"})
	at := dbNow(t, pool)
	exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com')`)
	exec(t, pool, `INSERT INTO notifications (account_id, kind, read_at)
		SELECT '00000000-0000-0000-0000-000000000001', CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END, $1::timestamptz - interval '40 days'
		FROM generate_series(1, 1000) i`, at)
	pass := func(kind string) policy.Pass {
		return policy.Pass{Name: kind, Table: "notifications", AgeColumn: "read_at", Where: "t.kind = '" + kind + "'", Retention: 30 * 24 * time.Hour}
	}
	specs := []policy.Spec{{Name: "notifications", Passes: []policy.Pass{pass("even"), pass("odd")}}}
	end := holdBusy(t, pool, u, 2)

	runWith := func(t *testing.T, l pace.Limits) (*wire.Result, *prometheus.Registry) {
		t.Helper()
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg, metrics.Labels{Sweeps: []metrics.Sweep{{Name: "notifications", Passes: []string{"even", "odd"}}}, Outcomes: wire.Outcomes()})
		if err != nil {
			t.Fatal(err)
		}
		clock := newFakeClock()
		sleep := func(_ context.Context, d time.Duration) { clock.Advance(d) }
		s := settings()
		s.Deadline = 10 * time.Second
		p := pace.New(pace.Config{Limits: l, Now: clock.Now, Sleep: sleep})
		if err := p.Check(ctx, pool); err != nil {
			t.Fatal(err)
		}
		r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Settings: s, AsOf: fixedAsOf(at), Now: clock.Now, Sleep: sleep,
			Pacer: p, Metrics: m})
		return run(t, r, "notifications"), reg
	}
	// In order: the last ends the busy sessions.
	t.Run("over the limit the run waits its budget out", func(t *testing.T) {
		res, reg := runWith(t, pace.Limits{MaxSessions: 1, CriticalSessions: 2})
		if res.StopReason != wire.StopBudget || !res.Truncated || res.Deleted != 0 {
			t.Fatalf("run beside 2 busy sessions over 1: %+v, want budget, truncated, nothing deleted", res)
		}
		if res.ThrottledMs < 9000 || res.ThrottledBy["active-sessions"] != res.ThrottledMs || res.Passes[0].ThrottledBy["active-sessions"] < 9000 {
			t.Fatalf("throttled %d ms by %v, want about the 10s budget on active-sessions", res.ThrottledMs, res.ThrottledBy)
		}
		got := counterValue(t, reg, "sweeprail_throttled_seconds_total", map[string]string{"sweep": "notifications", "cause": "active-sessions"})
		if got < 9 {
			t.Errorf("sweeprail_throttled_seconds_total{cause=active-sessions} = %v, want about 10", got)
		}
	})
	t.Run("over the critical level the run stops", func(t *testing.T) {
		res, reg := runWith(t, pace.Limits{MaxSessions: 1, CriticalSessions: 1})
		if res.StopReason != wire.StopCriticalLoad || !res.Truncated || res.Deleted != 0 || len(res.Passes) != 1 || res.ThrottledMs != 0 {
			t.Fatalf("run beside 2 busy sessions over a critical 1: %+v, want critical-load at once, pass odd never started", res)
		}
		if got := runsCounted(t, reg, "notifications", string(wire.StopCriticalLoad)); got != 1 {
			t.Errorf("sweeprail_runs_total{outcome=critical-load} is %v, want 1", got)
		}
	})
	t.Run("within the limit the run drains", func(t *testing.T) {
		end()
		res, _ := runWith(t, pace.Limits{MaxSessions: 1, CriticalSessions: 2})
		if res.StopReason != wire.StopExhausted || res.Deleted != 1000 || res.ThrottledMs != 0 || res.ThrottledBy != nil {
			t.Fatalf("run with the sessions gone: %+v, want all 1000 deleted unthrottled", res)
		}
	})
}

// TestWALRatePacer drains a table at a low WAL rate on a clock that moves only when the run
// waits: the waits are in throttledMs under wal-rate, they pay for the WAL the run wrote, and
// batches shrink to the WAL the bucket's burst allows. (Package pace holds the one-second
// windows.)
func TestWALRatePacer(t *testing.T) {
	t.Parallel()
	pool, _ := poolAndURL(t)
	at := dbNow(t, pool)
	seedNotifications(t, pool, at, 3000, 0)
	own := ownDeleteWAL(t, pool, "notifications")
	const rate = 64 << 10
	clock := newFakeClock()
	sleep := func(_ context.Context, d time.Duration) { clock.Advance(d) }
	p := pace.New(pace.Config{Limits: pace.Limits{WALRate: rate}, Now: clock.Now, Sleep: sleep})
	s := settings()
	s.BatchSize, s.MinBatchSize = 1000, 1
	// The WAL is the whole server's: while other packages seed their tables the bucket charges
	// this run for their writes too, and a minute of this clock is 4 MiB, which they can spend.
	// The clock moves only in waits, so a day's budget and a cap no drain meets keep the test
	// about the waits, not about what else the server wrote.
	s.Deadline, s.MaxBatches = 24*time.Hour, 1<<20
	r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec(t, "notifications")}, Settings: s, AsOf: fixedAsOf(at),
		Now: clock.Now, Sleep: sleep, Pacer: p})
	res := run(t, r, "notifications")
	if res.StopReason != wire.StopExhausted || res.Deleted < 3000 {
		t.Fatalf("run: %+v, want every row deleted", res)
	}
	waited := time.Duration(res.ThrottledBy["wal-rate"]) * time.Millisecond
	if waited <= 0 || res.ThrottledMs != res.ThrottledBy["wal-rate"] {
		t.Fatalf("throttled %d ms by %v, want waits on wal-rate", res.ThrottledMs, res.ThrottledBy)
	}
	// The clock moved only in the waits: they earned at least what deleting these rows writes,
	// less the bucket's allowances (a burst saved, a second's debt forgiven, the last batch's
	// WAL, read by no wait). Others' writes only lengthen the waits.
	if earned := waited.Seconds() * rate; earned < float64(own)/4 {
		t.Errorf("%s of waits at %d B/s earned %.0f bytes, for %d bytes of WAL the rows' deletes write", waited, rate, earned, own)
	}
	// An eighth of a second's budget is 8 KiB, a few dozen of these rows: far under 1000.
	if n := res.Passes[0].BatchCount; n < 10 {
		t.Errorf("%d batches, want the first of 1000 rows followed by many smaller ones", n)
	}
}

// ownDeleteWAL is the WAL that deleting table's rows writes, read from EXPLAIN's WAL counters
// for a DELETE of a copy laid out alike: this backend's own bytes, which no other session's
// writes inflate. A checkpoint between the seed and the copy's delete precedes the run's
// deletes too, so their full-page images never make the copy's figure the larger.
func ownDeleteWAL(t *testing.T, pool *pgxpool.Pool, table string) int64 {
	t.Helper()
	exec(t, pool, `CREATE TABLE wal_twin (LIKE `+table+`) WITH (fillfactor = 10)`)
	exec(t, pool, `INSERT INTO wal_twin SELECT * FROM `+table)
	var plan []struct {
		Plan struct {
			WALBytes int64 `json:"WAL Bytes"`
		} `json:"Plan"`
	}
	var raw []byte
	if err := pool.QueryRow(ctx, `EXPLAIN (ANALYZE, WAL, FORMAT JSON) DELETE FROM wal_twin`).Scan(&raw); err != nil {
		t.Fatalf("explain the copy's delete: %v", err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 || plan[0].Plan.WALBytes <= 0 {
		t.Fatalf("explain the copy's delete: %v: %s", err, raw)
	}
	exec(t, pool, `DROP TABLE wal_twin`)
	return plan[0].Plan.WALBytes
}

// TestWALRateReadsBehindCommit checks that a pass paced on the WAL rate reads the WAL position
// behind each batch's COMMIT, in its round trip, and on its own only before the first batch: a
// budget that never makes it wait costs no round trip per batch.
func TestWALRateReadsBehindCommit(t *testing.T) {
	t.Parallel()
	pool, trace := tracedPool(t, dbtest.URL(t))
	at := dbNow(t, pool)
	seedNotifications(t, pool, at, 600, 0)
	// The pacer's clock moves a millisecond each time it is read: a position read behind a
	// commit is always fresh when the next Wait comes (a loaded machine's real pause between
	// the two is no failure), and the bucket earns more than any batch writes, so no Wait
	// sleeps (each still counts the ticks it read as throttled time).
	var mu sync.Mutex
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		tick = tick.Add(time.Millisecond)
		return tick
	}
	p := pace.New(pace.Config{Limits: pace.Limits{WALRate: 1 << 40}, Now: now})
	r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec(t, "notifications")}, Settings: fixed(settings(), 50),
		AsOf: fixedAsOf(at), Pacer: p})
	trace.mu.Lock()
	trace.sql = nil
	trace.mu.Unlock()
	res := run(t, r, "notifications")
	if res.StopReason != wire.StopExhausted || res.Deleted != 600 {
		t.Fatalf("run: %+v, want every row deleted", res)
	}
	trace.mu.Lock()
	defer trace.mu.Unlock()
	reads := 0
	for _, sql := range trace.sql {
		if strings.Contains(sql, "pg_current_wal_insert_lsn") {
			reads++
		}
	}
	if batches := res.Passes[0].BatchCount; batches < 12 || reads != len(res.Passes) {
		t.Fatalf("%d batches, %d reads of the WAL position on their own; want at least 12 batches, one read per pass (%d)",
			batches, reads, len(res.Passes))
	}
}
