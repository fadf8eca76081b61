package check

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sweeprail/sweeprail/internal/explain"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// compile EXPLAINs each keep guard, delete_with child and where condition alone, so that a
// failure points at the line that caused it, then the statement the runner will send, whole,
// with its bind parameters.
func (c *checker) compile(ctx context.Context, sweep string, p policy.Pass, cutoff time.Time) (findings, error) {
	var found findings
	table := statement.QuoteName(p.Table)
	for i, g := range p.Guards {
		// The guard alone, then its where: a failure of the where points into it.
		q := fmt.Sprintf("SELECT 1 FROM %s AS t WHERE %s", table, statement.Guard(policy.Guard{Table: g.Table, Columns: g.Columns, References: g.References}, c.ageKind(p)))
		pgErr, err := c.plans(ctx, q)
		switch {
		case err != nil:
			return findings{}, err
		case pgErr != nil:
			found.refuse(c.problem(sweep, p.Name, fmt.Sprintf("guard.%d", i), "keep guard %s does not compile: %s",
				pairText(g.Table, g.Columns, p.Table, g.References), describePgError(pgErr, "", 0)))
			continue
		case g.Where == "":
			continue
		}
		gt := statement.QuoteName(g.Table)
		f, err := c.condition(ctx, sweep, p, cutoff, condition{
			field: fmt.Sprintf("guard.%d.where", i), what: "the keep guard's condition", where: g.Where,
			prefix: fmt.Sprintf("SELECT 1 FROM %s AS t WHERE EXISTS (SELECT 1 FROM %s AS g WHERE (", table, gt), suffix: "))",
			alone: fmt.Sprintf("EXISTS (SELECT 1 FROM %s AS g WHERE (%s))", gt, g.Where),
		})
		if err != nil {
			return findings{}, err
		}
		found.add(f)
	}
	for i, ch := range p.DeleteWith {
		q := fmt.Sprintf("SELECT 1 FROM %s AS c WHERE (%s) IN (SELECT %s FROM %s AS t)",
			statement.QuoteName(ch.Table), statement.ColumnList("c", ch.Columns), statement.ColumnList("t", policy.Refs(ch.References)), table)
		pgErr, err := c.plans(ctx, q)
		if err != nil {
			return findings{}, err
		}
		if pgErr != nil {
			found.refuse(c.problem(sweep, p.Name, fmt.Sprintf("delete_with.%d", i), "delete_with %s does not compile: %s",
				pairText(ch.Table, ch.Columns, p.Table, ch.References), describePgError(pgErr, "", 0)))
		}
	}
	if p.Where != "" {
		f, err := c.condition(ctx, sweep, p, cutoff, condition{
			field: "where", what: "the condition", where: p.Where,
			prefix: fmt.Sprintf("SELECT 1 FROM %s AS t WHERE (", table), suffix: ")", alone: p.Where,
		})
		if err != nil {
			return findings{}, err
		}
		found.add(f)
	}
	if found.refused() {
		return found, nil // a piece that failed would fail the whole statement too: say it once
	}
	st := statement.Build(p, c.ageKind(p))
	query, args, field := st.Locked.Index.SQL, []any{cutoff, checkPlanBatchSize}, ""
	switch p.Mode {
	case policy.ModeSingle:
		query, args = st.Single.SQL, []any{cutoff}
	case policy.ModePerRow:
		query, args, field = st.PerRow.SQL, []any{cutoff}, "function"
	}
	pgErr, err := c.plans(ctx, query, args...)
	if err != nil {
		return findings{}, err
	}
	if pgErr != nil {
		found.refuse(c.problem(sweep, p.Name, field, "the %s statement does not compile: %s", p.Mode, describePgError(pgErr, "", 0)))
	}
	return found, nil
}

// condition is a where condition of a pass, placed in a statement to be compiled alone.
type condition struct {
	// field is its policy field, what how a message names it, where its text.
	field, what, where string
	// prefix and suffix are the statement around it; alone is what its volatility is read of.
	prefix, suffix, alone string
}

// condition compiles cond and, once it compiles, refuses the VOLATILE calls it makes; a failure
// to compile points into the condition.
func (c *checker) condition(ctx context.Context, sweep string, p policy.Pass, cutoff time.Time, cond condition) (findings, error) {
	var found findings
	text := statement.Condition(cond.where, c.ageKind(p))
	var args []any
	if policy.UsesCutoff(cond.where) {
		args = []any{cutoff}
	}
	pgErr, err := c.plans(ctx, cond.prefix+text+cond.suffix, args...)
	switch {
	case err != nil:
		return findings{}, err
	case pgErr != nil:
		found.refuse(c.problem(sweep, p.Name, cond.field, "%s does not compile: %s",
			cond.what, describePgError(pgErr, text, utf8.RuneCountInString(explain.Prefix+cond.prefix))))
		return found, nil
	}
	return c.volatility(ctx, sweep, p, cond.field, cond.what, cond.alone)
}

// plans EXPLAINs query and returns its own failure (it does not compile, a permission is
// missing) apart from the database's.
func (c *checker) plans(ctx context.Context, query string, args ...any) (*pgconn.PgError, error) {
	_, err := c.explain(ctx, false, query, args...)
	return pgProblem(err)
}

// volatility refuses a where condition (what, at field) that calls a VOLATILE function or
// operator: it could write or change the session, once per candidate row, in dry runs too.
// :cutoff stands as a NULL of the cutoff's type there, since a view holds no parameter.
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

// pairText writes the reference of a keep guard or delete_with entry as messages name it:
// child.col = swept.ref, or child.(a, b) = swept.(x, y) for a key of several columns.
func pairText(table string, columns []string, swept string, refs []string) string {
	return fmt.Sprintf("%s.%s = %s.%s", table, policy.ColumnText(columns), swept, policy.ColumnText(policy.Refs(refs)))
}
