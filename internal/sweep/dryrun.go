package sweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sweeprail/sweeprail/internal/explain"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// sqlstateQueryCanceled is what a statement_timeout raises.
const sqlstateQueryCanceled = "57014"

// DryRun counts what Run would delete now, without deleting or taking the lease. Each pass gets an
// exact count bounded by the count timeout (past it: Eligible nil and CountTimedOut), the
// planner's estimate, and whether the batch select can be served from an index.
func (r *Runner) DryRun(ctx context.Context, name string) (*wire.DryRunResult, error) {
	spec, ok := r.byName[name]
	if !ok {
		return nil, fmt.Errorf("dry run %q: %w", name, ErrUnknownSweep)
	}
	// The same reference time as a run's, in UTC, so that the count and the run agree on
	// timestamp-without-time-zone columns whatever the process's zone.
	ref, err := r.referenceTime(ctx, r.databaseNow)
	if err != nil {
		return nil, fmt.Errorf("dry run %q: %w", name, err)
	}
	sts, kinds, sql, err := r.statementsFor(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("dry run %q: %w", name, err)
	}
	res := &wire.DryRunResult{Sweep: name, DryRun: true, Passes: []wire.DryRunPass{}, ReferenceTime: ref, Counted: wire.DryRunCounted}
	for i, p := range spec.Passes {
		st := sts[i]
		cutoff := ref.Add(-p.Retention)
		dp := wire.DryRunPass{Pass: p.Name}
		dp.Cutoff, dp.CutoffEpoch, dp.AgeUnit = cutoffOf(cutoff, kinds[i], p)
		if p.Mode == policy.ModePartitions {
			if err := r.dryRunPartitions(ctx, sql[i], kinds[i], cutoff, &dp); err != nil {
				return nil, fmt.Errorf("dry run %q: pass %q: %w", name, p.Name, err)
			}
			// The estimate is the boundary count's; the verdict is whether an index serves
			// the boundary's batches (moot when the pass keeps its boundary).
			var err error
			if _, dp.Indexed, err = r.plan(ctx, p, st, cutoff); err != nil {
				return nil, fmt.Errorf("dry run %q: plan pass %q: %w", name, p.Name, err)
			}
			dp.Indexed = dp.Indexed || p.Boundary == policy.BoundaryKeep
			dp.Path = string(PathPartitions)
			res.Passes = append(res.Passes, dp)
			continue
		}
		query, cascades, err := r.countStatement(ctx, sql[i], kinds[i], st)
		if err != nil {
			return nil, fmt.Errorf("dry run %q: pass %q: %w", name, p.Name, err)
		}
		dp.CascadesUncounted = len(p.Cascades) > 0 && cascades == 0
		if dp.Triggers, err = r.deleteTriggers(ctx, p); err != nil {
			return nil, fmt.Errorf("dry run %q: pass %q: %w", name, p.Name, err)
		}
		counts, err := r.count(ctx, query, cutoff, 1+len(p.DeleteWith)+2*cascades)
		switch {
		case isQueryCanceled(err):
			dp.CountTimedOut = true
		case err != nil:
			return nil, fmt.Errorf("dry run %q: count pass %q: %w", name, p.Name, err)
		default:
			dp.Eligible = &counts[0]
			dp.Children = childRows(p.DeleteWith, counts[1:1+len(p.DeleteWith)])
			dp.Cascades = cascadeRows(p.Cascades, counts[1+len(p.DeleteWith):])
		}
		if dp.Estimate, dp.Indexed, err = r.plan(ctx, p, st, cutoff); err != nil {
			return nil, fmt.Errorf("dry run %q: plan pass %q: %w", name, p.Name, err)
		}
		// After the count: a table locked against readers holds the count, under the count
		// timeout, not the survey, under the lock timeout.
		path, _, err := r.pathOf(ctx, sql[i], st, cutoff)
		if err != nil {
			return nil, fmt.Errorf("dry run %q: pass %q: %w", name, p.Name, err)
		}
		dp.Path = string(path)
		res.Passes = append(res.Passes, dp)
	}
	return res, nil
}

func isQueryCanceled(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlstateQueryCanceled
}

// plan asks the planner twice: as it stands, for the estimate of the eligible rows; and with
// sequential scans and sorts priced out, for whether an index serves the batch select at all
// (explain.IndexServes). The second answer is the policy check's, and does not depend on the table's
// size, so the two never disagree.
func (r *Runner) plan(ctx context.Context, p policy.Pass, st statement.Set, cutoff any) (estimate int64, indexed bool, err error) {
	raw, err := explain.JSON(ctx, r.cfg.Pool, r.cfg.Settings.CountTimeout, r.cfg.Settings.LockTimeout, false, st.Estimate.SQL, cutoff)
	if err != nil {
		return 0, false, err
	}
	if estimate, err = explain.TopRows(raw); err != nil {
		return 0, false, err
	}
	indexed, err = r.indexServes(ctx, p, st, cutoff, r.cfg.Settings.CountTimeout)
	return estimate, indexed, err
}

// indexServes plans pass p's batch select with sequential scans and sorts priced out, under
// timeout, and reads whether an index serves it (explain.IndexServes): the policy check's
// verdict, which does not depend on the table's size.
func (r *Runner) indexServes(ctx context.Context, p policy.Pass, st statement.Set, cutoff any, timeout time.Duration) (bool, error) {
	size := firstPositive(p.BatchSize, r.cfg.Settings.BatchSize)
	raw, err := explain.JSON(ctx, r.cfg.Pool, timeout, r.cfg.Settings.LockTimeout, true, st.Probe.SQL, cutoff, size)
	if err != nil {
		return false, err
	}
	return explain.IndexServes(raw, p)
}
