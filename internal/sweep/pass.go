package sweep

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/pace"
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

	// of is the sweep and run the pass belongs to, as its metrics and batch records name them.
	of runKey
	// p is the pass as its answers, metrics and logs name it; sql the same naming its tables as
	// its statements and catalog reads do, schema-qualified as the policy check resolved them.
	p, sql policy.Pass
	st     statement.Set
	// kind is the type of the age column st was built for (a partitions pass builds its leaf
	// partitions' statements for it).
	kind     statement.Kind
	cutoff   time.Time
	deadline time.Time

	out wire.PassResult
	// conn is the connection the pass's batches run on, one for the whole pass: released to the
	// pool (which resets its session) when the pass ends, not after every batch, whose reset
	// would cost a round trip and the server's time per batch.
	conn *pgxpool.Conn
	// searchPath is the search_path the pass's first batch computed, pg_temp last, which the
	// batches after it set as it is (statement.BatchTransaction.SearchPath).
	searchPath string
	// aids are what goes along with each batch of the pass.
	aids batchAids
	// at is where the pass stands on its access path, and the size of its next batch.
	at position
}

// batchAids are what goes along with each batch of a pass, each nil where the pass has no use
// for it.
type batchAids struct {
	// arch moves the rows, for a pass with archive_to.
	arch *archiver
	// cascade counts what the schema's ON DELETE keys did, for a pass with cascades.
	cascade *cascadeCounter
	// pacing holds the pass to the pacer's budgets, where they are on.
	pacing *pace.Pass
}

// runKey names the run a pass belongs to: its sweep, its id, and the batches its pass ran before
// this passRun's first (a partitions pass runs its leaves one after another), from which each
// batch's record is numbered.
type runKey struct {
	sweep, id string
	batchBase int
}

// run deletes the pass's eligible rows batch by batch until none are left, or the budget, the
// batch cap, a shutdown or a failed batch stops it. The error is the failed batch's.
func (pr *passRun) run() (wire.PassResult, error) {
	defer pr.releaseConn()
	pr.out = wire.PassResult{Pass: pr.p.Name, Children: childRows(pr.p.DeleteWith, make([]int64, len(pr.p.DeleteWith)))}
	pr.aids.pacing = pr.r.cfg.Pacer.Pass(pr.log)
	if err := pr.prepare(); err != nil {
		pr.out.StopReason = wire.StopBatchError
		return pr.out, err
	}
	maxBatches := firstPositive(pr.p.MaxBatches, pr.r.cfg.Settings.MaxBatches)
	for {
		if pr.at.path == PathHeap && pr.at.heap.done() {
			pr.out.StopReason = wire.StopExhausted
			return pr.out, nil
		}
		if reason, err := pr.wait(maxBatches); reason != "" {
			pr.out.StopReason = reason
			return pr.out, err
		}
		b, took, err := pr.recordedBatch()
		if err != nil {
			pr.settled(b, err)
			pr.out.StopReason = wire.StopBatchError
			return pr.out, fmt.Errorf("delete batch: %w", err)
		}
		lost := pr.readBack(&b)
		pr.tally(b)
		if lost != nil {
			pr.out.StopReason = wire.StopBatchError
			return pr.out, lost
		}
		if !b.more {
			pr.out.StopReason = wire.StopExhausted
			return pr.out, nil
		}
		pr.adapt(b, took)
	}
}

// prepare reads what the pass's batches need before the first: its archive's statements, its
// cascades' tables, and its access path.
func (pr *passRun) prepare() error {
	if pr.p.ArchiveTo != "" {
		ctx, cancel := context.WithTimeout(pr.db, pr.r.cfg.Settings.StatementTimeout)
		arch, err := newArchiver(ctx, pr.r.cfg.Pool, pr.p, pr.sql, pr.kind, pr.log)
		cancel()
		if err != nil {
			return fmt.Errorf("prepare the archive: %w", err)
		}
		pr.aids.arch = arch
	}
	if err := pr.prepareCascades(); err != nil {
		return fmt.Errorf("read the tables of cascades: %w", err)
	}
	return pr.choosePath()
}

// wait pauses between batches and waits out the replicas' lag, then says why the pass must not
// start another batch, or "" to go on; a lag that cannot be read is batch-error, with its error.
func (pr *passRun) wait(maxBatches int) (wire.StopReason, error) {
	s := pr.r.cfg.Settings
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
		return reason, nil
	}
	if err := pr.throttle(); err != nil {
		return wire.StopBatchError, err
	}
	if reason, err := pr.pace(); reason != "" {
		return reason, err
	}
	// Checked again after a wait: a run that spent its budget waiting stops with budget.
	return pr.stop(maxBatches), nil
}

// args are the next batch's arguments: the cutoff, and the rows it may delete, its size or what
// max_rows leaves when that is less. The cap is exact whatever size adaptive sizing reached: a
// heap-path batch deletes at most what the cap leaves, whatever its range holds.
func (pr *passRun) args() statement.Args {
	limit := pr.at.size
	if pr.p.MaxRows > 0 {
		left := int64(pr.p.MaxRows) - pr.out.Deleted
		limit = int(min(int64(pr.at.size), left))
		if pr.at.path == PathHeap {
			limit = int(min(left, math.MaxInt32))
		}
	}
	return statement.Args{Cutoff: pr.cutoff, Limit: limit}
}

// recordedBatch runs the next batch under its span, and records it: the batch count and its
// retry, the duration metric, and a debug line.
func (pr *passRun) recordedBatch() (batchResult, time.Duration, error) {
	a := pr.args()
	began := pr.r.cfg.Now()
	_, span := pr.r.cfg.Tracing.StartBatch(pr.ctx, string(pr.at.path), a.Limit)
	b, err := pr.batch(a)
	took := pr.r.cfg.Now().Sub(began)
	deleted, processed := pr.rows(b)
	span.End(trace.Result{Rows: deleted, Processed: processed, Archived: pr.aids.arch.archived(b), Duration: took, Err: err})
	pr.out.BatchCount++
	if b.retried {
		pr.out.LockRetries++
	}
	pr.r.cfg.Metrics.Batch(pr.of.sweep, took)
	// Each batch's size and duration, at debug level: the metric's histogram only buckets
	// them, and tuning BATCH_TARGET (or make bench's p99 and longest transaction) needs them.
	pr.log.Debug("sweep batch", "pass", pr.p.Name, "batch", pr.out.BatchCount, "path", pr.at.path, "size", a.Limit,
		"blocks", b.blocks, "deleted", deleted, "processed", processed, "archived", pr.aids.arch.archived(b), "took_ms", float64(took.Microseconds())/1000,
		"retried", b.retried, "failed", err != nil)
	return b, took, err
}

// rows are the rows batch b deleted and the keys it processed: a per-row pass's function
// processes keys, whatever it does with them.
func (pr *passRun) rows(b batchResult) (deleted, processed int64) {
	if pr.p.Mode == policy.ModePerRow {
		return 0, b.n
	}
	return b.n, 0
}

// tally adds a committed batch to the pass's answer and metrics, and moves its cursor.
func (pr *passRun) tally(b batchResult) {
	deleted, processed := pr.rows(b)
	pr.out.Deleted += deleted
	pr.out.Processed += processed
	pr.r.cfg.Metrics.RowsProcessed(pr.of.sweep, pr.p.Name, pr.p.Table, processed)
	pr.out.Recovered += b.recovered
	for i, c := range b.children {
		pr.out.Children[i].Rows += c
	}
	pr.countRows(deleted, b.children)
	pr.aids.pacing.Batch(b.n)
	if a := pr.aids.arch.archived(b); a > 0 {
		pr.out.Archived += a
		pr.r.cfg.Metrics.RowsArchived(pr.of.sweep, pr.p.Name, a)
	}
	pr.at.index.advance(b.newest)
}

// choosePath sets the pass's path (Runner.pathOf) and, on the heap path, its first range.
func (pr *passRun) choosePath() error {
	path, sv, err := pr.r.pathOf(pr.db, pr.sql, pr.st, pr.cutoff)
	if err != nil {
		return err
	}
	pr.at.path = path
	if path == PathHeap {
		pr.at.heap = newHeapRange(sv, pr.at.size)
		if pr.r.cfg.heapBlocks > 0 {
			pr.at.heap.blocks = pr.r.cfg.heapBlocks
		}
		pr.at.size = int(math.Round(float64(pr.at.heap.blocks) * sv.total / float64(max(sv.blocks, 1))))
	}
	pr.out.Path = string(path)
	return nil
}

// adapt sizes the next batch after a full one that took took, less its wait for its WAL flush:
// a commit that waits for it (BATCH_SYNC_COMMIT) waits as long for a hundred rows as for a
// thousand, and counted in, a flush near the target would shrink every batch to the least
// size, on a disk slower to flush than the target for good.
func (pr *passRun) adapt(b batchResult, took time.Duration) {
	took -= b.committing
	s := pr.r.cfg.Settings
	// The WAL rate caps a batch at the rows whose WAL fits the pacer's burst.
	hi := max(s.MinBatchSize, pr.aids.pacing.MaxRows(s.MaxBatchSize))
	if pr.at.path != PathHeap {
		pr.at.size = nextSize(pr.at.size, took, s.BatchTarget, s.MinBatchSize, hi)
		return
	}
	if pr.r.cfg.heapBlocks > 0 {
		return
	}
	h := &pr.at.heap
	h.adapt(b.n, b.blocks, took, s.BatchTarget, s.MinBatchSize, hi)
	if h.visited > 0 {
		pr.at.size = int(math.Round(float64(h.blocks) * float64(h.deleted) / float64(h.visited)))
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
	began := pr.r.cfg.Now()
	waited, err := pr.r.cfg.Throttle.WithLogger(pr.log).Wait(pr.ctx, pr.deadline)
	pr.throttled(pace.CauseReplicaLag, began, waited)
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
