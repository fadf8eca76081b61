package check

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/explain"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

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
