package sweep_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestLedgerExample keeps docs/POLICY.md's worked ledger example true: on its schema, with the
// database on UTC+14, its policy passes the check, the verdict is the same on an empty database,
// after ANALYZE of a full one and after a sweep, and the runs delete exactly what the rules the
// example states say, checked against an oracle that reads every row back into Go.
func TestLedgerExample(t *testing.T) {
	t.Parallel()
	var sql, policyText string
	for _, b := range policyDoc(t, "A worked ledger example") {
		switch b.lang {
		case "sql":
			sql = b.text
		case "yaml":
			policyText = b.text
		}
	}
	if sql == "" || policyText == "" {
		t.Fatal("the ledger example has no sql or yaml block")
	}
	const zone = "Pacific/Kiritimati"
	pool := poolWith(t, dbtest.URL(t), map[string]string{"timezone": zone})
	runDocSQL(t, pool, sql, true)
	pol, err := policy.Load("ledger.yaml", []byte(policyText))
	if err != nil {
		t.Fatal(err)
	}
	at := dbNow(t, pool)
	r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings(), AsOf: fixedAsOf(at)})
	verdict := func(t *testing.T) string {
		t.Helper()
		warnings, err := check.Policy(ctx, pool, pol)
		var b strings.Builder
		fmt.Fprintf(&b, "check: %q %v\n", warnings, err)
		for _, s := range pol.Specs {
			dr, err := r.DryRun(ctx, s.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range dr.Passes {
				fmt.Fprintf(&b, "%s/%s indexed=%t\n", s.Name, p.Pass, p.Indexed)
			}
		}
		return b.String()
	}
	empty := verdict(t)
	if !strings.HasPrefix(empty, "check: [] <nil>\n") || strings.Contains(empty, "indexed=false") {
		t.Fatalf("on the empty schema:\n%s", empty)
	}

	seedLedger(t, pool, at, zone)
	// ANALYZE samples rows: each pass gets fresh statistics, and the verdict must not move.
	for i := range 5 {
		exec(t, pool, "ANALYZE")
		if got := verdict(t); got != empty {
			t.Errorf("after ANALYZE %d:\n%s\nwant as on the empty schema:\n%s", i+1, got, empty)
		}
	}
	want := ledgerOracle(t, pool, at, zone)
	t.Logf("oracle: %d of %d operations with %d of %d attempts, %d of %d day counters, %d of %d audit rows",
		len(want.operations), want.allOperations, want.attempts, want.allAttempts, len(want.days), want.allDays, len(want.audit), want.allAudit)

	dr, err := r.DryRun(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	ops := dr.Passes[0]
	if ops.Eligible == nil || *ops.Eligible != int64(len(want.operations)) || len(ops.Children) != 1 || ops.Children[0].Rows != want.attempts {
		t.Errorf("dry run operations: eligible %v, children %+v; want %d and %d attempts", ops.Eligible, ops.Children, len(want.operations), want.attempts)
	}
	res := run(t, r, "ledger")
	if res.StopReason != wire.StopExhausted || res.Passes[0].Children[0].Rows != want.attempts {
		t.Errorf("ledger run: %+v (children %+v, error %+v)", res, res.Passes[0].Children, res.Error)
	}
	if res := run(t, r, "audit"); res.StopReason != wire.StopExhausted {
		t.Errorf("audit run: %+v", res)
	}
	for _, c := range []struct {
		what      string
		sql       string
		gone      []int64
		remaining int
	}{
		{"operations", `SELECT id FROM ledger.operations ORDER BY id`, want.operations, want.allOperations},
		{"day counters", `SELECT (day - date '2000-01-01')::bigint FROM ledger.day_counters ORDER BY 1`, want.days, want.allDays},
		{"audit rows", `SELECT id FROM ledger.audit ORDER BY id`, want.audit, want.allAudit},
	} {
		left := ids(t, pool, c.sql)
		if len(left) != c.remaining-len(c.gone) {
			t.Errorf("%s: %d left, want %d", c.what, len(left), c.remaining-len(c.gone))
		}
		for _, id := range c.gone {
			if slices.Contains(left, id) {
				t.Errorf("%s: %d should have gone", c.what, id)
				break
			}
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM ledger.attempts`); n != want.allAttempts-want.attempts {
		t.Errorf("%d attempts left, want %d", n, want.allAttempts-want.attempts)
	}
	exec(t, pool, "ANALYZE")
	if got := verdict(t); got != empty {
		t.Errorf("after a sweep:\n%s\nwant as on the empty schema:\n%s", got, empty)
	}

	t.Run("the jobs guard's index", func(t *testing.T) {
		exec(t, pool, `DROP INDEX ledger.jobs_runnable`)
		_, err := check.Policy(ctx, pool, pol)
		if err == nil || !strings.HasSuffix(err.Error(), "CREATE INDEX CONCURRENTLY ON ledger.jobs (operation_id) WHERE state = 'runnable';") {
			t.Fatalf("without jobs_runnable: %v", err)
		}
	})
	t.Run("the attempts' foreign key", func(t *testing.T) {
		bare, err := policy.Load("ledger.yaml", []byte(strings.Replace(policyText,
			"        delete_with:\n          - table: ledger.attempts\n            column: operation_id\n", "", 1)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = check.Policy(ctx, pool, bare)
		if err == nil || !strings.Contains(err.Error(), "foreign key attempts_operation_id_fkey") {
			t.Fatalf("without delete_with: %v", err)
		}
	})
}

// seedLedger writes some 20,000 operations with their attempts, jobs and messages, counters for
// twelve days around today on the database's calendar, and audit rows around their expiry.
func seedLedger(t *testing.T, pool *pgxpool.Pool, at time.Time, zone string) {
	t.Helper()
	exec(t, pool, `INSERT INTO ledger.accounts SELECT i FROM generate_series(1, 50) i`)
	exec(t, pool, `INSERT INTO ledger.messages SELECT i, CASE WHEN i % 10 = 0 THEN 'sending' WHEN i % 10 = 1 THEN 'queued' ELSE 'sent' END
		FROM generate_series(1, 20000) i`)
	// Expiries spread over 0 to 59 days back, a minute either side of whole days.
	exec(t, pool, `INSERT INTO ledger.operations SELECT i, i, $1::timestamptz - (i % 60) * interval '1 day' + (i % 3 - 1) * interval '1 minute'
		FROM generate_series(1, 20000) i`, at)
	exec(t, pool, `INSERT INTO ledger.attempts
		SELECT o.id, o.id, (ARRAY['reserved', 'authorized', 'captured', 'captured', 'voided', 'captured', 'voided'])[o.id % 7 + 1],
		       o.expires_at + (o.id % 13) * interval '1 day'
		FROM ledger.operations o`)
	exec(t, pool, `INSERT INTO ledger.attempts
		SELECT 100000 + o.id, o.id, 'voided', o.expires_at FROM ledger.operations o WHERE o.id % 3 = 0`)
	exec(t, pool, `INSERT INTO ledger.jobs SELECT i, i, CASE WHEN i % 11 = 0 THEN 'runnable' ELSE 'done' END
		FROM generate_series(1, 20000) i WHERE i % 11 IN (0, 1)`)
	exec(t, pool, `INSERT INTO ledger.day_counters (day) SELECT ($1::timestamptz AT TIME ZONE $2)::date + i FROM generate_series(-10, 1) i`, at, zone)
	exec(t, pool, `INSERT INTO ledger.audit SELECT i, i % 100, CASE WHEN i % 4 = 0 THEN 'abuse-pause' ELSE 'login' END,
		$1::timestamptz + (i % 21 - 10) * interval '1 hour' + (i % 2) * interval '1 microsecond'
		FROM generate_series(1, 2000) i`, at)
}

type ledgerWant struct {
	operations, days, audit          []int64
	attempts, allAttempts            int64
	allOperations, allDays, allAudit int
}

// ledgerOracle reads every row back and applies the example's rules in Go.
func ledgerOracle(t *testing.T, pool *pgxpool.Pool, at time.Time, zone string) ledgerWant {
	t.Helper()
	var w ledgerWant
	cutoff := at.Add(-30 * 24 * time.Hour)
	type op struct {
		id           int64
		expires      time.Time
		messageState string
	}
	rows, _ := pool.Query(ctx, `SELECT o.id, o.expires_at, m.state FROM ledger.operations o JOIN ledger.messages m ON m.id = o.message_id`)
	ops, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (op, error) {
		var o op
		err := r.Scan(&o.id, &o.expires, &o.messageState)
		return o, err
	})
	if err != nil {
		t.Fatal(err)
	}
	held := map[int64]bool{}
	attemptsOf := map[int64]int64{}
	var opID int64
	var state string
	var expires time.Time
	rows, _ = pool.Query(ctx, `SELECT operation_id, state, expires_at FROM ledger.attempts`)
	if _, err := pgx.ForEachRow(rows, []any{&opID, &state, &expires}, func() error {
		w.allAttempts++
		attemptsOf[opID]++
		if state == "reserved" || state == "authorized" || !expires.Before(cutoff) {
			held[opID] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rows, _ = pool.Query(ctx, `SELECT operation_id, state FROM ledger.jobs WHERE operation_id IS NOT NULL`)
	if _, err := pgx.ForEachRow(rows, []any{&opID, &state}, func() error {
		if state == "runnable" {
			held[opID] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.allOperations = len(ops)
	for _, o := range ops {
		if o.expires.Before(cutoff) && !held[o.id] && o.messageState != "queued" && o.messageState != "sending" {
			w.operations = append(w.operations, o.id)
			w.attempts += attemptsOf[o.id]
		}
	}

	// Day counters: the day and the next closed on the database's calendar.
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	local := at.In(loc)
	today := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
	epoch := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range ids(t, pool, `SELECT (day - date '2000-01-01')::bigint FROM ledger.day_counters`) {
		w.allDays++
		if !epoch.AddDate(0, 0, int(d)+2).After(today) { // D goes on D+2
			w.days = append(w.days, d)
		}
	}

	// Audit: at the stamped expiry, but an abuse pause stays while its account exists.
	var id, account int64
	var class string
	rows, _ = pool.Query(ctx, `SELECT id, account_id, class, expires_at FROM ledger.audit`)
	if _, err := pgx.ForEachRow(rows, []any{&id, &account, &class, &expires}, func() error {
		w.allAudit++
		if expires.Before(at) && (class != "abuse-pause" || account < 1 || account > 50) {
			w.audit = append(w.audit, id)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return w
}
