package check

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/explain"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

const (
	// checkStatementTimeout bounds each statement of a policy check; checkLockTimeout keeps it
	// from queueing behind a migration's ACCESS EXCLUSIVE lock (EXPLAIN of a DELETE takes the
	// table's ROW EXCLUSIVE lock, as the DELETE would).
	checkStatementTimeout = 10 * time.Second
	checkLockTimeout      = 2 * time.Second
	// checkPlanBatchSize is the LIMIT the batch select is planned with: the default BATCH_SIZE.
	checkPlanBatchSize = 1000
)

// Specs checks specs against the live schema of pool's database; see Policy. Its messages name
// the sweep and pass but no file or line: it is for specs built in Go. For a loaded policy, call
// Policy.
func Specs(ctx context.Context, pool *pgxpool.Pool, specs []policy.Spec) (warnings []string, err error) {
	return Policy(ctx, pool, &policy.Policy{Specs: specs})
}

// Policy validates the policy against the live schema of pool's database, so that a policy that
// cannot run is refused at boot (or in CI, by api policy check) rather than failing its first
// batch. Nothing is executed: statements are only planned, in transactions always rolled back.
// Every refusal is a *policy.Error, all joined in err; warnings (an allow_unindexed pass, a
// trigger) are returned even when err is not nil. An error that is not the policy's (the
// database unreachable) ends the check and is returned alone. See the package doc for the steps.
func Policy(ctx context.Context, pool *pgxpool.Pool, p *policy.Policy) (warnings []string, err error) {
	c := &checker{pol: p, pool: pool, tables: map[string]*tableInfo{}, suggested: map[string][2]string{}}
	if errs := c.static(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var now time.Time
	if err := pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return nil, fmt.Errorf("check policy: read database clock: %w", err)
	}
	var found findings
	for _, s := range policy.Normalize(p.Specs) {
		for _, ps := range s.Passes {
			// The cutoff comes from the database clock, as a run's does; the plan hardly depends
			// on it, but a realistic value keeps the planner's estimates honest.
			f, err := c.pass(ctx, s.Name, ps, now.Add(-ps.Retention))
			if err != nil {
				return nil, fmt.Errorf("check policy: sweep %q pass %q: %w", s.Name, ps.Name, err)
			}
			found.add(f)
		}
	}
	advice, err := c.adviseAgeIndexes(ctx, found.unserved)
	if err != nil {
		return nil, fmt.Errorf("check policy: %w", err)
	}
	found.add(advice)
	return found.warnings, errors.Join(found.problems...)
}

// findings is what a step of the check found, in the order it found it.
type findings struct {
	problems []error
	warnings []string
	// unserved are the passes no index serves, advised together once every pass is checked
	// (adviseAgeIndexes); not refusals yet.
	unserved []ageRefusal
}

// refuse records a refusal.
func (f *findings) refuse(e *policy.Error) { f.problems = append(f.problems, e) }

// warn records a warning.
func (f *findings) warn(e *policy.Error) { f.warnings = append(f.warnings, e.Error()) }

// add appends what g found after what f found.
func (f *findings) add(g findings) {
	f.problems = append(f.problems, g.problems...)
	f.warnings = append(f.warnings, g.warnings...)
	f.unserved = append(f.unserved, g.unserved...)
}

// refused reports whether f holds a refusal; warnings and unserved passes are none.
func (f findings) refused() bool { return len(f.problems) > 0 }

// checker is one run of the check: the policy, the database, and what every pass shares.
type checker struct {
	pol    *policy.Policy
	pool   *pgxpool.Pool
	tables map[string]*tableInfo
	// suggested maps each lookup index suggested so far to the sweep and pass it was suggested
	// for, so that a later pass needing the same index names it instead.
	suggested map[string][2]string
}

// tableInfo is what the check knows of one table name.
type tableInfo struct {
	// problem says why the name is no table that can be swept ("does not exist …"); "" when it is.
	problem string
	oid     uint32
	columns []columnInfo
	// partitioned: a partitioned table (relkind p), whose rows' ctids repeat across partitions.
	partitioned bool
}

type columnInfo struct {
	name, typ string
	// temporal: a timestamp, timestamptz or date (or a domain over one), comparable with the cutoff.
	temporal bool
	// numeric: an integer or numeric type (or a domain over one), which can hold Unix time.
	numeric bool
	// kind is how the column compares with the cutoff, when temporal.
	kind statement.Kind
}

func (t *tableInfo) column(name string) (columnInfo, bool) {
	for _, c := range t.columns {
		if c.name == name {
			return c, true
		}
	}
	return columnInfo{}, false
}

// columnNames are the table's columns' names, in order.
func (t *tableInfo) columnNames() []string {
	names := make([]string, len(t.columns))
	for i, c := range t.columns {
		names[i] = c.name
	}
	return names
}

func (t *tableInfo) columnList() string { return strings.Join(t.columnNames(), ", ") }

func (c *checker) problem(sweep, pass, field, format string, args ...any) *policy.Error {
	return &policy.Error{File: c.pol.File, Line: c.pol.Line(sweep, pass, field), Sweep: sweep, Pass: pass, Err: fmt.Errorf(format, args...)}
}

// static runs the checks that need no database and that what follows relies on: Validate's,
// which holds the shape of names and of each where condition, which must hold before any of it is
// sent to the server. A loaded policy passed them all already; specs built in Go may not have.
func (c *checker) static() []error {
	return c.pol.Problems()
}

// pass checks one pass and returns what it found; the error it returns is the database's. The
// catalog comes first: what is missing from it would only make every statement fail to compile.
// The references between tables are then checked whatever the later steps find (a foreign key
// that would fail the delete is worth saying alongside a missing index); each later step runs
// only when the one before refused nothing, since a statement that does not compile has no plan.
func (c *checker) pass(ctx context.Context, sweep string, p policy.Pass, cutoff time.Time) (findings, error) {
	found, err := c.catalog(ctx, sweep, p)
	if err != nil || found.refused() {
		return found, err
	}
	for _, step := range []func() (findings, error){
		func() (findings, error) { return c.foreignKeys(ctx, sweep, p) },
		func() (findings, error) { return c.deleteWith(ctx, sweep, p) },
		func() (findings, error) { return c.cascades(ctx, sweep, p) },
		func() (findings, error) { return c.deleteTriggers(ctx, sweep, p) },
	} {
		f, err := step()
		if err != nil {
			return findings{}, err
		}
		found.add(f)
	}
	for _, step := range []func() (findings, error){
		func() (findings, error) { return c.partitions(ctx, sweep, p) },
		func() (findings, error) { return c.compile(ctx, sweep, p, cutoff) },
		func() (findings, error) { return c.indexes(ctx, sweep, p, cutoff) },
		func() (findings, error) { return c.archive(ctx, sweep, p, cutoff) },
	} {
		f, err := step()
		if err != nil {
			return findings{}, err
		}
		if found.add(f); f.refused() {
			break
		}
	}
	return found, nil
}

// catalog checks that the pass's table, columns, guard tables and function exist, as the
// statements will resolve them.
func (c *checker) catalog(ctx context.Context, sweep string, p policy.Pass) (findings, error) {
	var found findings
	tbl, err := c.table(ctx, p.Table)
	if err != nil {
		return findings{}, err
	}
	if tbl.problem != "" {
		found.refuse(c.problem(sweep, p.Name, "table", "table %q %s", p.Table, tbl.problem))
		return found, nil
	}
	if tbl.partitioned && (p.Mode == policy.ModeBatched || p.Mode == "") {
		// A batch picks its rows by ctid, which is unique within one partition only.
		found.refuse(c.problem(sweep, p.Name, "mode", "table %q is partitioned, and a batch picks its rows by ctid, which repeats across partitions: use mode: partitions (expired partitions dropped whole, the boundary's rows deleted a partition at a time), or sweep each partition with a pass of its own", p.Table))
		return found, nil
	}
	if age, ok := tbl.column(p.AgeColumn); !ok {
		found.refuse(c.problem(sweep, p.Name, "age_column", "column %q does not exist in table %q (columns: %s)", p.AgeColumn, p.Table, tbl.columnList()))
	} else if p.AgeUnit != "" && !age.numeric {
		found.refuse(c.problem(sweep, p.Name, "age_unit", "age_unit is for an integer or numeric column of Unix time, and age column %q of table %q is %s: remove age_unit (a date or time column is compared with the cutoff as it is)",
			p.AgeColumn, p.Table, age.typ))
	} else if p.AgeUnit == "" && age.numeric {
		found.refuse(c.problem(sweep, p.Name, "age_column", "age column %q of table %q is %s, a number: if it holds Unix time, say in what unit with age_unit: seconds, milliseconds or microseconds; else name a timestamptz, timestamp or date column",
			p.AgeColumn, p.Table, age.typ))
	} else if p.AgeUnit == "" && !age.temporal {
		found.refuse(c.problem(sweep, p.Name, "age_column", "age column %q of table %q is %s, not a timestamp or date: the cutoff cannot be compared with it; name a timestamptz, timestamp or date column (or an integer of Unix time, with age_unit)",
			p.AgeColumn, p.Table, age.typ))
	} else if f, err := c.timeZone(ctx, sweep, p, age); err != nil {
		return findings{}, err
	} else {
		found.add(f)
	}
	if p.Mode == policy.ModePerRow {
		key := cmp.Or(p.KeyColumn, "id")
		if _, ok := tbl.column(key); !ok {
			found.refuse(c.problem(sweep, p.Name, "key_column", "key column %q does not exist in table %q (columns: %s); name the column the function takes with key_column",
				key, p.Table, tbl.columnList()))
		}
		problem, err := c.function(ctx, p.Function)
		if err != nil {
			return findings{}, err
		}
		if problem != "" {
			found.refuse(c.problem(sweep, p.Name, "function", "function %q %s", p.Function, problem))
		}
	}
	for i, g := range p.Guards {
		field := fmt.Sprintf("guard.%d", i)
		gt, err := c.table(ctx, g.Table)
		if err != nil {
			return findings{}, err
		}
		if gt.problem != "" {
			found.refuse(c.problem(sweep, p.Name, field+".table", "keep guard table %q %s", g.Table, gt.problem))
		} else if _, ok := gt.column(g.Column); !ok {
			found.refuse(c.problem(sweep, p.Name, field+".column", "keep guard column %q does not exist in table %q (columns: %s)", g.Column, g.Table, gt.columnList()))
		}
		if _, ok := tbl.column(g.References); !ok {
			found.refuse(c.problem(sweep, p.Name, field+".references", "keep guard references column %q, which does not exist in table %q (columns: %s)", g.References, p.Table, tbl.columnList()))
		}
	}
	for i, ch := range p.DeleteWith {
		field := fmt.Sprintf("delete_with.%d", i)
		ct, err := c.table(ctx, ch.Table)
		if err != nil {
			return findings{}, err
		}
		if ct.problem != "" {
			found.refuse(c.problem(sweep, p.Name, field+".table", "delete_with table %q %s", ch.Table, ct.problem))
		} else if _, ok := ct.column(ch.Column); !ok {
			found.refuse(c.problem(sweep, p.Name, field+".column", "delete_with column %q does not exist in table %q (columns: %s)", ch.Column, ch.Table, ct.columnList()))
		}
		if _, ok := tbl.column(ch.References); !ok {
			found.refuse(c.problem(sweep, p.Name, field+".references", "delete_with references column %q, which does not exist in table %q (columns: %s)", ch.References, p.Table, tbl.columnList()))
		}
	}
	return found, nil
}

// timeZone checks a pass's time_zone against its age column and the database: a zone other than
// UTC is refused on a timestamptz column (it would change nothing there), and an IANA name must be
// one the database knows, spelled as it spells it.
func (c *checker) timeZone(ctx context.Context, sweep string, p policy.Pass, age columnInfo) (findings, error) {
	var found findings
	switch {
	case p.TimeZone == "" || p.TimeZone == policy.TimeZoneUTC:
		return found, nil
	case p.AgeUnit != "":
		return found, nil // validatePass refused a zone with age_unit
	case age.kind == statement.Instant:
		found.refuse(c.problem(sweep, p.Name, "time_zone", "time_zone has no effect: age column %q is %s, an instant, compared with the cutoff instant whatever the zone; remove time_zone (it is for date and timestamp without time zone columns)",
			p.AgeColumn, age.typ))
		return found, nil
	case p.TimeZone == policy.TimeZoneDatabase:
		return found, nil
	}
	var known bool
	var similar []string
	err := c.pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = $1),
       ARRAY(SELECT name FROM pg_timezone_names WHERE lower(name) = lower($1) ORDER BY name LIMIT 3)`, p.TimeZone).Scan(&known, &similar)
	if err != nil {
		return findings{}, fmt.Errorf("look up time zone %q: %w", p.TimeZone, err)
	}
	if !known {
		msg := fmt.Sprintf("time_zone %q is no time zone the database knows (pg_timezone_names)", p.TimeZone)
		if len(similar) > 0 {
			msg += fmt.Sprintf("; did you mean %s?", strings.Join(similar, " or "))
		} else {
			msg += ": want UTC, database, or an IANA name such as Europe/Paris"
		}
		found.refuse(c.problem(sweep, p.Name, "time_zone", "%s", msg))
	}
	return found, nil
}

// compile EXPLAINs each keep guard and the where condition alone, so that a failure points at the
// line that caused it, then the statement the runner will send, whole, with its bind parameters.
func (c *checker) compile(ctx context.Context, sweep string, p policy.Pass, cutoff time.Time) (findings, error) {
	var found findings
	table := statement.QuoteName(p.Table)
	// cutoffArgs binds the cutoff to a piece that names it.
	cutoffArgs := func(where string) []any {
		if policy.UsesCutoff(where) {
			return []any{cutoff}
		}
		return nil
	}
	for i, g := range p.Guards {
		// The guard alone, then its where: a failure of the where points into it.
		q := fmt.Sprintf("SELECT 1 FROM %s AS t WHERE %s", table, statement.Guard(policy.Guard{Table: g.Table, Column: g.Column, References: g.References}, c.ageKind(p)))
		_, err := c.explain(ctx, false, q)
		pgErr, err := pgProblem(err)
		if err != nil {
			return findings{}, err
		}
		if pgErr != nil {
			found.refuse(c.problem(sweep, p.Name, fmt.Sprintf("guard.%d", i), "keep guard %s.%s = %s.%s does not compile: %s",
				g.Table, g.Column, p.Table, g.References, describePgError(pgErr, "", 0)))
			continue
		}
		if g.Where == "" {
			continue
		}
		cond := statement.Condition(g.Where, c.ageKind(p))
		prefix := fmt.Sprintf("SELECT 1 FROM %s AS t WHERE EXISTS (SELECT 1 FROM %s AS g WHERE (", table, statement.QuoteName(g.Table))
		_, err = c.explain(ctx, false, prefix+cond+"))", cutoffArgs(g.Where)...)
		if pgErr, err = pgProblem(err); err != nil {
			return findings{}, err
		}
		if pgErr != nil {
			found.refuse(c.problem(sweep, p.Name, fmt.Sprintf("guard.%d.where", i), "the keep guard's condition does not compile: %s",
				describePgError(pgErr, cond, utf8.RuneCountInString(explain.Prefix+prefix))))
		} else if f, err := c.volatility(ctx, sweep, p, fmt.Sprintf("guard.%d.where", i), "the keep guard's condition",
			fmt.Sprintf("EXISTS (SELECT 1 FROM %s AS g WHERE (%s))", statement.QuoteName(g.Table), g.Where)); err != nil {
			return findings{}, err
		} else {
			found.add(f)
		}
	}
	for i, ch := range p.DeleteWith {
		q := fmt.Sprintf("SELECT 1 FROM %s AS c WHERE c.%s IN (SELECT t.%s FROM %s AS t)",
			statement.QuoteName(ch.Table), pgx.Identifier{ch.Column}.Sanitize(), pgx.Identifier{ch.References}.Sanitize(), table)
		_, err := c.explain(ctx, false, q)
		pgErr, err := pgProblem(err)
		if err != nil {
			return findings{}, err
		}
		if pgErr != nil {
			found.refuse(c.problem(sweep, p.Name, fmt.Sprintf("delete_with.%d", i), "delete_with %s.%s = %s.%s does not compile: %s",
				ch.Table, ch.Column, p.Table, ch.References, describePgError(pgErr, "", 0)))
		}
	}
	if p.Where != "" {
		cond := statement.Condition(p.Where, c.ageKind(p))
		prefix := fmt.Sprintf("SELECT 1 FROM %s AS t WHERE (", table)
		_, err := c.explain(ctx, false, prefix+cond+")", cutoffArgs(p.Where)...)
		pgErr, err := pgProblem(err)
		if err != nil {
			return findings{}, err
		}
		if pgErr != nil {
			found.refuse(c.problem(sweep, p.Name, "where", "the condition does not compile: %s",
				describePgError(pgErr, cond, utf8.RuneCountInString(explain.Prefix+prefix))))
		} else if f, err := c.volatility(ctx, sweep, p, "where", "the condition", p.Where); err != nil {
			return findings{}, err
		} else {
			found.add(f)
		}
	}
	if found.refused() {
		return found, nil // a piece that failed would fail the whole statement too: say it once
	}
	st := statement.Build(p, c.ageKind(p))
	query, args, field := st.Locked.Index, []any{cutoff, checkPlanBatchSize}, ""
	switch p.Mode {
	case policy.ModeSingle:
		query, args = st.Single, []any{cutoff}
	case policy.ModePerRow:
		query, args, field = st.PerRow, []any{cutoff}, "function"
	}
	_, err := c.explain(ctx, false, query, args...)
	pgErr, err := pgProblem(err)
	if err != nil {
		return findings{}, err
	}
	if pgErr != nil {
		found.refuse(c.problem(sweep, p.Name, field, "the %s statement does not compile: %s", p.Mode, describePgError(pgErr, "", 0)))
	}
	return found, nil
}

// volatility refuses a where condition (what, at field) over table that calls a VOLATILE function
// or operator: such a call can write (wipe_account in a subquery erased accounts past their grace)
// or change the session (set_config), and would run even in a dry run's count, once per candidate
// row. The condition is resolved in a transaction that is always rolled back; :cutoff stands as a
// typed NULL there (a view holds no parameter, and the NULL has the cutoff's type in the pass's
// conditions), which calls nothing.
func (c *checker) volatility(ctx context.Context, sweep string, p policy.Pass, field, what, condition string) (findings, error) {
	var found findings
	pass, table := p.Name, p.Table
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return findings{}, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // nothing to keep
	if err := (statement.Timeouts{Statement: checkStatementTimeout, Lock: checkLockTimeout}).Set(ctx, tx); err != nil {
		return findings{}, err
	}
	calls, err := volatileCalls(ctx, tx, table, policy.SubstituteCutoff(condition, statement.NullCutoff(c.ageKind(p))))
	pgErr, err := pgProblem(err)
	switch {
	case err != nil:
		return findings{}, err
	case pgErr != nil:
		found.refuse(c.problem(sweep, pass, field, "%s's functions could not be read: %s", what, describePgError(pgErr, "", 0)))
	case len(calls) > 0:
		found.refuse(c.problem(sweep, pass, field, "%s calls VOLATILE %s: a condition may call only IMMUTABLE or STABLE functions, since it runs once per candidate row, in dry runs too, and could write or change the session",
			what, strings.Join(calls, ", ")))
	}
	return found, nil
}

// unindexed is one read the batch select would make without an index, and the index that fixes it.
type unindexed struct{ what, fix string }

// indexes checks that each batch is served by indexes rather than full reads: the batch select
// reads the table through an index condition, and each guard table has an index that leads with
// the guard column. Planned with sequential scans disabled, the planner picks an index whenever
// one can serve at all, so the answer does not depend on the table's size: the same on an empty
// CI database as on production.
func (c *checker) indexes(ctx context.Context, sweep string, p policy.Pass, cutoff time.Time) (findings, error) {
	var found findings
	if p.Mode == policy.ModePartitions && p.Boundary == policy.BoundaryKeep {
		return found, nil // no batch ever runs: whole partitions go, by the catalog
	}
	raw, err := c.explain(ctx, true, statement.Build(p, c.ageKind(p)).Probe, cutoff, checkPlanBatchSize)
	if pgErr, err := pgProblem(err); err != nil {
		return findings{}, err
	} else if pgErr != nil {
		found.refuse(c.problem(sweep, p.Name, "", "planning the batch select failed: %s", describePgError(pgErr, "", 0)))
		return found, nil
	}
	indexed, err := explain.IndexServes(raw, p)
	if err != nil {
		return findings{}, fmt.Errorf("read plan: %w", err)
	}
	var missing []unindexed
	switch {
	case !indexed && p.AllowUnindexed:
		fix, err := c.indexFor(ctx, p.Table, p.AgeColumn, p.Where, "t")
		if err != nil {
			return findings{}, err
		}
		missing = append(missing, unindexed{fmt.Sprintf("no index serves the batch select, so every batch would read all of table %q", p.Table), fix})
	case !indexed:
		// Advised with the table's other refused passes, once the policy is checked.
		found.unserved = append(found.unserved, ageRefusal{sweep, p})
	}
	lookups, err := c.lookups(ctx, p, cutoff)
	if err != nil {
		return findings{}, err
	}
	missing = append(missing, lookups...)
	// Each message ends with the statement that fixes it, ready to copy.
	for _, m := range missing {
		if p.AllowUnindexed {
			found.warn(c.problem(sweep, p.Name, "allow_unindexed", "%s (allowed by allow_unindexed); the index that would serve it: %s", m.what, m.fix))
		} else if first, ok := c.suggested[m.fix]; ok {
			// One index serves the same lookup of several passes: it is suggested once.
			found.refuse(c.problem(sweep, p.Name, "", "%s: the index suggested for pass %q of sweep %q serves this pass too, or set allow_unindexed: true for a table that stays small", m.what, first[1], first[0]))
		} else {
			c.suggested[m.fix] = [2]string{sweep, p.Name}
			found.refuse(c.problem(sweep, p.Name, "", "%s: create the index, or set allow_unindexed: true for a table that stays small: %s", m.what, m.fix))
		}
	}
	return found, nil
}
