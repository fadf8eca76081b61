package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/demo"
)

// The partitions run: retention by dropping whole partitions. One table, `events`,
// -rows rows spread evenly over 100 daily partitions (UTC days) that end at
// today's UTC midnight, managed by pg_partman (premade partitions ahead, its retention off in the
// template); with a 30-day retention, 70 partitions lie wholly past the cutoff and one straddles
// it. Every contestant gets a fresh copy, no foreground, and must leave exactly what an oracle
// counted on the template: the bench fails otherwise.
const (
	partTable     = "events"
	partDays      = 100
	partRetention = 30 * 24 * time.Hour
	// partExpired is how many partitions a 30-day cutoff expires whole, at any time of the day
	// the template was made on: partition i's upper bound is today - 99 + i days, and the cutoff
	// is today - 30 days plus the hours since midnight.
	partExpired = 70
	// partPremake is pg_partman's premake: the empty partitions it keeps ahead of today.
	partPremake = 4
	// partMinRows keeps at least one row a day, so every partition has something to drop.
	partMinRows = 10_000
	// targetPartitions bounds the time the rail may take to drop the expired partitions.
	targetPartitions = 2 * time.Second
)

// partPolicy is the policy the rail contestants are served: one sweep per way of deleting the
// same expired rows, each run alone with `sweepcron --only <sweep>`.
const partPolicy = `# Written by cmd/sweepbench for its partitions run.
sweeps:
  - name: events-partitions
    passes:
      - name: expired
        table: events
        age_column: at
        retention: 30d
        mode: partitions
  - name: events-keep
    passes:
      - name: expired
        table: events
        age_column: at
        retention: 30d
        mode: partitions
        boundary: keep
`

// leaseLogSQL records every run's reference time in the contestant's copy. The runner takes the
// lease's locked_at (the database's now() when the run took it) as the reference its cutoffs are
// computed from; a trigger on the lease table keeps it, so that the oracle uses the run's exact
// cutoff rather than a window around it.
const leaseLogSQL = `
CREATE TABLE public.sweepbench_runs (label text NOT NULL, locked_at timestamptz NOT NULL);
CREATE FUNCTION public.sweepbench_log_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.sweepbench_runs (label, locked_at) VALUES (NEW.label, NEW.locked_at);
  RETURN NULL;
END $$;
CREATE TRIGGER sweepbench_log_run AFTER INSERT OR UPDATE ON sweeprail.sweep_lock
  FOR EACH ROW EXECUTE FUNCTION public.sweepbench_log_run()`

// partTemplate is the seeded template of the partitions run.
type partTemplate struct {
	name string
	rows int64
	// start is the lower bound of the oldest partition, end the upper bound of the newest
	// seeded one (today's UTC midnight when it was made).
	start, end time.Time
	// partitions counts the partitions, partman's premade ones included.
	partitions int
	// hasDefault: pg_partman made a default partition, so the server refuses DETACH …
	// CONCURRENTLY and the rail detaches plainly, under the lock timeout.
	hasDefault bool
}

// partStats is what the exactness check found of one contestant on its copy.
type partStats struct {
	// cutoff is the one the contestant applied: its run's reference minus the retention.
	cutoff time.Time
	// gone is the rows the copy lost, counted; want is the oracle's count of them.
	gone, want int64
	// dropped is the partitions the copy lost (counted in the catalog), wantDropped the oracle's.
	dropped, wantDropped int
	// inexact says how what is left differs from the oracle's; empty when it does not.
	inexact string
}

// partitionsResult is the partitions run.
type partitionsResult struct {
	tpl     partTemplate
	seeded  time.Duration
	partman string
	rounds  rounds
}

// partContestant is a contestant of the partitions run and the rule its oracle follows.
type partContestant struct {
	contestant
	// rule says which rows must be left; drops which partitions must be gone.
	rule, drops partRule
	// cutoff reads the cutoff the contestant applied, after its window.
	cutoff func(ctx context.Context, c *pgx.Conn) (time.Time, error)
}

type partRule int

const (
	// ruleRows: every row older than the cutoff goes, and nothing else.
	ruleRows partRule = iota
	// ruleRail: every partition whose upper bound is at or before the cutoff goes, nothing else.
	ruleRail
	// rulePartman: every partition whose upper bound is before the cutoff goes, nothing else.
	rulePartman
)

// keptFrom is the lower bound, on a table of daily UTC partitions, of the rows rule keeps.
func (r partRule) keptFrom(cutoff time.Time) time.Time {
	day := cutoff.UTC().Truncate(24 * time.Hour)
	switch r {
	case ruleRows:
		return cutoff
	case rulePartman:
		if day.Equal(cutoff) {
			return day.AddDate(0, 0, -1)
		}
	}
	return day
}

// partitionTemplate builds the partitions run's template: sweeprail's own schema (the rail's
// lease), the seeded table with an index on its age column (what the batched contestant needs,
// and what such a table has), pg_partman managing it, and the lease log.
func (b *bench) partitionTemplate(ctx context.Context, rows int) (partTemplate, error) {
	tpl := partTemplate{name: fmt.Sprintf("sweepbench_parts_%d", rows)}
	conn, err := b.createMigrated(ctx, tpl.name)
	if err != nil {
		return tpl, err
	}
	// The template must have no session when it is copied.
	defer conn.Close(context.WithoutCancel(ctx))
	var avail int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_partman'").Scan(&avail); err != nil {
		return tpl, err
	}
	if avail == 0 {
		return tpl, errors.New("pg_partman is not installed on the bench cluster's server: scripts/pg ensure-ext partman " +
			"(make bench RUNS=partitions runs it)")
	}
	var now time.Time
	if err := conn.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return tpl, err
	}
	tpl.end = now.UTC().Truncate(24 * time.Hour)
	tpl.start = tpl.end.AddDate(0, 0, -partDays)
	b.logf("seeding %s: %d rows over %d daily partitions", tpl.name, rows, partDays)
	if err := demo.SeedPartitioned(ctx, conn, demo.Partitioned{Table: partTable, Rows: rows, Days: partDays, End: tpl.end}); err != nil {
		return tpl, err
	}
	b.logf("%s: index on at, pg_partman, vacuum analyze", tpl.name)
	steps := []string{
		"CREATE INDEX ON " + partTable + " (at)",
		"CREATE SCHEMA partman",
		"CREATE EXTENSION pg_partman SCHEMA partman",
	}
	// pg_partman adopts a set whose partitions carry its names (<table>_p<YYYY_MM_DD> for
	// daily ones): create_parent then finds them made and only records the set.
	for i := range partDays {
		day := tpl.start.AddDate(0, 0, i)
		steps = append(steps, fmt.Sprintf("ALTER TABLE %s RENAME TO %s", quoteIdent(fmt.Sprintf("%s_d%d", partTable, i)),
			quoteIdent(partTable+"_p"+day.Format("2006_01_02"))))
	}
	steps = append(steps,
		fmt.Sprintf(`SELECT partman.create_parent(p_parent_table := 'public.%s', p_control := 'at', p_type := 'native',
			p_interval := 'daily', p_premake := %d, p_start_partition := '%s')`, partTable, partPremake, tpl.start.Format("2006-01-02")),
		// Its maintenance premakes the partitions ahead now, so that the timed one only drops.
		"SELECT partman.run_maintenance('public."+partTable+"')",
		leaseLogSQL,
	)
	for _, sql := range steps {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return tpl, fmt.Errorf("%s: %w", firstLine(sql), err)
		}
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+partTable); err != nil {
		return tpl, fmt.Errorf("vacuum analyze: %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+partTable).Scan(&tpl.rows); err != nil {
		return tpl, err
	}
	if err := conn.QueryRow(ctx, partitionCountSQL).Scan(&tpl.partitions); err != nil {
		return tpl, err
	}
	if err := conn.QueryRow(ctx, `SELECT partdefid <> 0 FROM pg_partitioned_table
		WHERE partrelid = 'public.`+partTable+`'::regclass`).Scan(&tpl.hasDefault); err != nil {
		return tpl, err
	}
	if tpl.rows != int64(rows) || tpl.partitions < partDays {
		return tpl, fmt.Errorf("%s holds %d rows in %d partitions, want %d in at least %d", tpl.name, tpl.rows, tpl.partitions, rows, partDays)
	}
	b.logf("%s: %d rows, %d partitions (%d made by pg_partman; a default one: %v)", tpl.name, tpl.rows, tpl.partitions, tpl.partitions-partDays, tpl.hasDefault)
	return tpl, nil
}

const partitionCountSQL = `SELECT count(*) FROM pg_inherits WHERE inhparent = 'public.` + partTable + `'::regclass`

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i] + " …"
		}
	}
	return s
}

// railCutoff is the cutoff of the last run of the rail on the copy: its reference time, from the
// lease log, minus the retention. The last run is the one that found nothing more to do.
func railCutoff(ctx context.Context, c *pgx.Conn) (time.Time, error) {
	var ref *time.Time
	if err := c.QueryRow(ctx, "SELECT max(locked_at) FROM public.sweepbench_runs").Scan(&ref); err != nil {
		return time.Time{}, fmt.Errorf("read the runs' reference times: %w", err)
	}
	if ref == nil {
		return time.Time{}, errors.New("the lease log is empty: no run of the rail took its lease")
	}
	return ref.Add(-partRetention), nil
}

// partmanSetup turns pg_partman's retention on (30 days, dropping the tables) before the window;
// the window is `SELECT partman.run_maintenance()` in a transaction that also reads its now(),
// the reference pg_partman computes its cutoff from.
func partmanSetup(cutoff *time.Time) setupFunc {
	return func(ctx context.Context, dbURL string) (sweepFunc, func(), error) {
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return nil, nil, err
		}
		if _, err := c.Exec(ctx, `UPDATE partman.part_config SET retention = '30 days', retention_keep_table = false,
			retention_keep_index = false WHERE parent_table = 'public.`+partTable+`'`); err != nil {
			c.Close(context.Background())
			return nil, nil, fmt.Errorf("turn pg_partman's retention on: %w", err)
		}
		run := func(ctx context.Context) (outcome, error) {
			began := time.Now()
			var now time.Time
			err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
				if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "SELECT partman.run_maintenance()")
				return err
			})
			took := time.Since(began)
			if err != nil {
				return outcome{}, fmt.Errorf("partman.run_maintenance(): %w", err)
			}
			*cutoff = now.Add(-partRetention)
			return outcome{elapsed: took, batches: []batch{{took: took}}}, nil
		}
		return run, func() { c.Close(context.Background()) }, nil
	}
}

func (b *bench) partContestants(policyFile string) []partContestant {
	env := []string{"SWEEP_POLICY_FILE=" + policyFile}
	var partmanCutoff time.Time
	return []partContestant{
		{contestant: contestant{key: "P", db: "part_p", name: "the rail, `mode: partitions` (boundary rows by the batched engine)",
			setup: b.railSetup(b.s.binDir, "events-partitions", env)}, rule: ruleRows, drops: ruleRail, cutoff: railCutoff},
		{contestant: contestant{key: "P′", db: "part_keep", name: "the rail, `mode: partitions`, `boundary: keep`",
			setup: b.railSetup(b.s.binDir, "events-keep", env)}, rule: ruleRail, drops: ruleRail, cutoff: railCutoff},
		{contestant: contestant{key: "K", db: "part_k", name: "pg_partman: `run_maintenance()`, retention 30 days",
			setup: partmanSetup(&partmanCutoff)}, rule: rulePartman, drops: rulePartman,
			cutoff: func(context.Context, *pgx.Conn) (time.Time, error) { return partmanCutoff, nil }},
		// No batched contestant: a batched pass on a partitioned table is refused by the policy check
		// (its batches pick rows by ctid, which repeats across partitions; this run caught one batch
		// of 1000 deleting 71000 rows and the pass answering exhausted with 1M eligible rows left).
	}
}

func (b *bench) partitionsRun(ctx context.Context) (partitionsResult, error) {
	var res partitionsResult
	began := time.Now()
	tpl, err := b.partitionTemplate(ctx, b.s.rows)
	if err != nil {
		return res, err
	}
	res.tpl, res.seeded = tpl, time.Since(began)
	dir, err := os.MkdirTemp("", "sweepbench-policy-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	policy := filepath.Join(dir, "partitions.yaml")
	if err := os.WriteFile(policy, []byte(partPolicy), 0o644); err != nil {
		return res, err
	}
	contestants := b.partContestants(policy)
	err = b.addRounds("partitions", time.Now(), roundsBudget, func() bool { return res.rounds.clean() >= b.s.rounds }, func(n int) error {
		rd := round{n: n}
		for _, c := range contestants {
			o, err := b.contest(ctx, fmt.Sprintf("partitions round %d", n), c.contestant, tpl.name, probe{check: b.oracle(c, tpl)}, -1)
			if err != nil {
				return err
			}
			if o.inexact != "" {
				b.logf("partitions round %d: %s: NOT EXACT: %s", n, c.key, o.inexact)
			}
			rd.contestants = append(rd.contestants, o)
		}
		res.rounds = append(res.rounds, rd)
		return nil
	})
	if err != nil {
		return res, err
	}
	if err := b.admin.QueryRow(ctx, "SELECT default_version FROM pg_available_extensions WHERE name = 'pg_partman'").Scan(&res.partman); err != nil {
		return res, err
	}
	if err := b.drop(ctx, tpl.name); err != nil {
		return res, err
	}
	if bad := res.inexact(); len(bad) > 0 {
		return res, fmt.Errorf("%w (the report says where):\n%s", errInexact, strings.Join(bad, "\n"))
	}
	return res, nil
}

// errInexact fails the partitions run after its report is written: a contestant did not leave
// exactly the oracle's rows.
var errInexact = errors.New("the partitions run's exactness check failed")

// oracle checks what c left on its copy against the template: the rows at or after the bound
// c's rule keeps from its cutoff, and the partitions wholly before it. A contestant that does not
// leave exactly those is recorded, not fatal: the run goes on, the report says so in bold, and
// the bench exits non-zero after writing it.
func (b *bench) oracle(c partContestant, tpl partTemplate) func(ctx context.Context, dbURL string, o *outcome) error {
	return func(ctx context.Context, dbURL string, o *outcome) error {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		if o.cutoff, err = c.cutoff(ctx, conn); err != nil {
			return err
		}
		var left int64
		var oldest *time.Time
		var parts int
		if err := conn.QueryRow(ctx, "SELECT count(*), min(at) FROM "+partTable).Scan(&left, &oldest); err != nil {
			return err
		}
		if err := conn.QueryRow(ctx, partitionCountSQL).Scan(&parts); err != nil {
			return err
		}
		from := c.rule.keptFrom(o.cutoff)
		keep, err := b.countFrom(ctx, tpl.name, from)
		if err != nil {
			return err
		}
		o.gone, o.want = tpl.rows-left, tpl.rows-keep
		o.dropped = tpl.partitions - parts
		// The partitions are whole UTC days from tpl.start: those wholly before the bound go.
		o.wantDropped = max(0, int(c.drops.keptFrom(o.cutoff).Sub(tpl.start)/(24*time.Hour)))
		at := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
		switch {
		case left != keep:
			what := fmt.Sprintf("%s too many gone", fmtCount(keep-left))
			if left > keep {
				what = fmt.Sprintf("%s eligible rows left", fmtCount(left-keep))
			}
			o.inexact = fmt.Sprintf("%s rows left, the oracle keeps %s (the rows at or after %s, for the cutoff %s): %s",
				fmtCount(left), fmtCount(keep), at(from), at(o.cutoff), what)
		case oldest != nil && oldest.Before(from):
			o.inexact = fmt.Sprintf("a row of %s is left, before %s, the oldest the oracle keeps", at(*oldest), at(from))
		case o.dropped != o.wantDropped:
			o.inexact = fmt.Sprintf("%d partitions gone, the oracle wants %d (cutoff %s)", o.dropped, o.wantDropped, at(o.cutoff))
		case c.key != "K" && o.partitions != int64(o.dropped):
			o.inexact = fmt.Sprintf("the answers say %d partitions dropped, the catalog %d", o.partitions, o.dropped)
		case c.key != "K" && o.deleted != o.gone-rowsIn(tpl, o.dropped):
			o.inexact = fmt.Sprintf("the answers say %d rows deleted by batches, the table lost %d beyond its dropped partitions", o.deleted, o.gone-rowsIn(tpl, o.dropped))
		}
		return nil
	}
}

// inexact lists every contestant of every round that did not leave exactly the oracle's rows.
func (r partitionsResult) inexact() []string {
	var out []string
	for _, rd := range r.rounds {
		for _, o := range rd.contestants {
			if o.inexact != "" {
				out = append(out, fmt.Sprintf("round %d, %s: %s", rd.n, o.key, o.inexact))
			}
		}
	}
	return out
}

// countFrom counts the template's rows at or after from: the oracle. The template is never
// changed, and no session may stay on it (it is copied), so each count connects and leaves.
func (b *bench) countFrom(ctx context.Context, tpl string, from time.Time) (int64, error) {
	c, err := pgx.Connect(ctx, b.dbURL(tpl))
	if err != nil {
		return 0, err
	}
	defer c.Close(context.Background())
	var n int64
	err = c.QueryRow(ctx, "SELECT count(*) FROM "+partTable+" WHERE at >= $1", from).Scan(&n)
	return n, err
}

// rowsIn is how many rows SeedPartitioned put in the oldest n partitions: an even share each
// (the last one takes the remainder, and is never among the dropped).
func rowsIn(tpl partTemplate, n int) int64 {
	return int64(n) * (tpl.rows / partDays)
}
