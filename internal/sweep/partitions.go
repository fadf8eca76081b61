package sweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/partition"
	"github.com/sweeprail/sweeprail/internal/trace"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// runPartitions is a partitions-mode pass: every partition whose upper bound is at or before the
// cutoff is detached and dropped (or kept detached), one at a time under the lock timeout, the
// budget and shutdown checked before each; then, unless the pass keeps its boundary, the rows
// past the cutoff in the partition that straddles it and in a default partition go through the
// batched engine on the parent (the planner prunes every other partition). A drop that fails
// stops the pass with batch-error naming the partition; those already dropped stay dropped.
func (pr *passRun) runPartitions() (wire.PassResult, error) {
	s := pr.r.cfg.Settings
	pr.out = wire.PassResult{Pass: pr.p.Name, Path: string(PathPartitions)}
	maxBatches := firstPositive(pr.p.MaxBatches, s.MaxBatches)
	parts, err := partition.List(pr.db, pr.r.cfg.Pool, pr.p.Table)
	if err != nil {
		pr.out.StopReason = wire.StopBatchError
		return pr.out, fmt.Errorf("list partitions: %w", err)
	}
	cut := partition.Expired(parts, pr.cutoff)
	for _, part := range cut.Expired {
		if reason := pr.stop(maxBatches); reason != "" {
			pr.out.StopReason = reason
			return pr.out, nil
		}
		began := pr.r.cfg.Now()
		_, span := pr.r.cfg.Tracing.StartBatch(pr.ctx, "drop-partition", 0)
		out, err := partition.Drop(pr.db, pr.r.cfg.Pool, part, partition.DropOptions{
			LockTimeout: s.LockTimeout, StatementTimeout: s.StatementTimeout, KeepDetached: pr.p.KeepDetached,
		})
		took := pr.r.cfg.Now().Sub(began)
		pr.out.BatchCount++
		pr.r.cfg.Metrics.Batch(pr.sweep, took)
		gone := int64(0)
		if !out.Gone && (out.Dropped || (pr.p.KeepDetached && out.Detached)) {
			gone = 1
		}
		span.End(trace.Result{PartitionsDropped: gone, Duration: took, Err: err})
		pr.log.Debug("sweep partition", "pass", pr.p.Name, "partition", part.Name, "dropped", out.Dropped,
			"detached", out.Detached, "took_ms", float64(took.Microseconds())/1000, "failed", err != nil)
		if err != nil {
			pr.out.StopReason = wire.StopBatchError
			return pr.out, fmt.Errorf("drop partition %s: %w", part.Name, err)
		}
		pr.out.PartitionsDropped += gone
		pr.r.cfg.Metrics.PartitionsDropped(pr.sweep, pr.p.Name, gone)
	}
	if pr.p.Boundary == BoundaryKeep || len(cut.Boundary()) == 0 {
		pr.out.StopReason = wire.StopExhausted
		return pr.out, nil
	}
	dropped, batches := pr.out.PartitionsDropped, pr.out.BatchCount
	res, err := pr.run()
	// The boundary's batches run on the parent, whose blocks are its partitions': the index path.
	res.Path = string(PathPartitions)
	res.PartitionsDropped += dropped
	res.BatchCount += batches
	return res, err
}

// dryRunPartitions lists the partitions a run would drop, with their row estimates, and counts
// the boundary rows its batches would delete (exactly, under the count timeout).
func (r *Runner) dryRunPartitions(ctx context.Context, p Pass, cutoff time.Time, dp *wire.DryRunPass) error {
	parts, err := partition.List(ctx, r.cfg.Pool, p.Table)
	if err != nil {
		return fmt.Errorf("list partitions: %w", err)
	}
	cut := partition.Expired(parts, cutoff)
	dp.Partitions = []wire.DryRunPartition{}
	for _, part := range cut.Expired {
		dp.Partitions = append(dp.Partitions, wire.DryRunPartition{Name: part.Name, RowsEstimate: part.Rows})
	}
	var n int64
	if p.Boundary != BoundaryKeep {
		err = pgx.BeginTxFunc(ctx, r.cfg.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)", ms(r.cfg.Settings.CountTimeout)); err != nil {
				return err
			}
			for _, part := range cut.Boundary() {
				c, err := partition.CountBelow(ctx, tx, part, p.AgeColumn, cutoff)
				if err != nil {
					return err
				}
				n += c
			}
			return nil
		})
	}
	switch {
	case isQueryCanceled(err):
		dp.CountTimedOut = true
	case err != nil:
		return fmt.Errorf("count boundary rows: %w", err)
	default:
		dp.Eligible = &n
		dp.Estimate = n
	}
	return nil
}

// checkPartitions is the policy check of a partitions-mode pass: the table is range-partitioned
// on the age column, one level, and the role may drop its partitions.
func (c *checker) partitions(ctx context.Context, sweep string, p Pass, _ time.Time) error {
	if p.Mode != ModePartitions {
		return nil
	}
	_, err := partition.Describe(ctx, c.pool, p.Table, p.AgeColumn)
	var refused *partition.RefusedError
	switch {
	case errors.As(err, &refused):
		c.fail(sweep, p.Name, "mode", "mode partitions: %s", refused.Reason)
		return nil
	case err != nil:
		return fmt.Errorf("describe partitions of %q: %w", p.Table, err)
	}
	return nil
}
