package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// sqlstateQueryCanceled is what a statement_timeout raises.
const sqlstateQueryCanceled = "57014"

// DryRun counts what Run would delete now, without deleting or taking the lease. Each pass gets an
// exact count bounded by the count timeout (past it: Eligible nil and CountTimedOut), the
// planner's estimate, and whether the batch select can be served from an index.
func (r *Runner) DryRun(ctx context.Context, name string) (*DryRunResult, error) {
	spec, ok := r.byName[name]
	if !ok {
		return nil, fmt.Errorf("dry run %q: %w", name, ErrUnknownSweep)
	}
	asOf := r.asOf
	if asOf == nil {
		asOf = r.databaseNow
	}
	ref, err := asOf(ctx)
	if err != nil {
		return nil, fmt.Errorf("dry run %q: read database clock: %w", name, err)
	}
	res := &DryRunResult{Sweep: name, DryRun: true, Passes: []DryRunPass{}}
	for i, p := range spec.Passes {
		st := r.stmts[name][i]
		cutoff := ref.Add(-p.Retention)
		dp := DryRunPass{Pass: p.Name}
		n, err := r.count(ctx, st, cutoff)
		switch {
		case isQueryCanceled(err):
			dp.CountTimedOut = true
		case err != nil:
			return nil, fmt.Errorf("dry run %q: count pass %q: %w", name, p.Name, err)
		default:
			dp.Eligible = &n
		}
		if dp.Estimate, dp.Indexed, err = r.plan(ctx, p, st, cutoff); err != nil {
			return nil, fmt.Errorf("dry run %q: plan pass %q: %w", name, p.Name, err)
		}
		res.Passes = append(res.Passes, dp)
	}
	return res, nil
}

func isQueryCanceled(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlstateQueryCanceled
}

func (r *Runner) count(ctx context.Context, st statements, cutoff any) (int64, error) {
	var n int64
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)", ms(r.settings.CountTimeout)); err != nil {
			return err
		}
		return tx.QueryRow(ctx, st.count, cutoff).Scan(&n)
	})
	return n, err
}

// plan asks the planner twice: as it stands, for the estimate; and with sequential scans
// discouraged, for whether an index condition can serve the batch select at all. The second answer
// does not depend on the table's size, so it is the same on a test table and on production, and
// it is the policy check's answer (indexConditionOn), so the two never disagree.
func (r *Runner) plan(ctx context.Context, p Pass, st statements, cutoff any) (estimate int64, indexed bool, err error) {
	raw, err := explainJSON(ctx, r.pool, r.settings.CountTimeout, r.settings.LockTimeout, false, st.count, cutoff)
	if err != nil {
		return 0, false, err
	}
	if estimate, err = aggregateInputRows(raw); err != nil {
		return 0, false, err
	}
	size := firstPositive(p.BatchSize, r.settings.BatchSize)
	if raw, err = explainJSON(ctx, r.pool, r.settings.CountTimeout, r.settings.LockTimeout, true, st.plan, cutoff, size); err != nil {
		return 0, false, err
	}
	indexed, err = indexConditionOn(raw, "t")
	return estimate, indexed, err
}

// aggregateInputRows reads the estimated eligible rows from the count's plan: the rows its
// aggregate reads.
func aggregateInputRows(raw []byte) (int64, error) {
	type node struct {
		NodeType string  `json:"Node Type"`
		PlanRows float64 `json:"Plan Rows"`
		Plans    []node  `json:"Plans"`
	}
	var out []struct {
		Plan node `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) == 0 {
		return 0, fmt.Errorf("read plan: %v", err)
	}
	n := out[0].Plan
	if n.NodeType == "Aggregate" && len(n.Plans) > 0 {
		return int64(n.Plans[0].PlanRows), nil
	}
	return int64(n.PlanRows), nil
}
