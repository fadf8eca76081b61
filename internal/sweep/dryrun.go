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
	ref, err := r.asOf(ctx)
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
	size := firstPositive(p.BatchSize, r.settings.BatchSize)
	err = pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)", ms(r.settings.CountTimeout)); err != nil {
			return err
		}
		var raw []byte
		if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+st.count, cutoff).Scan(&raw); err != nil {
			return err
		}
		if estimate, err = aggregateInputRows(raw); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+st.plan, cutoff, size).Scan(&raw); err != nil {
			return err
		}
		indexed, err = indexConditionOn(raw, "t")
		return err
	})
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
