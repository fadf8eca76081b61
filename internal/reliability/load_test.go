package reliability

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
)

// loadDuration is how long the writer and the loops run together: 60s, or RELIABILITY_LOAD
// (a Go duration) to try a broken build quickly.
func loadDuration(t *testing.T) time.Duration {
	t.Helper()
	s := os.Getenv("RELIABILITY_LOAD")
	if s == "" {
		return 60 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("RELIABILITY_LOAD=%q: want a positive Go duration such as 60s", s)
	}
	return d
}

// TestLoad: three api processes on different loopback ports over one database, four
// sweepcron --every loops against them (two share an api), and a writer inserting eligible and
// fresh rows into two tables all along.
//
//   - Runs of one sweep never overlap. Proven on the database's own clock: a trigger records every
//     lease write (acquire, takeover, release) with the writing session's application_name, so
//     each run's lease interval is exact; no acquisition may happen while another owner's lease is
//     unreleased. A second trigger records every DELETE statement on the written tables: each must
//     fall inside a lease interval of its sweep, held by the same api process. And the apis' logs
//     must count exactly one non-skipped run per lease acquisition.
//   - Every answer is ok, truncated or skipped, in every tick of every loop.
//   - No eligible row outlives two ticks: a monitor samples the oldest eligible row's age
//     (insertion time, database clock) all along.
//   - No fresh row is lost: every id the writer inserted as fresh is there at the end, and
//     nothing else is left.
func TestLoad(t *testing.T) {
	long(t)
	const (
		tick      = 2 * time.Second
		maxAge    = 2 * tick
		apis      = 3
		loops     = 4
		writeEach = 100 * time.Millisecond
	)
	duration := loadDuration(t)
	u := dbtest.URL(t)
	pool := openPool(t, u)
	exec1(t, pool, auditSQL)
	acc := account(t, pool)
	_, cronBin := binaries(t)

	// Small batches, a pause, and a writer that never stops give every run several batches, so
	// runs are long enough to collide and the lease has work to do.
	env := map[string]string{
		"SWEEP_DEADLINE":          "5s",
		"BATCH_STATEMENT_TIMEOUT": "2s",
		"BATCH_LOCK_TIMEOUT":      "1s",
		"COUNT_TIMEOUT":           "2s",
		"SERVER_WRITE_TIMEOUT":    "10s",
		"SHUTDOWN_GRACE":          "5s",
		"BATCH_SIZE":              "100",
		"BATCH_TARGET":            "1us",
		"BATCH_PAUSE":             "20ms",
	}
	var servers []*apiProc
	for i := range apis {
		servers = append(servers, startAPI(t, fmt.Sprintf("reliability-load-api-%d", i), u, env))
	}
	start := time.Now()
	var crons []*proc
	for i := range loops {
		if i == loops/2 {
			// Half the loops start half a tick later: a sweep is called every half tick, and
			// within each half the two loops (on two different apis) race for the lease.
			time.Sleep(tick / 2)
		}
		crons = append(crons, startProc(t, fmt.Sprintf("sweepcron-%d", i), cronBin,
			[]string{"--every", tick.String(), "--json"}, cronEnv(servers[i%apis], "15s")))
	}

	w := startWriter(t, u, acc, writeEach)
	m := startMonitor(t, pool, 250*time.Millisecond, maxAge)
	time.Sleep(duration) // the load itself: this is the duration under test, not an ordering wait
	w.stop()
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	waitFor(t, "the loops to sweep the writer's last eligible rows", 3*tick, func() bool {
		return notificationsState(t, pool).eligible == 0 && tokensState(t, pool).eligible == 0
	})
	m.stop()
	held := time.Since(start)

	for _, c := range crons {
		if err := c.terminate(t, 30*time.Second); err != nil {
			t.Errorf("%s exited with %v after SIGTERM, want 0\n%s", c.name, err, tail(c.stderr.String(), 20))
		}
	}
	for _, s := range servers {
		if err := s.terminate(t, 20*time.Second); err != nil {
			t.Errorf("%s exited with %v after SIGTERM, want 0", s.name, err)
		}
	}

	t.Run("every answer is ok, truncated or skipped", func(t *testing.T) {
		categories := map[string]int{}
		ticks, bad := 0, 0
		for _, c := range crons {
			reps := cronReports(t, c.stdout)
			if least := int(duration/tick) / 2; len(reps) < least {
				t.Errorf("%s ran %d ticks in %s, want at least %d", c.name, len(reps), duration, least)
			}
			ticks += len(reps)
			for i, r := range reps {
				// The SIGTERM that ends the loop lands in a tick as often as not (a tick of nine
				// routes on a loaded machine outlasts its interval): the tick it cuts reports
				// interrupted, by design. Only the last tick may; its routes are checked below.
				cut := r.Interrupted && i == len(reps)-1 && r.ExitCode == 1
				if !cut && (r.ExitCode != 0 || len(r.NotCalled) != 0) {
					bad++
					t.Errorf("%s tick at %s: exit %d, not called %v: %s", c.name, r.StartedAt.Format(time.RFC3339), r.ExitCode, r.NotCalled, r.Error)
				}
				for _, rt := range r.Routes {
					categories[rt.Category]++
					if !slices.Contains(healthy, rt.Category) && bad < 20 {
						bad++
						t.Errorf("%s %s: %s HTTP %d %s", c.name, rt.Sweep, rt.Category, rt.StatusCode, rt.Detail)
					}
				}
			}
			if strings.Contains(c.stderr.String(), "DATA RACE") {
				t.Errorf("%s: the race detector reported a data race:\n%s", c.name, c.stderr)
			}
		}
		t.Logf("figures: %d ticks of %d loops, %d route answers: %v", ticks, loops, sum(categories), categories)
	})

	runs := apiRuns(t, servers)
	leases := leaseIntervals(t, pool)

	t.Run("runs of one sweep never overlap", func(t *testing.T) {
		for i, v := range leases.violations {
			if i == 10 {
				t.Errorf("… and %d more", len(leases.violations)-i)
				break
			}
			t.Error(v)
		}
		acquisitions := 0
		for label, ivs := range leases.byLabel {
			acquisitions += len(ivs)
			if got := runs.held[label]; got != len(ivs) {
				t.Errorf("%s: the logs count %d runs that held the lease, the database %d acquisitions", label, got, len(ivs))
			}
		}
		// Every DELETE on a written table ran inside a lease interval of its sweep, in the
		// process holding it.
		deletes, outside := 0, 0
		rows, err := pool.Query(ctx, `SELECT tbl, app, at FROM reliability_delete_audit ORDER BY at`)
		if err != nil {
			t.Fatal(err)
		}
		label := map[string]string{"notifications": "notifications", "refresh_tokens": "refresh-tokens"}
		for rows.Next() {
			var tbl, app string
			var at time.Time
			if err := rows.Scan(&tbl, &app, &at); err != nil {
				t.Fatal(err)
			}
			deletes++
			if !leases.covers(label[tbl], app, at) {
				if outside++; outside <= 10 {
					t.Errorf("a DELETE on %s by %s at %s ran outside every lease it held", tbl, app, at.Format(time.RFC3339Nano))
				}
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if outside > 0 {
			t.Errorf("%d of %d DELETE statements ran outside their process's lease", outside, deletes)
		}
		t.Logf("figures: %d lease acquisitions, %d runs skipped on a held lease, %d DELETE statements audited, 0 overlaps allowed, %d found",
			acquisitions, runs.skipped, deletes, len(leases.violations))
	})

	t.Run("the api logs are clean", func(t *testing.T) {
		for i, p := range runs.problems {
			if i == 10 {
				t.Errorf("… and %d more", len(runs.problems)-i)
				break
			}
			t.Error(p)
		}
	})

	t.Run("no eligible row outlives two ticks", func(t *testing.T) {
		if m.worst > maxAge {
			t.Errorf("an eligible row was %s old (at %s), past two ticks (%s); %d of %d samples over",
				m.worst.Round(time.Millisecond), m.worstAt.Format(time.RFC3339), maxAge, m.over, m.samples)
		}
		t.Logf("figures: oldest eligible row seen %s over %d samples (bound %s)", m.worst.Round(time.Millisecond), m.samples, maxAge)
	})

	t.Run("no fresh row is lost", func(t *testing.T) {
		for _, c := range []struct {
			table string
			ids   []int64
		}{{"notifications", w.freshNotes}, {"refresh_tokens", w.freshTokens}} {
			present := scalar[int64](t, pool, fmt.Sprintf(`SELECT count(*) FROM %s WHERE id = ANY($1)`, c.table), c.ids)
			total := scalar[int64](t, pool, fmt.Sprintf(`SELECT count(*) FROM %s`, c.table))
			if present != int64(len(c.ids)) || total != int64(len(c.ids)) {
				t.Errorf("%s: %d of %d fresh rows present, %d rows in all: want every fresh row and nothing else",
					c.table, present, len(c.ids), total)
			}
		}
		t.Logf("figures: held %s; inserted %d eligible and %d fresh notifications, %d eligible and %d fresh tokens; deleted %d rows; fresh rows lost: 0 allowed, %d found",
			held.Round(time.Second), w.eligibleNotes, len(w.freshNotes), w.eligibleTokens, len(w.freshTokens), runs.deleted,
			int64(len(w.freshNotes)+len(w.freshTokens))-scalar[int64](t, pool, `SELECT (SELECT count(*) FROM notifications) + (SELECT count(*) FROM refresh_tokens)`))
	})
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// What the writer inserts each time, in one transaction: about 500 eligible notifications and 300
// eligible tokens a second at 100ms, so a run between two ticks has a few batches of 100 to do.
const (
	eligibleNotesEach  = 50
	freshNotesEach     = 10
	eligibleTokensEach = 30
	freshTokensEach    = 5
)

// writer inserts eligible and fresh notifications and refresh tokens every interval, and
// remembers the fresh ids.
type writer struct {
	done, stopped                 chan struct{}
	err                           error
	eligibleNotes, eligibleTokens int
	freshNotes, freshTokens       []int64
}

func startWriter(t *testing.T, u, acc string, every time.Duration) *writer {
	t.Helper()
	pool, err := dbpool.NewPool(ctx, withApp(t, u, "reliability-writer"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w := &writer{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tk.C:
			}
			if err := w.write(pool, acc); err != nil {
				w.err = err
				return
			}
		}
	}()
	return w
}

func (w *writer) write(pool *pgxpool.Pool, acc string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
	if _, err := tx.Exec(ctx, `INSERT INTO notifications (account_id, kind, read_at)
SELECT $1::uuid, 'eligible', now() - interval '31 days' FROM generate_series(1, $2::int)`, acc, eligibleNotesEach); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO refresh_tokens (account_id, token_hash, expires_at)
SELECT $1::uuid, 'old:'::bytea || uuid_send(gen_random_uuid()), now() - interval '2 days' FROM generate_series(1, $2::int)`, acc, eligibleTokensEach); err != nil {
		return err
	}
	notes, err := ids(tx.Query(ctx, `INSERT INTO notifications (account_id, kind, read_at)
SELECT $1::uuid, 'fresh', CASE WHEN i % 2 = 0 THEN now() - interval '29 days' END FROM generate_series(1, $2::int) i RETURNING id`, acc, freshNotesEach))
	if err != nil {
		return err
	}
	tokens, err := ids(tx.Query(ctx, `INSERT INTO refresh_tokens (account_id, token_hash, expires_at)
SELECT $1::uuid, 'keep:'::bytea || uuid_send(gen_random_uuid()),
       CASE WHEN i % 2 = 0 THEN now() - interval '23 hours' ELSE now() + interval '1 hour' END
FROM generate_series(1, $2::int) i RETURNING id`, acc, freshTokensEach))
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	// Counted only once committed: these rows exist.
	w.eligibleNotes += eligibleNotesEach
	w.eligibleTokens += eligibleTokensEach
	w.freshNotes = append(w.freshNotes, notes...)
	w.freshTokens = append(w.freshTokens, tokens...)
	return nil
}

func ids(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// stop ends the writer and waits for its last transaction.
func (w *writer) stop() {
	close(w.done)
	<-w.stopped
}

// monitor samples the age of the oldest eligible row of both written tables.
type monitor struct {
	done, stopped chan struct{}
	samples, over int
	worst         time.Duration
	worstAt       time.Time
	err           error
}

func startMonitor(t *testing.T, pool *pgxpool.Pool, every, bound time.Duration) *monitor {
	t.Helper()
	m := &monitor{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(m.stopped)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-tk.C:
			}
			var age float64
			var at time.Time
			err := pool.QueryRow(ctx, `SELECT greatest(
  (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM notifications WHERE kind = 'eligible'),
  (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM refresh_tokens WHERE substr(token_hash, 1, 4) = 'old:')), now()`).Scan(&age, &at)
			if err != nil {
				m.err = err
				return
			}
			d := time.Duration(age * float64(time.Second))
			m.samples++
			if d > bound {
				m.over++
			}
			if d > m.worst {
				m.worst, m.worstAt = d, at
			}
		}
	}()
	t.Cleanup(func() {
		if m.err != nil {
			t.Errorf("monitor: %v", m.err)
		}
	})
	return m
}

func (m *monitor) stop() {
	close(m.done)
	<-m.stopped
}

// runLog is what the apis' logs say about the runs.
type runLog struct {
	// held counts, per sweep, the runs that took the lease (every run but a skipped one).
	held     map[string]int
	skipped  int
	deleted  int64
	problems []string
}

// apiRuns reads every api's log: each line must be JSON; no ERROR line, no lease lost at release,
// no data race.
func apiRuns(t *testing.T, servers []*apiProc) runLog {
	t.Helper()
	rl := runLog{held: map[string]int{}}
	for _, s := range servers {
		if strings.Contains(s.stderr.String(), "DATA RACE") {
			rl.problems = append(rl.problems, fmt.Sprintf("%s: the race detector reported a data race:\n%s", s.name, s.stderr))
		}
		for _, l := range s.stderr.lines() {
			var rec struct {
				Level   string `json:"level"`
				Msg     string `json:"msg"`
				Sweep   string `json:"sweep"`
				Skipped bool   `json:"skipped"`
				Deleted int64  `json:"deleted"`
			}
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				if !strings.Contains(s.stderr.String(), "DATA RACE") {
					rl.problems = append(rl.problems, fmt.Sprintf("%s: a log line is not JSON: %s", s.name, l))
				}
				continue
			}
			switch {
			case rec.Level == "ERROR" || strings.HasPrefix(rec.Msg, "lease was gone"):
				rl.problems = append(rl.problems, fmt.Sprintf("%s: %s", s.name, l))
			case rec.Msg == "sweep run" && rec.Skipped:
				rl.skipped++
			case rec.Msg == "sweep run":
				rl.held[rec.Sweep]++
				rl.deleted += rec.Deleted
			}
		}
	}
	return rl
}

// interval is one lease, acquisition to release, on the database clock.
type interval struct {
	owner, app string
	from, to   time.Time
}

type leaseLog struct {
	byLabel    map[string][]interval
	violations []string
}

// leaseIntervals rebuilds every lease from the audit, in the order the writes happened. A
// lease can only be acquired once the previous one is released: an acquisition while another
// owner's lease stands (a takeover, or two holders) is a violation, as is a release by someone
// other than the holder, or a lease never released.
func leaseIntervals(t *testing.T, pool *pgxpool.Pool) leaseLog {
	t.Helper()
	ll := leaseLog{byLabel: map[string][]interval{}}
	rows, err := pool.Query(ctx, `SELECT label, owner::text, op, app, at FROM reliability_lease_audit ORDER BY label, at, id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	open := map[string]*interval{}
	for rows.Next() {
		var label, owner, op, app string
		var at time.Time
		if err := rows.Scan(&label, &owner, &op, &app, &at); err != nil {
			t.Fatal(err)
		}
		cur := open[label]
		switch op {
		case "INSERT", "UPDATE":
			if cur != nil {
				ll.violations = append(ll.violations, fmt.Sprintf("%s: %s (%s) acquired by %s at %s while %s (%s) held it since %s",
					label, owner, app, op, at.Format(time.RFC3339Nano), cur.owner, cur.app, cur.from.Format(time.RFC3339Nano)))
				cur.to = at
				ll.byLabel[label] = append(ll.byLabel[label], *cur)
			}
			open[label] = &interval{owner: owner, app: app, from: at}
		case "DELETE":
			if cur == nil || cur.owner != owner {
				ll.violations = append(ll.violations, fmt.Sprintf("%s: released by %s at %s, not the holder", label, owner, at.Format(time.RFC3339Nano)))
				continue
			}
			cur.to = at
			ll.byLabel[label] = append(ll.byLabel[label], *cur)
			delete(open, label)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for label, cur := range open {
		ll.violations = append(ll.violations, fmt.Sprintf("%s: %s (%s) never released its lease of %s", label, cur.owner, cur.app, cur.from.Format(time.RFC3339Nano)))
	}
	return ll
}

// covers reports whether app held label's lease at the instant at.
func (ll leaseLog) covers(label, app string, at time.Time) bool {
	ivs := ll.byLabel[label]
	// The intervals of one label are disjoint and in order (or a violation was recorded):
	// find the last one starting at or before at.
	i := sort.Search(len(ivs), func(i int) bool { return ivs[i].from.After(at) }) - 1
	return i >= 0 && ivs[i].app == app && !at.After(ivs[i].to)
}
