package sweep_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the oracles read Pacific/Kiritimati and America/Los_Angeles on any machine

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// The policy language, each shape against an oracle written from its rule.

func load(t *testing.T, yaml string) *policy.Policy {
	t.Helper()
	pol, err := policy.Load("p.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("load: %v\n%s", err, yaml)
	}
	return pol
}

// ids reads a column of int64 in order.
func ids(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []int64 {
	t.Helper()
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const conditionalGuardsPolicy = `sweeps:
  - name: ops
    passes:
      - name: expired
        table: ops
        age_column: expires_at
        expiry: true
        retention: 30d
        keep_while_referenced_by:
          - table: attempts
            column: op_id
            where: g.state IN ('reserved', 'authorized') OR g.expires_at >= :cutoff
          - table: jobs
            column: op_id
            where: g.state = 'runnable'
          - table: notices
            column: op_id
            where: g.state = 'pending'
`

const conditionalGuardsSchema = `
CREATE TABLE ops (id bigint PRIMARY KEY, expires_at timestamptz NOT NULL);
CREATE INDEX ops_expires_at ON ops (expires_at);
CREATE TABLE attempts (op_id bigint NOT NULL, state text NOT NULL, expires_at timestamptz NOT NULL);
CREATE INDEX attempts_op_id ON attempts (op_id);
CREATE TABLE jobs (op_id bigint, state text NOT NULL);
CREATE INDEX jobs_runnable ON jobs (op_id) WHERE state = 'runnable';
CREATE TABLE notices (op_id bigint NOT NULL, state text NOT NULL);
CREATE INDEX notices_op_id ON notices (op_id);
`

// TestConditionalGuards checks keep guards with a where: each guard alone holds a row, a
// referencing row its where leaves out does not, and :cutoff in a guard is the run's cutoff.
func TestConditionalGuards(t *testing.T) {
	t.Parallel()

	t.Run("each guard alone holds a row", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, conditionalGuardsSchema)
		at := dbNow(t, pool)
		cutoff := at.Add(-30 * 24 * time.Hour)
		type attempt struct {
			state   string
			expires time.Time
		}
		days := func(n int) time.Time { return at.Add(-time.Duration(n) * 24 * time.Hour) }
		ops := []struct {
			name     string
			expires  time.Time
			attempts []attempt
			jobs     []string
			notices  []string
		}{
			{name: "unreferenced", expires: days(40)},
			{name: "within its grace", expires: days(20)},
			{name: "exactly at the cutoff", expires: cutoff},
			{name: "a reserved attempt", expires: days(40), attempts: []attempt{{"reserved", days(40)}}},
			{name: "an authorized attempt", expires: days(40), attempts: []attempt{{"authorized", days(60)}}},
			{name: "a captured attempt within its own grace (:cutoff)", expires: days(40), attempts: []attempt{{"captured", days(10)}}},
			{name: "a captured attempt at the cutoff (:cutoff)", expires: days(40), attempts: []attempt{{"captured", cutoff}}},
			{name: "a captured attempt past the grace", expires: days(40), attempts: []attempt{{"captured", days(35)}}},
			{name: "a runnable job", expires: days(40), jobs: []string{"runnable"}},
			{name: "a done job", expires: days(40), jobs: []string{"done", "failed"}},
			{name: "a pending notice", expires: days(40), notices: []string{"pending"}},
			{name: "a sent notice", expires: days(40), notices: []string{"sent"}},
			{name: "all of them finished", expires: days(40), attempts: []attempt{{"captured", days(35)}, {"voided", days(90)}},
				jobs: []string{"done"}, notices: []string{"sent", "bounced"}},
			{name: "one held among finished ones", expires: days(40), attempts: []attempt{{"captured", days(35)}},
				jobs: []string{"done", "runnable"}, notices: []string{"sent"}},
		}
		// The oracle, from the rule: an operation goes once its expiry is 30 days past, unless an
		// attempt is reserved or authorized or expired less than 30 days ago, a runnable job
		// names it, or a pending notice is bound to it.
		var wantKept, wantGone []int64
		for i, op := range ops {
			id := int64(i + 1)
			exec(t, pool, `INSERT INTO ops VALUES ($1, $2)`, id, op.expires)
			held := !op.expires.Before(cutoff)
			for _, a := range op.attempts {
				exec(t, pool, `INSERT INTO attempts VALUES ($1, $2, $3)`, id, a.state, a.expires)
				held = held || a.state == "reserved" || a.state == "authorized" || !a.expires.Before(cutoff)
			}
			for _, s := range op.jobs {
				exec(t, pool, `INSERT INTO jobs VALUES ($1, $2)`, id, s)
				held = held || s == "runnable"
			}
			for _, s := range op.notices {
				exec(t, pool, `INSERT INTO notices VALUES ($1, $2)`, id, s)
				held = held || s == "pending"
			}
			if held {
				wantKept = append(wantKept, id)
			} else {
				wantGone = append(wantGone, id)
			}
		}
		pol := load(t, conditionalGuardsPolicy)
		if warnings, err := check.Policy(ctx, pool, pol); err != nil || len(warnings) > 0 {
			t.Fatalf("check: %q %v", warnings, err)
		}
		r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings(), AsOf: fixedAsOf(at)})
		dr, err := r.DryRun(ctx, "ops")
		if err != nil {
			t.Fatal(err)
		}
		if e := dr.Passes[0].Eligible; e == nil || *e != int64(len(wantGone)) || !dr.Passes[0].Indexed {
			t.Errorf("dry run: eligible %v, indexed %t; want %d, true", e, dr.Passes[0].Indexed, len(wantGone))
		}
		res := run(t, r, "ops")
		if res.Deleted != int64(len(wantGone)) || res.StopReason != wire.StopExhausted {
			t.Errorf("run: deleted %d (%s, error %+v), want %d", res.Deleted, res.StopReason, res.Error, len(wantGone))
		}
		kept := ids(t, pool, `SELECT id FROM ops ORDER BY id`)
		if !slices.Equal(kept, wantKept) {
			for _, id := range wantKept {
				if !slices.Contains(kept, id) {
					t.Errorf("%q was deleted", ops[id-1].name)
				}
			}
			for _, id := range wantGone {
				if slices.Contains(kept, id) {
					t.Errorf("%q was kept", ops[id-1].name)
				}
			}
		}
	})
}

// familySchema is the delete_with tests' schema: events, whose deliveries reference them under
// NO ACTION and whose receipts under RESTRICT. note pads an event to a page where a test lays the
// table out so (onePerPage).
const familySchema = `
CREATE TABLE events (id bigint PRIMARY KEY, state text NOT NULL, closed_at timestamptz NOT NULL, note text);
CREATE INDEX events_closed_at ON events (closed_at);
CREATE TABLE deliveries (id bigserial PRIMARY KEY, event_id bigint NOT NULL REFERENCES events (id));
CREATE INDEX deliveries_event_id ON deliveries (event_id);
CREATE TABLE receipts (id bigserial PRIMARY KEY, event_id bigint NOT NULL REFERENCES events (id) ON DELETE RESTRICT);
CREATE INDEX receipts_event_id ON receipts (event_id);
`

// familyPolicy is a policy sweeping familySchema's terminal events after 30 days, extra added to
// its pass.
func familyPolicy(extra string) string {
	return `sweeps:
  - name: events
    passes:
      - name: terminal
        table: events
        age_column: closed_at
        where: t.state = 'terminal'
        retention: 30d
` + extra
}

// familyBoth is familyPolicy's extra deleting both children with their events.
const familyBoth = `        delete_with:
          - table: deliveries
            column: event_id
          - table: receipts
            column: event_id
`

// seedFamilies inserts events 1 to 1000, past the cutoff of at, every tenth still open; event i has
// i%4 deliveries and i%3 receipts. padded fills each event's note with pad.
func seedFamilies(t *testing.T, pool *pgxpool.Pool, at time.Time, padded bool) {
	t.Helper()
	note := "NULL"
	if padded {
		note = pad
	}
	exec(t, pool, `INSERT INTO events SELECT i, CASE WHEN i % 10 = 0 THEN 'open' ELSE 'terminal' END,
		$1::timestamptz - interval '40 days' + i * interval '1 minute', `+note+` FROM generate_series(1, 1000) i`, at)
	exec(t, pool, `INSERT INTO deliveries (event_id) SELECT i FROM generate_series(1, 1000) i, generate_series(1, i % 4)`)
	exec(t, pool, `INSERT INTO receipts (event_id) SELECT i FROM generate_series(1, 1000) i, generate_series(1, i % 3)`)
}

// familyOracle is what seedFamilies' terminal events are: how many, and their deliveries and
// receipts.
func familyOracle() (eligible, deliveries, receipts int64) {
	for i := int64(1); i <= 1000; i++ {
		if i%10 != 0 {
			eligible, deliveries, receipts = eligible+1, deliveries+i%4, receipts+i%3
		}
	}
	return eligible, deliveries, receipts
}

// checkFamilies fails t unless no half set is left after tick: every event left has all
// its children, and no delivery lost its event.
func checkFamilies(t *testing.T, pool *pgxpool.Pool, tick int) {
	t.Helper()
	if n := count(t, pool, `SELECT count(*) FROM events e WHERE (SELECT count(*) FROM deliveries d WHERE d.event_id = e.id) <> e.id % 4
		OR (SELECT count(*) FROM receipts r WHERE r.event_id = e.id) <> e.id % 3`); n != 0 {
		t.Fatalf("tick %d: %d events lost some of their children", tick, n)
	}
	if n := count(t, pool, `SELECT count(*) FROM deliveries d WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = d.event_id)`); n != 0 {
		t.Fatalf("tick %d: %d deliveries lost their event", tick, n)
	}
}

// TestDeleteWith checks children deleted in the same statement as their parents under NO ACTION
// and RESTRICT foreign keys: a tick stopped by its row cap leaves no half set, the dry run counts
// parents and children, and the check refuses a foreign key that nothing covers.
func TestDeleteWith(t *testing.T) {
	t.Parallel()
	const schema, both = familySchema, familyBoth
	family := familyPolicy

	t.Run("a capped tick leaves no half set", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, schema)
		at := dbNow(t, pool)
		seedFamilies(t, pool, at, false)
		pol := load(t, family(both+"        max_rows: 250\n"))
		if warnings, err := check.Policy(ctx, pool, pol); err != nil || len(warnings) > 0 {
			t.Fatalf("check: %q %v", warnings, err)
		}
		eligible, deliveries, receipts := familyOracle()
		r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: fixed(settings(), 100), AsOf: fixedAsOf(at)})
		dr, err := r.DryRun(ctx, "events")
		if err != nil {
			t.Fatal(err)
		}
		wantChildren := []wire.ChildRows{{Table: "deliveries", Column: "event_id", Rows: deliveries}, {Table: "receipts", Column: "event_id", Rows: receipts}}
		if p := dr.Passes[0]; p.Eligible == nil || *p.Eligible != eligible || !slices.Equal(p.Children, wantChildren) {
			t.Fatalf("dry run: eligible %v, children %+v; want %d, %+v", p.Eligible, p.Children, eligible, wantChildren)
		}
		var deleted, gotDeliveries, gotReceipts int64
		for tick := 1; ; tick++ {
			res := run(t, r, "events")
			p := res.Passes[0]
			if res.Error != nil {
				t.Fatalf("tick %d: %+v", tick, res.Error)
			}
			deleted += p.Deleted
			gotDeliveries += p.Children[0].Rows
			gotReceipts += p.Children[1].Rows
			checkFamilies(t, pool, tick)
			if p.Deleted == 250 {
				if p.StopReason != wire.StopBatchCap || !res.Truncated || p.BatchCount != 3 {
					t.Fatalf("tick %d: %+v; want batch-cap after 100+100+50", tick, p)
				}
				continue
			}
			if p.StopReason != wire.StopExhausted {
				t.Fatalf("tick %d: %+v", tick, p)
			}
			break
		}
		if deleted != eligible || gotDeliveries != deliveries || gotReceipts != receipts {
			t.Errorf("deleted %d events, %d deliveries, %d receipts; want %d, %d, %d", deleted, gotDeliveries, gotReceipts, eligible, deliveries, receipts)
		}
		if n := count(t, pool, `SELECT count(*) FROM events WHERE state = 'open'`); n != 100 {
			t.Errorf("%d open events left, want 100", n)
		}
	})

	// Mutant: the children keyed on the rows picked (or on the predicate) rather than on the rows
	// the delete removed.
	t.Run("a parent a concurrent change keeps, keeps its children", func(t *testing.T) {
		t.Parallel()
		pool, u := poolAndURL(t)
		exec(t, pool, schema)
		at := dbNow(t, pool)
		exec(t, pool, `INSERT INTO events VALUES (1, 'terminal', $1::timestamptz - interval '40 days'), (2, 'terminal', $1::timestamptz - interval '40 days')`, at)
		exec(t, pool, `INSERT INTO deliveries (event_id) VALUES (1), (1), (2)`)
		pol := load(t, family(both+"        mode: single\n"))
		r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings(), AsOf: fixedAsOf(at)})
		worker, pid := begin(t, u)
		if _, err := worker.Exec(ctx, `UPDATE events SET state = 'reopened' WHERE id = 1`); err != nil {
			t.Fatal(err)
		}
		done := make(chan *wire.Result, 1)
		go func() {
			res, err := r.Run(ctx, "events", sweep.Options{})
			if err != nil {
				res = &wire.Result{Error: &wire.ErrorInfo{Message: err.Error()}}
			}
			done <- res
		}()
		waitBlockedBy(t, pool, pid)
		if err := worker.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		res := <-done
		if res.Deleted != 1 || res.Passes[0].Children[0].Rows != 1 || res.Error != nil {
			t.Fatalf("run: %+v (children %+v), want event 2 and its delivery", res, res.Passes[0].Children)
		}
		if n := count(t, pool, `SELECT count(*) FROM deliveries WHERE event_id = 1`); n != 2 {
			t.Fatalf("the reopened event has %d of its 2 deliveries", n)
		}
	})
}

// TestExpiry checks expiry: true: the age column is when a row expires, the retention the grace
// after it, zero included.
func TestExpiry(t *testing.T) {
	t.Parallel()
	for _, grace := range []time.Duration{0, time.Hour} {
		t.Run(policy.FormatRetention(grace), func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			exec(t, pool, `CREATE TABLE tokens (id int, expires_at timestamptz NOT NULL)`)
			exec(t, pool, `CREATE INDEX ON tokens (expires_at)`)
			at := dbNow(t, pool)
			offsets := []time.Duration{-2 * time.Hour, -time.Hour - time.Second, -time.Hour, -time.Minute, -time.Second, -time.Microsecond, 0, time.Microsecond, time.Hour}
			var want []int64
			for i, d := range offsets {
				exec(t, pool, `INSERT INTO tokens VALUES ($1, $2)`, i, at.Add(d))
				// The oracle: a token goes once it expired more than grace ago.
				if at.Add(d).Before(at.Add(-grace)) {
					want = append(want, int64(i))
				}
			}
			pol := load(t, fmt.Sprintf(`sweeps:
  - name: tokens
    passes:
      - name: expired
        table: tokens
        age_column: expires_at
        expiry: true
        retention: %s
`, map[time.Duration]string{0: "0s", time.Hour: "1h"}[grace]))
			if _, err := check.Policy(ctx, pool, pol); err != nil {
				t.Fatal(err)
			}
			r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings(), AsOf: fixedAsOf(at)})
			if dr, err := r.DryRun(ctx, "tokens"); err != nil || *dr.Passes[0].Eligible != int64(len(want)) {
				t.Fatalf("dry run: %+v %v, want %d eligible", dr, err, len(want))
			}
			run(t, r, "tokens")
			gone := ids(t, pool, `SELECT i FROM generate_series(0, $1) i WHERE NOT EXISTS (SELECT 1 FROM tokens WHERE id = i) ORDER BY i`, len(offsets)-1)
			if !slices.Equal(gone, want) {
				t.Fatalf("deleted tokens %v, want %v (offsets %v)", gone, want, offsets)
			}
		})
	}
	t.Run("refusals", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ extra, want string }{
			{"        retention: 0s\n", `p.yaml:7: pass "p" of sweep "s": retention 0 is below the floor of 1h: a zero window makes every row eligible and would delete live data (if age_column holds when each row expires, say expiry: true, and retention is the grace after it)`},
			{"        retention: -1h\n        expiry: true\n", `p.yaml:7: pass "p" of sweep "s": retention -1h is negative: with expiry: true the retention is the grace after each row's expiry`},
			{"        retention: 0s\n        expiry: true\n        allow_short_retention: true\n", `p.yaml:9: pass "p" of sweep "s": allow_short_retention has no effect with expiry: true`},
		} {
			_, err := policy.Load("p.yaml", []byte("sweeps:\n  - name: s\n    passes:\n      - name: p\n        table: x\n        age_column: at\n"+tc.extra))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: err = %v\nwant %s", tc.extra, err, tc.want)
			}
		}
	})
}

// TestTimeZones checks date and timestamp-without-time-zone age columns read in the pass's
// time_zone, in the run and the dry run alike, with the database on UTC+14 and on
// America/Los_Angeles at hours when their calendars and UTC's differ, across daylight-saving
// changes too.
func TestTimeZones(t *testing.T) {
	t.Parallel()
	type tick struct {
		name string
		ref  time.Time
	}
	for _, db := range []struct {
		zone  string
		ticks []tick
	}{
		// 12:00 UTC on 15 January is 02:00 on 16 January in Kiritimati.
		{"Pacific/Kiritimati", []tick{{"16 January in Kiritimati, 15th in UTC", time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)}}},
		{"America/Los_Angeles", []tick{
			// 17:00 on 14 January in Los Angeles is 01:00 on the 15th in UTC.
			{"14 January in Los Angeles, 15th in UTC", time.Date(2026, 1, 15, 1, 0, 0, 0, time.UTC)},
			// 23:30 on 1 November, a 25-hour day: 24 hours back is still 1 November.
			{"the end of the day clocks fall back", time.Date(2026, 11, 2, 7, 30, 0, 0, time.UTC)},
			// 00:30 on 9 March, the day after a 23-hour day.
			{"the day after clocks spring forward", time.Date(2026, 3, 9, 7, 30, 0, 0, time.UTC)},
		}},
	} {
		t.Run(db.zone, func(t *testing.T) {
			t.Parallel()
			dbLoc, err := time.LoadLocation(db.zone)
			if err != nil {
				t.Fatal(err)
			}
			pool := poolWith(t, dbtest.URL(t), map[string]string{"timezone": db.zone})
			exec(t, pool, `CREATE TABLE days (d date NOT NULL); CREATE INDEX ON days (d);
				CREATE TABLE stamps (at timestamp NOT NULL); CREATE INDEX ON stamps (at)`)
			for _, tk := range db.ticks {
				for _, zone := range []string{"UTC", "database", db.zone, "Asia/Tokyo"} {
					for _, retention := range []string{"1d", "36h"} {
						t.Run(fmt.Sprintf("%s/%s/%s", tk.name, zone, retention), func(t *testing.T) {
							checkZone(t, pool, dbLoc, tk.ref, zone, retention)
						})
					}
				}
			}
		})
	}
	t.Run("a quote in a zone is refused at load", func(t *testing.T) {
		t.Parallel()
		if _, err := policy.Load("p.yaml", []byte(policyYAML(passYAML("x", "d", "time_zone: \"Europe/Paris'\"")))); err == nil ||
			!strings.Contains(err.Error(), `time_zone "Europe/Paris'" is no zone name`) {
			t.Errorf("a quote in a zone: %v", err)
		}
	})
}

// checkZone seeds days and stamps around ref, runs a dry run and a run of two passes in zone with
// the given retention, and compares both with the oracle: a naive value is read on zone's wall
// clock, the cutoff is the reference time's wall clock there minus the retention, and a date goes
// when it is before that cutoff's date.
func checkZone(t *testing.T, pool *pgxpool.Pool, dbLoc *time.Location, ref time.Time, zone, retention string) {
	t.Helper()
	exec(t, pool, `TRUNCATE days, stamps`)
	loc := dbLoc
	switch zone {
	case "UTC":
		loc = time.UTC
	case "database":
	default:
		var err error
		if loc, err = time.LoadLocation(zone); err != nil {
			t.Fatal(err)
		}
	}
	r := map[string]time.Duration{"1d": 24 * time.Hour, "36h": 36 * time.Hour}[retention]
	wall := func(at time.Time) time.Time {
		w := at.In(loc)
		return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), time.UTC)
	}
	naiveCutoff := wall(ref).Add(-r)
	dateCutoff := time.Date(naiveCutoff.Year(), naiveCutoff.Month(), naiveCutoff.Day(), 0, 0, 0, 0, time.UTC)
	today := wall(ref).Truncate(24 * time.Hour)

	var wantDays, wantStamps int64
	for d := today.AddDate(0, 0, -6); !d.After(today.AddDate(0, 0, 2)); d = d.AddDate(0, 0, 1) {
		exec(t, pool, `INSERT INTO days VALUES ($1::date)`, d.Format(time.DateOnly))
		if d.Before(dateCutoff) {
			wantDays++
		}
	}
	for s := today.AddDate(0, 0, -4); s.Before(today.AddDate(0, 0, 2)); s = s.Add(15 * time.Minute) {
		exec(t, pool, `INSERT INTO stamps VALUES ($1::timestamp)`, s.Format("2006-01-02 15:04:05"))
		if s.Before(naiveCutoff) {
			wantStamps++
		}
	}
	pol := load(t, fmt.Sprintf(`sweeps:
  - name: calendar
    passes:
      - name: days
        table: days
        age_column: d
        time_zone: %[1]s
        retention: %[2]s
      - name: stamps
        table: stamps
        age_column: at
        time_zone: %[1]s
        retention: %[2]s
`, zone, retention))
	if warnings, err := check.Policy(ctx, pool, pol); err != nil || len(warnings) > 0 {
		t.Fatalf("check: %q %v", warnings, err)
	}
	rn := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings(), AsOf: fixedAsOf(ref)})
	dr, err := rn.DryRun(ctx, "calendar")
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, rn, "calendar")
	for i, want := range []int64{wantDays, wantStamps} {
		if e := dr.Passes[i].Eligible; e == nil || *e != want || !dr.Passes[i].Indexed {
			t.Errorf("dry run %s: eligible %v, indexed %t; want %d", dr.Passes[i].Pass, e, dr.Passes[i].Indexed, want)
		}
		if got := res.Passes[i].Deleted; got != want {
			t.Errorf("run %s: deleted %d, want %d (cutoff %s, date cutoff %s)", res.Passes[i].Pass, got, want, naiveCutoff, dateCutoff.Format(time.DateOnly))
		}
	}
	if zone != "database" || retention != "1d" {
		return
	}
	// The rule as the issue writes it: today and yesterday, on the database's clock, are always
	// kept; the day before yesterday is gone.
	local := ref.In(dbLoc)
	for back, kept := range []bool{true, true, false} {
		d := time.Date(local.Year(), local.Month(), local.Day()-back, 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
		if n := count(t, pool, `SELECT count(*) FROM days WHERE d = $1::date`, d); (n == 1) != kept {
			t.Errorf("%s (%d days back on the database's calendar): kept %t, want %t", d, back, n == 1, kept)
		}
	}
}

// TestMaxRows checks that max_rows caps a pass's rows per run exactly, whatever size adaptive
// sizing has reached: the last batch shrinks to the remainder.
func TestMaxRows(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	at := dbNow(t, pool)
	seedNotifications(t, pool, at, 1000, 10)
	s := settings()
	s.BatchSize, s.MinBatchSize, s.BatchTarget = 100, 100, time.Hour // every batch doubles the next
	capped := spec(t, "notifications")
	capped.Passes[0].MaxRows = 750
	r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{capped}, Settings: s, AsOf: fixedAsOf(at)})
	res := run(t, r, "notifications")
	// 100 + 200 + 400, then 50 where adaptive sizing would ask for 800.
	if p := res.Passes[0]; p.Deleted != 750 || p.BatchCount != 4 || p.StopReason != wire.StopBatchCap || !res.Truncated {
		t.Fatalf("first run: %+v truncated %t; want 750 rows in 4 batches, batch-cap", p, res.Truncated)
	}
	res = run(t, r, "notifications")
	if p := res.Passes[0]; p.Deleted != 250 || p.StopReason != wire.StopExhausted {
		t.Fatalf("second run: %+v; want the 250 left, exhausted", p)
	}
	if old, fresh := remaining(t, pool); old != 0 || fresh != 10 {
		t.Fatalf("left %d old and %d fresh, want 0 and 10", old, fresh)
	}
	for _, tc := range []struct{ extra, want string }{
		{"        max_rows: 0\n", `p.yaml:8: pass "read" of sweep "notes": max_rows 0 must be at least 1`},
		{"        mode: single\n        max_rows: 10\n", `p.yaml:9: pass "read" of sweep "notes": max_rows has no effect in mode single`},
		{"        max_rows: \"10\"\n", `p.yaml:8: pass "read" of sweep "notes": max_rows is a string ("10"): want a whole number`},
	} {
		_, err := policy.Load("p.yaml", []byte("sweeps:\n  - name: notes\n    passes:\n      - name: read\n        table: notifications\n        age_column: read_at\n        retention: 30d\n"+tc.extra))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v\nwant %s", err, tc.want)
		}
	}
}
