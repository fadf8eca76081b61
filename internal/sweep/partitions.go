package sweep

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/partition"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
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
	parts, err := partition.List(pr.db, pr.r.cfg.Pool, pr.sql.Table)
	if err != nil {
		pr.out.StopReason = wire.StopBatchError
		return pr.out, fmt.Errorf("list partitions: %w", err)
	}
	cut := cutAt(parts, pr.kind, pr.cutoff)
	var def partition.Definer
	if len(cut.Expired) > 0 {
		if def, err = partition.FindDefiner(pr.db, pr.r.cfg.Pool, pr.sql.Table); err != nil {
			pr.out.StopReason = wire.StopBatchError
			return pr.out, err
		}
	}
	for _, part := range cut.Expired {
		if reason := pr.stop(maxBatches); reason != "" {
			pr.out.StopReason = reason
			return pr.out, nil
		}
		began := pr.r.cfg.Now()
		_, span := pr.r.cfg.Tracing.StartBatch(pr.ctx, "drop-partition", 0)
		opts := partition.DropOptions{
			LockTimeout: s.LockTimeout, StatementTimeout: s.StatementTimeout, KeepDetached: pr.p.KeepDetached || pr.p.ArchiveSchema != "",
		}
		// The table's drop function when it is usable: the role then needs no ownership. Moving a
		// partition to archive_schema needs its owner all the same.
		if def.Usable && pr.p.ArchiveSchema == "" {
			opts.Definer = def.Function
		}
		out, err := partition.Drop(pr.db, pr.r.cfg.Pool, part, opts)
		if err == nil && pr.p.ArchiveSchema != "" && out.Detached && !out.Gone {
			err = pr.moveToArchive(part.Name)
		}
		took := pr.r.cfg.Now().Sub(began)
		pr.out.BatchCount++
		pr.r.cfg.Metrics.Batch(pr.of.sweep, took)
		gone := int64(0)
		if !out.Gone && (out.Dropped || ((pr.p.KeepDetached || pr.p.ArchiveSchema != "") && out.Detached)) {
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
		pr.r.cfg.Metrics.PartitionsDropped(pr.of.sweep, pr.p.Name, gone)
	}
	if pr.p.Boundary == policy.BoundaryKeep || len(cut.Boundary()) == 0 {
		pr.out.StopReason = wire.StopExhausted
		return pr.out, nil
	}
	// The boundary's rows go by the batched engine, one leaf partition at a time: a batch picks
	// rows by ctid, which is unique within a partition only, so a batch on the parent would
	// delete the rows of every partition that share a picked ctid (make bench caught a batch of
	// 1000 deleting 71000), outrun its keyset cursor, and answer exhausted with eligible rows left.
	// Each leaf is a plain table, so each chooses its own access path, as a batched pass does.
	total := pr.out
	for _, part := range cut.Boundary() {
		leaf := *pr
		leaf.p.Table = unquoteQualified(part.Name)
		leaf.sql.Table = leaf.p.Table
		leaf.st = statement.Build(leaf.sql, pr.kind)
		leaf.at = position{size: pr.at.size}
		leaf.of.batchBase = total.BatchCount
		res, err := leaf.run()
		total.Deleted += res.Deleted
		total.Archived += res.Archived
		total.BatchCount += res.BatchCount
		total.ThrottledMs += res.ThrottledMs
		total.LockRetries += res.LockRetries
		total.StopReason = res.StopReason
		total.LostCommit = res.LostCommit
		if err != nil || res.StopReason != wire.StopExhausted {
			return total, err
		}
	}
	return total, nil
}

// cutAt divides parts at cutoff as an age column of kind k compares with it: the instant, or for
// an integer of Unix time the cutoff in its unit.
func cutAt(parts []partition.Partition, k statement.Kind, cutoff time.Time) partition.Cut {
	if k.Epoch() {
		return partition.ExpiredEpoch(parts, statement.EpochOf(k, cutoff))
	}
	return partition.Expired(parts, cutoff)
}

// unquoteQualified turns a name as partition.List writes it (schema.name, each part quoted
// where needed) back into the bare form a Pass names a table by.
func unquoteQualified(name string) string {
	var parts []string
	for rest := name; rest != ""; {
		var part string
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) {
				if rest[end] == '"' {
					if end+1 < len(rest) && rest[end+1] == '"' {
						end += 2
						continue
					}
					break
				}
				end++
			}
			part = strings.ReplaceAll(rest[1:min(end, len(rest))], `""`, `"`)
			rest = rest[min(end+1, len(rest)):]
		} else {
			i := strings.IndexByte(rest, '.')
			if i < 0 {
				i = len(rest)
			}
			part, rest = rest[:i], rest[i:]
		}
		parts = append(parts, part)
		rest = strings.TrimPrefix(rest, ".")
	}
	return strings.Join(parts, ".")
}

// dryRunPartitions lists the partitions a run would drop, with their row estimates, and counts
// the boundary rows its batches would delete (exactly, under the count timeout).
func (r *Runner) dryRunPartitions(ctx context.Context, p policy.Pass, kind statement.Kind, cutoff time.Time, dp *wire.DryRunPass) error {
	parts, err := partition.List(ctx, r.cfg.Pool, p.Table)
	if err != nil {
		return fmt.Errorf("list partitions: %w", err)
	}
	cut := cutAt(parts, kind, cutoff)
	dp.Partitions = []wire.DryRunPartition{}
	for _, part := range cut.Expired {
		dp.Partitions = append(dp.Partitions, wire.DryRunPartition{Name: part.Name, RowsEstimate: part.Rows})
	}
	var n int64
	if p.Boundary != policy.BoundaryKeep {
		err = pgx.BeginTxFunc(ctx, r.cfg.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			if err := (statement.Timeouts{Statement: r.cfg.Settings.CountTimeout}).Set(ctx, tx); err != nil {
				return err
			}
			for _, part := range cut.Boundary() {
				count := func() (int64, error) { return partition.CountBelow(ctx, tx, part, p.AgeColumn, cutoff) }
				if kind.Epoch() {
					count = func() (int64, error) {
						return partition.CountBelowEpoch(ctx, tx, part, p.AgeColumn, statement.EpochOf(kind, cutoff))
					}
				}
				c, err := count()
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

// moveToArchive moves a partition the pass has just detached into its archive_schema, under the
// lock timeout. A move that fails leaves the partition detached where it was: the error says
// the statement that finishes it, since the next run no longer sees it as a partition.
func (pr *passRun) moveToArchive(part string) error {
	s := pr.r.cfg.Settings
	ctx, cancel := context.WithTimeout(pr.db, s.StatementTimeout+5*time.Second)
	defer cancel()
	stmt := fmt.Sprintf("ALTER TABLE %s SET SCHEMA %s", part, pgx.Identifier{pr.p.ArchiveSchema}.Sanitize())
	err := pgx.BeginFunc(ctx, pr.r.cfg.Pool, func(tx pgx.Tx) error {
		if err := (statement.Timeouts{Statement: s.StatementTimeout, Lock: s.LockTimeout}).Set(ctx, tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, stmt)
		return err
	})
	if err != nil {
		return fmt.Errorf("move detached partition %s to schema %s (finish it with: %s): %w", part, pr.p.ArchiveSchema, stmt, err)
	}
	return nil
}
