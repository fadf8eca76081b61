package sweep

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/replica"
	"github.com/sweeprail/sweeprail/internal/statement"
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
	p     policy.Pass
	st    statement.Set
	// kind is the type of the age column st was built for (a partitions pass builds its leaf
	// partitions' statements for it).
	kind     statement.Kind
	cutoff   time.Time
	deadline time.Time
	opts     Options

	out wire.PassResult
	// conn is the connection the pass's batches run on, one for the whole pass: released to the
	// pool (which resets its session) when the pass ends, not after every batch, whose reset
	// would cost a round trip and the server's time per batch.
	conn *pgxpool.Conn
	// arch are the statements that move the rows, for a pass with archive_to; nil otherwise.
	arch *statement.Archive
	// heal are the statements that heal the archive's crash window, for an archive pass whose
	// table has a primary key of one column; healing says a batch runs them.
	heal                 *statement.Heal
	healing              bool
	healKey, healKeyType string
	// path is the pass's access path, chosen at its start (batched passes) or its mode's.
	path Path
	// size is the next batch's size in rows, adapted after each full batch (on the heap path,
	// the rows its next range is expected to hold); limit is the rows the next batch may delete:
	// size, or what max_rows leaves when that is less.
	size, limit int
	// children are the rows of each delete_with child the last batch deleted.
	children []int64
	// cascade counts what the schema's ON DELETE keys did, for a pass with cascades; nil otherwise.
	cascade *cascadeCounter
	// index is where an index-path pass stands.
	index keyset
	// heap is where a heap-path pass stands.
	heap heapRange
}

// batchResult is what one batch did.
type batchResult struct {
	// n is the rows deleted (or keys processed, per-row).
	n int64
	// more is whether the pass may have more to do: a short batch of rows ends the pass without
	// an extra empty round trip; the heap path ends at its last block.
	more bool
	// newest is the newest age an index-path batch deleted: where the next one resumes.
	newest any
	// blocks is the length of a heap-path batch's range.
	blocks uint32
	// retried says the batch's first attempt met a held row lock and it ran again, locking.
	retried bool
	// archived is the rows the archive reported taking, for a pass with archive_to; recovered
	// the rows a healing batch found there already, identical (archiveheal.go).
	archived, recovered int64
	// heldKeys and heldRows are the rows a healing batch found in the archive, as text; keys
	// the keys a foreign archive's batch deleted, for its count (archiveproof.go).
	heldKeys, heldRows, keys []string
}

// run deletes the pass's eligible rows batch by batch until none are left, or the budget, the
// batch cap, a shutdown or a failed batch stops it. The error is the failed batch's.
func (pr *passRun) run() (wire.PassResult, error) {
	defer pr.releaseConn()
	s := pr.r.cfg.Settings
	pr.out = wire.PassResult{Pass: pr.p.Name, Children: childRows(pr.p.DeleteWith, make([]int64, len(pr.p.DeleteWith)))}
	pr.children = make([]int64, len(pr.p.DeleteWith))
	pr.size = firstPositive(pr.opts.BatchSize, pr.p.BatchSize, s.BatchSize)
	maxBatches := firstPositive(pr.p.MaxBatches, s.MaxBatches)
	if pr.p.ArchiveTo != "" {
		if err := pr.prepareArchive(); err != nil {
			pr.out.StopReason = wire.StopBatchError
			return pr.out, fmt.Errorf("prepare the archive: %w", err)
		}
	}
	if err := pr.prepareCascades(); err != nil {
		pr.out.StopReason = wire.StopBatchError
		return pr.out, fmt.Errorf("read the tables of cascades: %w", err)
	}
	if err := pr.choosePath(); err != nil {
		pr.out.StopReason = wire.StopBatchError
		return pr.out, err
	}
	for {
		if pr.path == PathHeap && pr.heap.done() {
			pr.out.StopReason = wire.StopExhausted
			return pr.out, nil
		}
		// The pause comes before the checks, so a batch never starts after the budget or a
		// shutdown that the pause ran into. A pause never outlasts the budget: the answer must
		// still beat the server's write timeout.
		if pr.out.BatchCount > 0 && s.Pause > 0 {
			// A wait gives the connection back: others may need it meanwhile.
			pr.releaseConn()
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
			// The cap is exact whatever size adaptive sizing reached: the last batch shrinks (a
			// heap-path batch deletes at most what the cap leaves, whatever its range holds).
			left := int64(pr.p.MaxRows) - pr.out.Deleted
			pr.limit = int(min(int64(pr.size), left))
			if pr.path == PathHeap {
				pr.limit = int(min(left, math.MaxInt32))
			}
		}
		began := pr.r.cfg.Now()
		_, span := pr.r.cfg.Tracing.StartBatch(pr.ctx, string(pr.path), pr.limit)
		b, err := pr.batch()
		took := pr.r.cfg.Now().Sub(began)
		deleted, processed := b.n, int64(0)
		if pr.p.Mode == policy.ModePerRow {
			deleted, processed = 0, b.n
		}
		span.End(trace.Result{Rows: deleted, Processed: processed, Archived: pr.archived(b), Duration: took, Err: err})
		pr.out.BatchCount++
		if b.retried {
			pr.out.LockRetries++
		}
		pr.r.cfg.Metrics.Batch(pr.sweep, took)
		// Each batch's size and duration, at debug level: the metric's histogram only buckets
		// them, and tuning BATCH_TARGET (or make bench's p99 and longest transaction) needs them.
		pr.log.Debug("sweep batch", "pass", pr.p.Name, "batch", pr.out.BatchCount, "path", pr.path, "size", pr.limit,
			"blocks", b.blocks, "deleted", deleted, "processed", processed, "archived", pr.archived(b), "took_ms", float64(took.Microseconds())/1000,
			"retried", b.retried, "failed", err != nil)
		if err != nil {
			pr.out.StopReason = wire.StopBatchError
			return pr.out, fmt.Errorf("delete batch: %w", err)
		}
		pr.out.Deleted += deleted
		pr.out.Processed += processed
		pr.r.cfg.Metrics.RowsProcessed(pr.sweep, pr.p.Name, pr.p.Table, processed)
		pr.out.Recovered += b.recovered
		for i, c := range pr.children {
			pr.out.Children[i].Rows += c
		}
		pr.countRows(deleted)
		if a := pr.archived(b); a > 0 {
			pr.out.Archived += a
			pr.r.cfg.Metrics.RowsArchived(pr.sweep, pr.p.Name, a)
		}
		pr.index.advance(b.newest)
		if !b.more {
			pr.out.StopReason = wire.StopExhausted
			return pr.out, nil
		}
		pr.adapt(b, took)
	}
}

// choosePath sets the pass's path (Runner.pathOf) and, on the heap path, its first range.
func (pr *passRun) choosePath() error {
	path, sv, err := pr.r.pathOf(pr.db, pr.p, pr.st, pr.cutoff)
	if err != nil {
		return err
	}
	pr.path = path
	if pr.path == PathHeap {
		pr.heap = newHeapRange(sv, pr.size)
		if pr.r.cfg.heapBlocks > 0 {
			pr.heap.blocks = pr.r.cfg.heapBlocks
		}
		pr.size = int(math.Round(float64(pr.heap.blocks) * sv.total / float64(max(sv.blocks, 1))))
	}
	pr.out.Path = string(pr.path)
	return nil
}

// adapt sizes the next batch after a full one that took took.
func (pr *passRun) adapt(b batchResult, took time.Duration) {
	s := pr.r.cfg.Settings
	if pr.path != PathHeap {
		pr.size = nextSize(pr.size, took, s.BatchTarget, s.MinBatchSize, s.MaxBatchSize)
		return
	}
	if pr.r.cfg.heapBlocks > 0 {
		return
	}
	pr.heap.adapt(b.n, b.blocks, took, s.BatchTarget, s.MinBatchSize, s.MaxBatchSize)
	if pr.heap.visited > 0 {
		pr.size = int(math.Round(float64(pr.heap.blocks) * float64(pr.heap.deleted) / float64(pr.heap.visited)))
	}
}

// throttle waits while a standby lags past the configured limits, at most until the run's
// deadline. Shutdown ends the wait, and the caller's next stop check says so. A lag read that
// fails is a *lagError, which stops the run: without the lag the limits cannot be kept, and a
// batch run blind is the WAL burst they hold back (a role that lost pg_monitor, a primary that
// became a standby, a read that timed out).
func (pr *passRun) throttle() error {
	if !pr.r.cfg.Throttle.Enabled() {
		return nil
	}
	// The lag is read from the pool, and the wait may be long: the pass's connection goes back
	// first, or a pool of one connection would wait on itself.
	pr.releaseConn()
	waited, err := pr.r.cfg.Throttle.WithLogger(pr.log).Wait(pr.ctx, pr.deadline)
	pr.out.ThrottledMs += waited.Milliseconds()
	pr.r.cfg.Metrics.Throttled(pr.sweep, waited)
	if err != nil && pr.ctx.Err() == nil {
		return &lagError{limits: pr.r.cfg.Throttle.Limits(), err: err}
	}
	return nil
}

// lagError is a failed read of the replica lag before a batch. The run stops at it: the passes
// after it would run their batches against the same standbys, and no batch starts blind.
type lagError struct {
	limits replica.Limits
	err    error
}

func (e *lagError) Error() string {
	var limits []string
	if e.limits.MaxLag > 0 {
		limits = append(limits, "MAX_REPLICA_LAG "+e.limits.MaxLag.String())
	}
	if e.limits.MaxLagBytes > 0 {
		limits = append(limits, fmt.Sprintf("MAX_REPLICA_LAG_BYTES %d", e.limits.MaxLagBytes))
	}
	return fmt.Sprintf("no batch runs while the replica lag cannot be read (%s): %v", strings.Join(limits, ", "), e.err)
}

func (e *lagError) Unwrap() error { return e.err }

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

// batch runs one batch of the pass. A batch of the heap or index path first runs without row
// locks under the short rowLockTimeout; if that attempt meets a row another transaction holds, it
// is rolled back and run once more in the locking form, which skips held rows, under the full
// lock timeout. Either way the pass goes on.
func (pr *passRun) batch() (batchResult, error) {
	switch pr.path {
	case PathHeap, PathIndex:
	default:
		var b batchResult
		attempt := func() error {
			return pr.inTx(pr.r.cfg.Settings.LockTimeout, false, func(ctx context.Context, tx pgx.Tx) (err error) {
				b, err = pr.modeBatch(ctx, tx)
				return err
			})
		}
		err := pr.healed(attempt(), attempt)
		return b, err
	}
	s := pr.r.cfg.Settings
	var from, to uint32
	if pr.path == PathHeap {
		from, to = pr.heap.take()
	}
	attempt := func(lockTimeout time.Duration, lock bool) (b batchResult, err error) {
		err = pr.inTx(lockTimeout, pr.path == PathIndex, func(ctx context.Context, tx pgx.Tx) (err error) {
			if pr.path == PathHeap {
				b, err = pr.heapBatch(ctx, tx, from, to, lock)
			} else {
				b, err = pr.indexBatch(ctx, tx, lock)
			}
			return err
		})
		return b, err
	}
	first := min(s.LockTimeout, cmp.Or(pr.r.cfg.rowLockWait, rowLockTimeout))
	b, err := attempt(first, pr.r.cfg.alwaysLock)
	if err != nil && !pr.r.cfg.alwaysLock && isRowLockConflict(err) {
		pr.log.Debug("sweep batch met a held row lock: retrying it, skipping held rows", "pass", pr.p.Name, "err", err)
		b, err = attempt(s.LockTimeout, true)
		b.retried = true
	}
	retried := b.retried
	err = pr.healed(err, func() (err error) {
		b, err = attempt(s.LockTimeout, retried || pr.r.cfg.alwaysLock)
		return err
	})
	b.retried = b.retried || retried
	return b, err
}

// batchForm is the batch statements of the form a batch runs (lock: the locking one), moving
// the rows for a pass that archives.
func (pr *passRun) batchForm(lock bool) statement.Batch {
	switch {
	case pr.healing && lock:
		return pr.heal.Locked
	case pr.healing:
		return pr.heal.Unlocked
	case pr.arch != nil && lock:
		return pr.arch.Locked
	case pr.arch != nil:
		return pr.arch.Unlocked
	case lock:
		return pr.st.Locked
	}
	return pr.st.Unlocked
}

// answer is where a batch statement's answer goes: the rows deleted, the newest age among them,
// then each delete_with child's rows.
func (pr *passRun) answer(b *batchResult) []any {
	dest := []any{&b.n, &b.newest}
	if pr.arch != nil {
		return append(dest, pr.archiveAnswer(b)...)
	}
	for i := range pr.children {
		dest = append(dest, &pr.children[i])
	}
	return dest
}

// heapBatch deletes the eligible rows of the blocks [from, to): all of them, or at most limit for
// a pass with max_rows. The newest age it answers is not a cursor: the range is.
func (pr *passRun) heapBatch(ctx context.Context, tx pgx.Tx, from, to uint32, lock bool) (b batchResult, err error) {
	form := pr.batchForm(lock).Heap
	args := form.Params.Bind(statement.Args{Cutoff: pr.cutoff, FirstBlock: from, EndBlock: to, Limit: pr.limit})
	b.blocks, b.more = to-from, !pr.heap.done()
	if !form.Answer.Row {
		tag, err := tx.Exec(ctx, form.SQL, args...)
		if err != nil {
			return batchResult{}, err
		}
		b.n = tag.RowsAffected()
		return b, nil
	}
	if err := tx.QueryRow(ctx, form.SQL, args...).Scan(pr.answer(&b)...); err != nil {
		return batchResult{}, err
	}
	b.newest = nil
	return pr.proven(ctx, tx, b)
}

// modeBatch runs one batch of a single-mode pass (every eligible row, one statement) or of a
// per-row pass (one key, its function called).
func (pr *passRun) modeBatch(ctx context.Context, tx pgx.Tx) (b batchResult, err error) {
	if pr.p.Mode == policy.ModeSingle {
		// An archiving pass has no delete_with (validatePass refuses the two together), so its
		// statements answer no children's counts.
		query, dest := pr.st.Single.SQL, []any{&b.n}
		if pr.arch != nil {
			query, dest = pr.arch.Single.SQL, append(dest, pr.archiveAnswer(&b)...)
		}
		if pr.healing {
			query = pr.heal.Single.SQL
		}
		for i := range pr.children {
			dest = append(dest, &pr.children[i])
		}
		if err := tx.QueryRow(ctx, query, pr.cutoff).Scan(dest...); err != nil {
			return batchResult{}, err
		}
		return pr.proven(ctx, tx, b)
	}
	rows, err := tx.Query(ctx, pr.st.PerRow.SQL, pr.cutoff)
	if err != nil {
		return b, err
	}
	defer rows.Close()
	var processed int64
	for rows.Next() {
		processed++
		var v any
		if err := rows.Scan(&v); err != nil {
			return batchResult{}, err
		}
		// A function answering false did nothing (another caller got there first).
		if ok, isBool := v.(bool); !isBool || ok {
			b.n++
		}
	}
	if err := rows.Err(); err != nil {
		return batchResult{}, err
	}
	b.more = processed > 0
	return b, nil
}

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
