package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/lease"
	"github.com/sweeprail/sweeprail/internal/metrics"
)

// Runner runs the sweeps of one catalog against one database.
type Runner struct {
	pool     *pgxpool.Pool
	specs    []Spec
	stmts    map[string][]statements
	byName   map[string]*Spec
	settings Settings
	logger   *slog.Logger
	metrics  *metrics.Metrics

	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration)
	asOf  func(ctx context.Context) (time.Time, error)
}

// Option changes a Runner; tests use them to inject clocks.
type Option func(*Runner)

// WithClock sets the clock that measures budgets and durations.
func WithClock(now func() time.Time) Option { return func(r *Runner) { r.now = now } }

// WithSleep sets how the runner pauses between batches.
func WithSleep(sleep func(ctx context.Context, d time.Duration)) Option {
	return func(r *Runner) { r.sleep = sleep }
}

// WithAsOf sets where a run's reference time comes from; cutoffs are the reference time minus each
// pass's retention. By default it is the database's now() at the start of the run (the time the
// lease was taken, for a run), so every replica computes the same cutoff whatever its own clock
// says.
func WithAsOf(asOf func(ctx context.Context) (time.Time, error)) Option {
	return func(r *Runner) { r.asOf = asOf }
}

// NewRunner returns a Runner over specs, which the caller has validated. A nil metrics records nothing.
func NewRunner(pool *pgxpool.Pool, specs []Spec, settings Settings, logger *slog.Logger, m *metrics.Metrics, opts ...Option) *Runner {
	r := &Runner{
		pool: pool, specs: specs, stmts: map[string][]statements{}, byName: map[string]*Spec{},
		settings: settings, logger: logger, metrics: m, now: time.Now, sleep: sleepCtx,
	}
	for i := range r.specs {
		s := &r.specs[i]
		r.byName[s.Name] = s
		for _, p := range s.Passes {
			r.stmts[s.Name] = append(r.stmts[s.Name], buildStatements(p))
		}
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (r *Runner) databaseNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := r.pool.QueryRow(ctx, "SELECT now()").Scan(&now)
	return now, err
}

// Specs returns the catalog, in order.
func (r *Runner) Specs() []Spec { return r.specs }

// Settings returns the bounds every run obeys.
func (r *Runner) Settings() Settings { return r.settings }

// LeaseTTL is how long a run's lease lasts: twice the budget, so a live run never loses its lease
// (a run overruns its budget by at most one batch), and a crashed one blocks its sweep for at most
// that long.
func (r *Runner) LeaseTTL() time.Duration { return 2 * r.settings.Deadline }

// Run runs the sweep name once. Cancelling ctx asks the run to stop between batches with
// StopShutdown; a statement in flight is never cut by it. The error is ErrUnknownSweep for a name
// the catalog does not hold; database failures are reported in the Result as batch-error.
func (r *Runner) Run(ctx context.Context, name string, opts Options) (*Result, error) {
	spec, ok := r.byName[name]
	if !ok {
		return nil, fmt.Errorf("run %q: %w", name, ErrUnknownSweep)
	}
	start := r.now()
	runID, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("run %q: new run id: %w", name, err)
	}
	res := &Result{Sweep: name, RunID: runID.String(), Passes: []PassResult{}}
	log := r.logger.With("sweep", name, "run_id", res.RunID)
	// Database work is detached from ctx: shutdown is honoured between batches, and cutting a
	// statement would only roll back work that the statement timeout already bounds.
	db := context.WithoutCancel(ctx)

	defer func() {
		end := r.now()
		res.DurationMs = end.Sub(start).Milliseconds()
		outcome := string(res.StopReason)
		if res.Skipped {
			outcome = OutcomeSkipped
		}
		r.metrics.Run(name, outcome, end.Sub(start), !res.Skipped && !res.Failed(), end)
		log.Info("sweep run", "stop_reason", res.StopReason, "skipped", res.Skipped, "deleted", res.Deleted,
			"batches", res.BatchCount, "truncated", res.Truncated, "duration_ms", res.DurationMs)
	}()

	acquireCtx, cancel := context.WithTimeout(db, r.settings.StatementTimeout)
	l, err := lease.Acquire(acquireCtx, r.pool, name, r.LeaseTTL())
	cancel()
	if errors.Is(err, lease.ErrHeld) {
		res.Skipped, res.StopReason = true, StopLeaseHeld
		return res, nil
	}
	if err != nil {
		res.StopReason, res.Error = StopBatchError, errorInfo(err, "")
		return res, nil
	}
	defer func() {
		releaseCtx, cancel := context.WithTimeout(db, r.settings.StatementTimeout)
		defer cancel()
		if released, err := lease.Release(releaseCtx, r.pool, l); err != nil {
			log.Error("release lease", "err", err)
		} else if !released {
			log.Warn("lease was gone at release: the run outlived its TTL or it was cleared by hand", "ttl", r.LeaseTTL())
		}
	}()

	deadline := start.Add(r.settings.Deadline)
	ref := l.LockedAt
	if r.asOf != nil {
		if ref, err = r.asOf(db); err != nil {
			res.StopReason, res.Error = StopBatchError, errorInfo(fmt.Errorf("read reference time: %w", err), "")
			return res, nil
		}
	}
	// In UTC, so that a cutoff bound to a timestamp-without-time-zone column means the same
	// whatever the process's local zone is.
	ref = ref.UTC()
	res.StopReason = StopExhausted
	for i, p := range spec.Passes {
		pr, perr := r.runPass(ctx, db, log, name, p, r.stmts[name][i], ref.Add(-p.Retention), deadline, opts)
		res.Passes = append(res.Passes, pr)
		res.Deleted += pr.Deleted
		res.BatchCount += pr.BatchCount
		if pr.StopReason.severity() > res.StopReason.severity() {
			res.StopReason = pr.StopReason
		}
		res.Truncated = res.Truncated || pr.StopReason.truncates()
		if perr != nil {
			log.Error("batch failed", "pass", p.Name, "err", perr)
			if res.Error == nil {
				res.Error = errorInfo(perr, p.Name)
			}
		}
	}
	return res, nil
}

// stop reports why the pass must not start another batch, or "" to go on. Shutdown is checked
// first: a stopping server answers promptly whatever budget is left.
func (r *Runner) stop(ctx context.Context, deadline time.Time, batches, maxBatches int) StopReason {
	switch {
	case ctx.Err() != nil:
		return StopShutdown
	case !r.now().Before(deadline):
		return StopBudget
	case batches >= maxBatches:
		return StopBatchCap
	}
	return ""
}

func (r *Runner) runPass(ctx, db context.Context, log *slog.Logger, sweep string, p Pass, st statements, cutoff, deadline time.Time, opts Options) (PassResult, error) {
	pr := PassResult{Pass: p.Name}
	// after is where the next batch resumes: the newest age deleted so far (nil before the first
	// batch). Rows older than it that a batch skipped (locked by someone else) wait for the next run.
	var after *time.Time
	size := firstPositive(opts.BatchSize, p.BatchSize, r.settings.BatchSize)
	maxBatches := firstPositive(p.MaxBatches, r.settings.MaxBatches)
	for {
		// The pause comes before the checks, so a batch never starts after the budget or a
		// shutdown that the pause ran into.
		// A pause never outlasts the budget: the answer must still beat the server's write timeout.
		if pr.BatchCount > 0 && r.settings.Pause > 0 {
			if left := deadline.Sub(r.now()); left > 0 {
				r.sleep(ctx, min(r.settings.Pause, left))
			}
		}
		if reason := r.stop(ctx, deadline, pr.BatchCount, maxBatches); reason != "" {
			pr.StopReason = reason
			return pr, nil
		}
		began := r.now()
		n, full, newest, err := r.batch(db, p, st, cutoff, size, after)
		took := r.now().Sub(began)
		pr.BatchCount++
		r.metrics.Batch(sweep, took)
		// Each batch's size and duration, at debug level: the metric's histogram only buckets
		// them, and tuning BATCH_TARGET (or make bench's p99 and longest transaction) needs them.
		log.Debug("sweep batch", "pass", p.Name, "batch", pr.BatchCount, "size", size, "deleted", n,
			"took_ms", float64(took.Microseconds())/1000, "failed", err != nil)
		if err != nil {
			pr.StopReason = StopBatchError
			return pr, fmt.Errorf("delete batch: %w", err)
		}
		pr.Deleted += n
		r.metrics.RowsDeleted(sweep, p.Name, n)
		if newest != nil {
			after = newest
		}
		if !full {
			pr.StopReason = StopExhausted
			return pr, nil
		}
		size = nextSize(size, took, r.settings.BatchTarget, r.settings.MinBatchSize, r.settings.MaxBatchSize)
	}
}

// batch runs one transaction of pass p and reports the rows it deleted (or keys it processed),
// whether the pass may have more (a short batch ends the pass without an extra empty round trip),
// and, in batched mode, the newest age it deleted: where the next batch resumes.
func (r *Runner) batch(db context.Context, p Pass, st statements, cutoff time.Time, size int, after *time.Time) (n int64, full bool, newest *time.Time, err error) {
	// The client-side timeout is a backstop for a connection that stops answering; the server's
	// statement timeout fires first in every other case.
	ctx, cancel := context.WithTimeout(db, r.settings.StatementTimeout+5*time.Second)
	defer cancel()
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return 0, false, nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit
	// One round trip for all the settings. synchronous_commit off: a crash loses at most the last
	// batches' deletes, which the next tick repeats; it saves a WAL flush per batch.
	// plan_cache_mode force_custom_plan: the statement is prepared (pgx caches it), and after five
	// runs PostgreSQL may switch to a generic plan, costed without the cutoff or the batch size.
	// make bench caught that plan flipping mid-drain from the sequential scan to the age index
	// walked from its start, which then re-reads every index entry the earlier batches deleted;
	// forcing custom plans took the rail from 0.72M to 0.90M rows/s and its longest batch from
	// 170 to 110 ms, side by side (docs/BENCHMARKS.md). Planning a batch costs under a millisecond.
	if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true),
		set_config('idle_in_transaction_session_timeout', $3, true), set_config('synchronous_commit', 'off', true),
		set_config('plan_cache_mode', 'force_custom_plan', true)`,
		ms(r.settings.StatementTimeout), ms(r.settings.LockTimeout), ms(2*r.settings.StatementTimeout)); err != nil {
		return 0, false, nil, fmt.Errorf("set batch timeouts: %w", err)
	}
	switch p.Mode {
	case ModeSingle:
		tag, err := tx.Exec(ctx, st.single, cutoff)
		if err != nil {
			return 0, false, nil, err
		}
		n, full = tag.RowsAffected(), false
	case ModePerRow:
		rows, err := tx.Query(ctx, st.perRow, cutoff)
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
		query, args := st.batch, []any{cutoff, size}
		if after != nil {
			query, args = st.batchAfter, append(args, *after)
		}
		if err := tx.QueryRow(ctx, query, args...).Scan(&n, &newest); err != nil {
			return 0, false, nil, err
		}
		full = n >= int64(size)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, false, nil, fmt.Errorf("commit: %w", err)
	}
	return n, full, newest, nil
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

// errorInfo turns an error into the answer's error object: a PostgreSQL error by its SQLSTATE,
// anything else by a short name of what failed.
func errorInfo(err error, pass string) *ErrorInfo {
	info := &ErrorInfo{Code: "internal", Message: err.Error(), Pass: pass}
	var pgErr *pgconn.PgError
	var netErr net.Error
	switch {
	case errors.As(err, &pgErr):
		info.Code = pgErr.Code
	case errors.Is(err, context.DeadlineExceeded):
		info.Code = "timeout"
	case errors.As(err, &netErr), pgconn.SafeToRetry(err), isConnectError(err):
		info.Code = "connection"
	}
	return info
}

func isConnectError(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || errors.Is(err, pgx.ErrTxClosed)
}
