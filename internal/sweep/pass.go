package sweep

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sweeprail/sweeprail/internal/trace"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// passRun is one pass of one run: what it was given, and where its batch loop stands.
type passRun struct {
	r   *Runner
	ctx context.Context // cancelled on shutdown: checked between batches
	db  context.Context // the database work's context, never cancelled by shutdown
	log *slog.Logger

	sweep string
	p     Pass
	st    statements
	// kind is the type of the age column st was built for (a partitions pass builds its leaf
	// partitions' statements for it).
	kind     ageKind
	cutoff   time.Time
	deadline time.Time
	opts     Options

	out wire.PassResult
	// arch are the statements that move the rows, for a pass with archive_to; nil otherwise.
	arch *archiveStatements
	// size is the next batch's size, adapted after each full batch; limit is the rows the next
	// batch may delete: size, or what max_rows leaves when that is less.
	size, limit int
	// children are the rows of each delete_with child the last batch deleted.
	children []int64
	// after is where the next batch resumes: the newest age deleted so far (nil before the first
	// batch). Rows older than it that a batch skipped (locked by someone else) wait for the next run.
	after *time.Time
}

// run deletes the pass's eligible rows batch by batch until none are left, or the budget, the
// batch cap, a shutdown or a failed batch stops it. The error is the failed batch's.
func (pr *passRun) run() (wire.PassResult, error) {
	s := pr.r.cfg.Settings
	pr.out = wire.PassResult{Pass: pr.p.Name, Children: childRows(pr.p.DeleteWith, make([]int64, len(pr.p.DeleteWith)))}
	pr.children = make([]int64, len(pr.p.DeleteWith))
	pr.size = firstPositive(pr.opts.BatchSize, pr.p.BatchSize, s.BatchSize)
	maxBatches := firstPositive(pr.p.MaxBatches, s.MaxBatches)
	if pr.p.ArchiveTo != "" {
		if err := pr.prepareArchive(); err != nil {
			pr.out.StopReason = wire.StopBatchError
			return pr.out, fmt.Errorf("read the columns to archive: %w", err)
		}
	}
	for {
		// The pause comes before the checks, so a batch never starts after the budget or a
		// shutdown that the pause ran into. A pause never outlasts the budget: the answer must
		// still beat the server's write timeout.
		if pr.out.BatchCount > 0 && s.Pause > 0 {
			if left := pr.deadline.Sub(pr.r.cfg.Now()); left > 0 {
				pr.r.cfg.Sleep(pr.ctx, min(s.Pause, left))
			}
		}
		if reason := pr.stop(maxBatches); reason != "" {
			pr.out.StopReason = reason
			return pr.out, nil
		}
		if err := pr.throttle(); err != nil {
			pr.out.StopReason = wire.StopBatchError
			return pr.out, err
		}
		// Checked again after a wait: a run that spent its budget waiting stops with budget.
		if reason := pr.stop(maxBatches); reason != "" {
			pr.out.StopReason = reason
			return pr.out, nil
		}
		pr.limit = pr.size
		if pr.p.MaxRows > 0 {
			// The cap is exact whatever size adaptive sizing reached: the last batch shrinks.
			pr.limit = int(min(int64(pr.size), int64(pr.p.MaxRows)-pr.out.Deleted))
		}
		began := pr.r.cfg.Now()
		_, span := pr.r.cfg.Tracing.StartBatch(pr.ctx, string(pr.p.Mode), pr.limit)
		n, full, newest, err := pr.batch()
		took := pr.r.cfg.Now().Sub(began)
		span.End(trace.Result{Rows: n, Archived: pr.archived(n), Duration: took, Err: err})
		pr.out.BatchCount++
		pr.r.cfg.Metrics.Batch(pr.sweep, took)
		// Each batch's size and duration, at debug level: the metric's histogram only buckets
		// them, and tuning BATCH_TARGET (or make bench's p99 and longest transaction) needs them.
		pr.log.Debug("sweep batch", "pass", pr.p.Name, "batch", pr.out.BatchCount, "size", pr.limit, "deleted", n, "archived", pr.archived(n),
			"took_ms", float64(took.Microseconds())/1000, "failed", err != nil)
		if err != nil {
			pr.out.StopReason = wire.StopBatchError
			return pr.out, fmt.Errorf("delete batch: %w", err)
		}
		pr.out.Deleted += n
		for i, c := range pr.children {
			pr.out.Children[i].Rows += c
		}
		pr.r.cfg.Metrics.RowsDeleted(pr.sweep, pr.p.Name, n)
		if a := pr.archived(n); a > 0 {
			pr.out.Archived += a
			pr.r.cfg.Metrics.RowsArchived(pr.sweep, pr.p.Name, a)
		}
		if newest != nil {
			pr.after = newest
		}
		if !full {
			pr.out.StopReason = wire.StopExhausted
			return pr.out, nil
		}
		pr.size = nextSize(pr.size, took, s.BatchTarget, s.MinBatchSize, s.MaxBatchSize)
	}
}

// throttle waits while a standby lags past the configured limits, at most until the run's
// deadline. Shutdown ends the wait, and the caller's next stop check says so; a failed lag read is
// the pass's error (a role without pg_monitor, a primary that became a standby).
func (pr *passRun) throttle() error {
	if !pr.r.cfg.Throttle.Enabled() {
		return nil
	}
	waited, err := pr.r.cfg.Throttle.WithLogger(pr.log).Wait(pr.ctx, pr.deadline)
	pr.out.ThrottledMs += waited.Milliseconds()
	pr.r.cfg.Metrics.Throttled(pr.sweep, waited)
	if err != nil && pr.ctx.Err() == nil {
		return fmt.Errorf("read replica lag: %w", err)
	}
	return nil
}

// stop reports why the pass must not start another batch, or "" to go on. Shutdown is checked
// first: a stopping server answers promptly whatever budget is left.
func (pr *passRun) stop(maxBatches int) wire.StopReason {
	switch {
	case pr.ctx.Err() != nil:
		return wire.StopShutdown
	case !pr.r.cfg.Now().Before(pr.deadline):
		return wire.StopBudget
	case pr.out.BatchCount >= maxBatches:
		return wire.StopBatchCap
	case pr.p.MaxRows > 0 && pr.out.Deleted >= int64(pr.p.MaxRows):
		return wire.StopBatchCap
	}
	return ""
}

// batch runs one transaction of the pass and reports the rows it deleted (or keys it processed),
// whether the pass may have more (a short batch ends the pass without an extra empty round trip),
// and, in batched mode, the newest age it deleted: where the next batch resumes.
func (pr *passRun) batch() (n int64, full bool, newest *time.Time, err error) {
	s := pr.r.cfg.Settings
	// The client-side timeout is a backstop for a connection that stops answering; the server's
	// statement timeout fires first in every other case.
	ctx, cancel := context.WithTimeout(pr.db, s.StatementTimeout+5*time.Second)
	defer cancel()
	tx, err := pr.r.cfg.Pool.Begin(ctx)
	if err != nil {
		return 0, false, nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit
	// One round trip for all the settings. synchronous_commit off: a crash loses at most the last
	// batches' deletes, which the next tick repeats; it saves a WAL flush per batch. Not for a
	// pass that archives: its archive may be on another server, whose copy a lost local commit
	// would leave behind, to be archived again by the next tick (archive.go).
	// plan_cache_mode force_custom_plan: the statement is prepared (pgx caches it), and after five
	// runs PostgreSQL may switch to a generic plan, costed without the cutoff or the batch size,
	// which can flip mid-drain to walking the age index from its start (docs/BENCHMARKS.md,
	// "What was tried" 1). Planning a batch costs under a millisecond.
	syncCommit := "off"
	if pr.arch != nil {
		syncCommit = "on"
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true),
		set_config('idle_in_transaction_session_timeout', $3, true), set_config('synchronous_commit', $4, true),
		set_config('plan_cache_mode', 'force_custom_plan', true)`,
		ms(s.StatementTimeout), ms(s.LockTimeout), ms(2*s.StatementTimeout), syncCommit); err != nil {
		return 0, false, nil, fmt.Errorf("set batch timeouts: %w", err)
	}
	// The deleting statements answer the rows deleted, then (batched) the newest age among them,
	// then the rows each delete_with child lost with them.
	counted := make([]any, len(pr.children))
	for i := range pr.children {
		counted[i] = &pr.children[i]
	}
	switch pr.p.Mode {
	case ModeSingle:
		// An archiving pass has no delete_with (validatePass refuses the two together), so its
		// statements answer no children's counts.
		query := pr.st.single
		if pr.arch != nil {
			query = pr.arch.single
		}
		if err := tx.QueryRow(ctx, query, pr.cutoff).Scan(append([]any{&n}, counted...)...); err != nil {
			return 0, false, nil, err
		}
		full = false
	case ModePerRow:
		rows, err := tx.Query(ctx, pr.st.perRow, pr.cutoff)
		if err != nil {
			return 0, false, nil, err
		}
		var processed int64
		for rows.Next() {
			processed++
			var v any
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return 0, false, nil, err
			}
			// A function answering false did nothing (another caller got there first).
			if b, ok := v.(bool); !ok || b {
				n++
			}
		}
		if err := rows.Err(); err != nil {
			return 0, false, nil, err
		}
		full = processed > 0
	default:
		query, after := pr.st.batch, pr.st.batchAfter
		if pr.arch != nil {
			query, after = pr.arch.batch, pr.arch.batchAfter
		}
		args := []any{pr.cutoff, pr.limit}
		if pr.after != nil {
			query, args = after, append(args, *pr.after)
		}
		if err := tx.QueryRow(ctx, query, args...).Scan(append([]any{&n, &newest}, counted...)...); err != nil {
			return 0, false, nil, err
		}
		full = n >= int64(pr.limit)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, false, nil, fmt.Errorf("commit: %w", err)
	}
	return n, full, newest, nil
}

// prepareArchive reads the swept table's columns and writes the run's archive statements with
// them (archive.go): a list read per run, so that a column added to both tables by a migration is
// archived from the next run on, without a restart.
func (pr *passRun) prepareArchive() error {
	ctx, cancel := context.WithTimeout(pr.db, pr.r.cfg.Settings.StatementTimeout)
	defer cancel()
	cols, err := archiveColumns(ctx, pr.r.cfg.Pool, pr.p.Table)
	if err != nil {
		return err
	}
	st := buildArchiveStatements(pr.p, pr.st, cols)
	pr.arch = &st
	return nil
}

// archived is how many of a batch's n deleted rows it archived: all of them, or none for a pass
// without archive_to.
func (pr *passRun) archived(n int64) int64 {
	if pr.arch == nil {
		return 0
	}
	return n
}

func ms(d time.Duration) string { return fmt.Sprintf("%dms", max(d.Milliseconds(), 1)) }

// nextSize moves the batch size toward the size that would have taken target, at most doubling or
// halving per batch so one odd batch (a checkpoint, a cold cache) does not swing it.
func nextSize(size int, took, target time.Duration, lo, hi int) int {
	took = max(took, time.Microsecond)
	ideal := int(float64(size) * float64(target) / float64(took))
	next := min(max(ideal, size/2), size*2)
	if lo > 0 {
		next = max(next, lo)
	}
	if hi > 0 {
		next = min(next, hi)
	}
	return max(next, 1)
}

func firstPositive(vs ...int) int {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return 1
}
