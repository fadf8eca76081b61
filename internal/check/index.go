package check

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/explain"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

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
	raw, err := c.explain(ctx, true, statement.Build(p, c.ageKind(p)).Probe.SQL, cutoff, checkPlanBatchSize)
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
		// Such a pass runs on the heap path, which reads the table once per run, in ranges of blocks.
		missing = append(missing, unindexed{fmt.Sprintf("no index serves the batch select, so each run reads all of table %q once, by ranges of blocks", p.Table), fix})
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

// lookups checks that an index serves each lookup a batch makes in another table: each keep
// guard's (is the row referenced?) and each delete_with child's (which rows reference it?). A
// lookup without its index reads the whole other table, at every batch.
func (c *checker) lookups(ctx context.Context, p policy.Pass, cutoff time.Time) ([]unindexed, error) {
	var missing []unindexed
	for _, g := range p.Guards {
		// The plan cannot tell a lookup from a full read of a composite index whose second column
		// is the guard's (an Index Cond either way), so an index that leads with the guard column
		// is looked for in the catalog first.
		ok, err := c.leadingIndex(ctx, g.Table, g.Columns)
		if err != nil {
			return nil, err
		}
		if !ok {
			// A partial index serves the lookup when the guard's own condition implies its
			// predicate: its where, or the equality itself (g.col = t.id implies g.col IS NOT
			// NULL). The planner proves that, so the guard is planned as the batch runs it.
			if ok, err = c.guardServed(ctx, p, g, cutoff); err != nil {
				return nil, err
			}
		}
		if ok {
			continue
		}
		fix, err := c.indexOn(ctx, g.Table, g.Columns, g.Where, "g")
		if err != nil {
			return nil, err
		}
		what := fmt.Sprintf("no index serves the keep guard on %s.%s, so every batch would read all of table %q", g.Table, policy.ColumnText(g.Columns), g.Table)
		if g.Where != "" {
			what = fmt.Sprintf("no index serves the keep guard on %s.%s where %s, so every batch would read all of table %q",
				g.Table, policy.ColumnText(g.Columns), strings.Join(strings.Fields(g.Where), " "), g.Table)
		}
		missing = append(missing, unindexed{what, fix})
	}
	for _, ch := range p.DeleteWith {
		ok, err := c.leadingIndex(ctx, ch.Table, ch.Columns)
		if err != nil {
			return nil, err
		}
		if ok {
			continue
		}
		fix, err := c.indexOn(ctx, ch.Table, ch.Columns, "", "c")
		if err != nil {
			return nil, err
		}
		missing = append(missing, unindexed{fmt.Sprintf("no index serves delete_with on %s.%s, so every batch would read all of table %q", ch.Table, policy.ColumnText(ch.Columns), ch.Table), fix})
	}
	return missing, nil
}

// lookupPricing prices out every way of running a keep guard but a lookup per row: sequential
// scans, sorts, the hash and merge joins that would read the guard table whole, and the
// materialized full read of an index (a partial index whose predicate the where implies, read
// whole once and kept). The planner then takes a parameterized index scan whenever an index can
// serve one, whatever the statistics.
const lookupPricing = "SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; SET LOCAL enable_hashjoin = off; " +
	"SET LOCAL enable_mergejoin = off; SET LOCAL enable_material = off"

// guardServed plans keep guard g as the batch runs it (NOT EXISTS over alias g, correlated to t,
// its where in place) with lookupPricing, and reports whether the guard table is read through an
// index condition on the guard column, by an index that leads with it: a partial index too, when
// the guard's condition implies its predicate.
func (c *checker) guardServed(ctx context.Context, p policy.Pass, g policy.Guard, cutoff time.Time) (bool, error) {
	q := fmt.Sprintf("SELECT 1 FROM %s AS t WHERE %s", statement.QuoteName(p.Table), statement.Guard(g, c.ageKind(p)))
	var args []any
	if policy.UsesCutoff(g.Where) {
		args = []any{cutoff}
	}
	raw, err := explain.Priced(ctx, c.pool, checkStatementTimeout, checkLockTimeout, lookupPricing, q, args...)
	if pgErr, err := pgProblem(err); err != nil {
		return false, err
	} else if pgErr != nil {
		return false, nil // compile reported it
	}
	scans, err := explain.LookupIndexes(raw, "g", g.Columns[0])
	if err != nil {
		return false, fmt.Errorf("read plan: %w", err)
	}
	if len(scans) == 0 {
		return false, nil
	}
	var names []string
	for _, sc := range scans {
		if len(sc) == 0 {
			return false, nil
		}
		names = append(names, sc...)
	}
	t, err := c.table(ctx, g.Table)
	if err != nil {
		return false, err
	}
	// The indexes among them that lead with the guard columns, on the guard table or, for a
	// partitioned one, on its partitions.
	rows, err := c.pool.Query(ctx, `
SELECT ic.relname FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
WHERE (i.indrelid = $1 OR i.indrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1))
  AND ic.relname = ANY ($3) AND i.indisvalid AND `+leadsWith, t.oid, g.Columns, names)
	if err != nil {
		return false, fmt.Errorf("look up indexes of %q: %w", g.Table, err)
	}
	leading, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, fmt.Errorf("look up indexes of %q: %w", g.Table, err)
	}
	for _, sc := range scans {
		if !slices.ContainsFunc(sc, func(n string) bool { return slices.Contains(leading, n) }) {
			return false, nil
		}
	}
	return true, nil
}
