package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/lease"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/pace"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/replica"
	"github.com/sweeprail/sweeprail/internal/statement"
	"github.com/sweeprail/sweeprail/internal/trace"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// Config is everything a Runner is built from. Pool, Specs and Settings are required; the rest
// have defaults.
type Config struct {
	// Pool is the database the sweeps run against.
	Pool *pgxpool.Pool
	// Specs is the catalog, statically valid (Validate); NewRunner refuses it otherwise.
	Specs []policy.Spec
	// Settings bound every run; NewRunner refuses a zero deadline, timeout or batch size.
	Settings Settings
	// Logger receives a line per run (and per batch at debug level); nil discards.
	Logger *slog.Logger
	// Metrics records runs, batches and rows; nil records nothing.
	Metrics *metrics.Metrics
	// Tracing records spans run → pass → batch; nil records nothing.
	Tracing *trace.Tracing
	// History records every run, skipped and failed ones included, and prunes itself; nil
	// records nothing.
	History *history.Store
	// Throttle holds each batch back while a standby lags past its limits, never past the run's
	// budget; nil (or one whose limits are off) never waits.
	Throttle *replica.Throttle
	// Pacer holds each batch to the WAL rate and the active sessions' limits, never past the
	// run's budget; nil (or one whose limits are off) never reads or waits.
	Pacer *pace.Pacer
	// Now is the clock that measures budgets and durations; nil is time.Now.
	Now func() time.Time
	// Sleep pauses between batches until d passes or ctx is done; nil sleeps on a timer.
	Sleep func(ctx context.Context, d time.Duration)
	// AsOf gives a run's reference time; cutoffs are the reference time minus each pass's
	// retention. Nil is the database's now() at the start of the run (the time the lease was
	// taken, for a run), so every replica computes the same cutoff whatever its own clock says.
	AsOf func(ctx context.Context) (time.Time, error)
	// Names are the tables the policy check resolved (check.Names), which every statement names;
	// nil resolves them, the same way, at the first run or dry run.
	Names statement.Names
	// AccessPath, when PathHeap or PathIndex, makes every batched pass take that path wherever
	// it can run (the heap path needs a plain table); empty chooses per pass and run from the
	// planner's estimate of the eligible share. For benchmarks and tests: the choice is measured.
	AccessPath Path
	// Proofs are the fingerprints of the passes the boot's check proved (check.Prove): each
	// pass compares its catalog with its own before its first batch, and is checked again when
	// it changed. Nil compares nothing: the boot's check is trusted for the process's life.
	Proofs *check.Proofs

	// Test knobs (export_test.go): heapBlocks fixes the heap path's range in blocks; rowLockWait
	// replaces rowLockTimeout; alwaysLock runs every batch in the locking form.
	heapBlocks  uint32
	rowLockWait time.Duration
	alwaysLock  bool
}

// Runner runs the sweeps of one catalog against one database.
type Runner struct {
	cfg Config
	// names holds each pass's statements for each kind of age column, naming the tables as
	// resolved; a run picks the kind the catalog has (statementsFor).
	names  resolvedNames
	byName map[string]*policy.Spec
	// halts are the halts of sweeps whose archive lost rows that the history does not hold yet
	// (archivelost.go): all of them for a runner without a history.
	haltMu sync.Mutex
	halts  map[string]history.Halt
	// begins holds each batch transaction's rendered BEGIN (statement.BatchTransaction to
	// string): a pass's batches begin alike, and rendering the template per batch took 7% of
	// the API's CPU at a few hundred batches a second.
	begins sync.Map
}

// NewRunner returns a Runner built from cfg, or an error naming every field that would make a run
// fail midway: a missing pool, a zero deadline or timeout, a batch size out of its bounds, specs
// that do not validate.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("new runner: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleepCtx
	}
	cfg.Specs = policy.Normalize(cfg.Specs)
	r := &Runner{cfg: cfg, byName: map[string]*policy.Spec{}, halts: map[string]history.Halt{}}
	for i := range r.cfg.Specs {
		r.byName[r.cfg.Specs[i].Name] = &r.cfg.Specs[i]
	}
	if cfg.Names != nil {
		r.names.done = catalogStatements(r.cfg.Specs, cfg.Names)
	}
	return r, nil
}

// check reports every field of c that a run could not work with.
func (c Config) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Pool == nil {
		bad("no pool")
	}
	s := c.Settings
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"deadline", s.Deadline}, {"statement timeout", s.StatementTimeout}, {"lock timeout", s.LockTimeout},
		{"count timeout", s.CountTimeout}, {"batch target", s.BatchTarget}} {
		if d.v <= 0 {
			bad("%s %s must be positive", d.name, d.v)
		}
	}
	if s.Pause < 0 {
		bad("pause %s must not be negative", s.Pause)
	}
	if s.MinBatchSize < 1 || s.MaxBatchSize < s.MinBatchSize {
		bad("batch size bounds %d..%d: want 1 <= min <= max", s.MinBatchSize, s.MaxBatchSize)
	}
	if s.BatchSize < wire.MinRequestBatchSize || s.BatchSize > wire.MaxRequestBatchSize {
		bad("batch size %d: want %d..%d", s.BatchSize, wire.MinRequestBatchSize, wire.MaxRequestBatchSize)
	}
	if s.MaxBatches < 1 {
		bad("max batches %d must be at least 1", s.MaxBatches)
	}
	if err := s.batchTransaction(s.LockTimeout, false, false).Check(); err != nil {
		errs = append(errs, err)
	}
	if err := policy.Validate(c.Specs); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Specs returns the catalog, in order, with defaults spelled out.
func (r *Runner) Specs() []policy.Spec { return r.cfg.Specs }

// Settings returns the bounds every run obeys.
func (r *Runner) Settings() Settings { return r.cfg.Settings }

// LeaseTTL is how long a run's lease lasts: twice the budget, so a live run never loses its lease
// (a run overruns its budget by at most one batch), and a crashed one blocks its sweep for at most
// that long.
func (r *Runner) LeaseTTL() time.Duration { return 2 * r.cfg.Settings.Deadline }

// referenceTime is a run's or dry run's reference time, in UTC so that a cutoff bound to a
// timestamp-without-time-zone column means the same whatever the process's local zone is. dbNow
// is the database's clock as the caller already read it, or nil to read it.
func (r *Runner) referenceTime(ctx context.Context, dbNow func(context.Context) (time.Time, error)) (time.Time, error) {
	asOf := r.cfg.AsOf
	if asOf == nil {
		asOf = dbNow
	}
	ref, err := asOf(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("read reference time: %w", err)
	}
	return ref.UTC(), nil
}

func (r *Runner) databaseNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := r.cfg.Pool.QueryRow(ctx, "SELECT now()").Scan(&now)
	return now, err
}

// Run runs the sweep name once. Cancelling ctx asks the run to stop between batches with
// StopShutdown; a statement in flight is never cut by it. The error is ErrUnknownSweep for a name
// the catalog does not hold; database failures are reported in the Result as batch-error.
func (r *Runner) Run(ctx context.Context, name string, opts Options) (*wire.Result, error) {
	spec, ok := r.byName[name]
	if !ok {
		return nil, fmt.Errorf("run %q: %w", name, ErrUnknownSweep)
	}
	start := r.cfg.Now()
	runID, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("run %q: new run id: %w", name, err)
	}
	res := &wire.Result{Sweep: name, RunID: runID.String(), Passes: []wire.PassResult{}}
	ctx, span := r.cfg.Tracing.StartRun(ctx, name, res.RunID)
	log := r.cfg.Logger.With("sweep", name, "run_id", res.RunID)
	// Database work is detached from ctx: shutdown is honoured between batches, and cutting a
	// statement would only roll back work that the statement timeout already bounds.
	db := context.WithoutCancel(ctx)
	defer r.finish(db, log, spec, res, opts, start, span)

	acquireCtx, cancel := context.WithTimeout(db, r.cfg.Settings.StatementTimeout)
	l, closeSession, err := r.acquireLease(acquireCtx, name)
	cancel()
	if errors.Is(err, lease.ErrHeld) {
		res.Skipped, res.StopReason = true, wire.StopLeaseHeld
		return res, nil
	}
	if err != nil {
		res.StopReason, res.Error = wire.StopBatchError, errorInfo(err, "")
		return res, nil
	}
	defer closeSession()
	if l.TookOver != nil {
		res.TookOverLease = l.TookOver.String()
		log.Warn("took over the lease of a run whose session is gone", "previous_owner", res.TookOverLease)
	}
	// A failed start is healed by the end, which writes the whole row when it is missing.
	_ = r.record(db, log, func(ctx context.Context) error { return r.cfg.History.Start(ctx, res.RunID, name, opts.RequestID) })
	r.settleEarlier(db, log, spec)
	defer r.release(db, log, l)
	if err := r.halted(db, log, name); err != nil {
		res.StopReason, res.Error = wire.StopBatchError, errorInfo(err, "")
		return res, nil
	}

	// The lease's locked_at is the database's now() at the start of the run: no extra query.
	ref, err := r.referenceTime(db, func(context.Context) (time.Time, error) { return l.LockedAt, nil })
	if err != nil {
		res.StopReason, res.Error = wire.StopBatchError, errorInfo(err, "")
		return res, nil
	}
	res.ReferenceTime = &ref
	sts, kinds, sql, err := r.statementsFor(db, name)
	if err != nil {
		res.StopReason, res.Error = wire.StopBatchError, errorInfo(err, "")
		return res, nil
	}
	res.StopReason = wire.StopExhausted
	for i, p := range spec.Passes {
		pr := &passRun{
			r: r, db: db, log: log, of: runKey{sweep: name, id: res.RunID}, p: p, sql: sql[i], st: sts[i], kind: kinds[i],
			cutoff: ref.Add(-p.Retention), deadline: start.Add(r.cfg.Settings.Deadline),
			at: position{size: firstPositive(opts.BatchSize, p.BatchSize, r.cfg.Settings.BatchSize)},
		}
		perr := r.runPass(ctx, pr, res)
		// The standbys' lag and the server's load are the run's, not the pass's: the passes
		// after a failed read, or the critical level, would delete against the same server.
		if endsRun(res.Passes[len(res.Passes)-1].StopReason, perr) {
			break
		}
		// An archive that lost a committed batch's rows halts the sweep: no later batch, of
		// this run or another, until an operator releases it.
		var lost *ArchiveLostError
		if errors.As(perr, &lost) {
			r.halt(db, log, res.RunID, lost)
			break
		}
	}
	r.measureLags(db, log, spec, sts, ref, res)
	return res, nil
}

// runPass runs pass pr under its span and adds its answer to res; the error is the pass's.
func (r *Runner) runPass(ctx context.Context, pr *passRun, res *wire.Result) error {
	passCtx, passSpan := r.cfg.Tracing.StartPass(ctx, pr.p.Name)
	pr.ctx = passCtx
	run := pr.run
	if pr.p.Mode == policy.ModePartitions {
		run = pr.runPartitions
	}
	began := r.cfg.Now()
	out, perr := pr.proven(run)
	took := r.cfg.Now().Sub(began)
	out.DurationMs = took.Milliseconds()
	out.Cutoff, out.CutoffEpoch, out.AgeUnit = cutoffOf(pr.cutoff, pr.kind, pr.p)
	passSpan.End(trace.Result{Rows: out.Deleted, Processed: out.Processed, Archived: out.Archived, Duration: took,
		StopReason: string(out.StopReason), Err: perr})
	res.Passes = append(res.Passes, out)
	res.Deleted += out.Deleted
	res.Processed += out.Processed
	res.Archived += out.Archived
	res.PartitionsDropped += out.PartitionsDropped
	res.ThrottledMs += out.ThrottledMs
	addThrottled(res, out)
	res.BatchCount += out.BatchCount
	if out.StopReason.Severity() > res.StopReason.Severity() {
		res.StopReason = out.StopReason
	}
	res.Truncated = res.Truncated || out.StopReason.Truncates()
	if perr != nil {
		msg := "batch failed"
		if out.StopReason == wire.StopSchemaChanged {
			msg = "schema changed since the pass was proven, and its check refuses it now"
		}
		pr.log.Error(msg, "pass", pr.p.Name, "err", perr)
		if res.Error == nil {
			res.Error = errorInfo(perr, pr.p.Name)
		}
	}
	return perr
}

// release gives the run's lease back, saying so when it was gone already.
func (r *Runner) release(db context.Context, log *slog.Logger, l *lease.Lease) {
	ctx, cancel := context.WithTimeout(db, r.cfg.Settings.StatementTimeout)
	defer cancel()
	if released, err := lease.Release(ctx, r.cfg.Pool, l); err != nil {
		log.Error("release lease", "err", err)
	} else if !released {
		log.Warn("lease was gone at release: the run outlived its TTL or it was cleared by hand", "ttl", r.LeaseTTL())
	}
}

// finish ends run res, which started at start: its history row (and the history's pruning),
// its metrics, its span and its log line.
func (r *Runner) finish(db context.Context, log *slog.Logger, spec *policy.Spec, res *wire.Result, opts Options, start time.Time, span *trace.Span) {
	end := r.cfg.Now()
	res.DurationMs = end.Sub(start).Milliseconds()
	err := r.record(db, log, func(ctx context.Context) error {
		return r.cfg.History.Finish(ctx, res, opts.RequestID, passTables(spec))
	})
	if we := (*history.WriteError)(nil); errors.As(err, &we) {
		// The run's end is missing from the history: the answer, /metrics and GET
		// /internal/runs say so, where a log line alone went unread.
		res.HistoryError = errorInfo(we.Err, "")
		r.cfg.History.Unrecorded(res, end, we.Err)
		r.cfg.Metrics.HistoryFailure(res.Sweep)
		r.cfg.History.KeepUnwritten(res, opts.RequestID, passTables(spec))
	} else {
		r.markUnsettled(db, log, res)
	}
	_ = r.record(db, log, func(ctx context.Context) error {
		n, err := r.cfg.History.Prune(ctx)
		if n > 0 {
			log.Debug("pruned run history", "runs", n)
		}
		return err
	})
	outcome := string(res.StopReason)
	if res.Skipped {
		outcome = wire.OutcomeSkipped
	}
	r.cfg.Metrics.Run(res.Sweep, outcome, end.Sub(start), !res.Skipped && !res.Failed(), end)
	span.End(trace.Result{Rows: res.Deleted, Processed: res.Processed, Archived: res.Archived, Duration: end.Sub(start), StopReason: outcome})
	log.Info("sweep run", "stop_reason", res.StopReason, "skipped", res.Skipped, "deleted", res.Deleted, "processed", res.Processed,
		"archived", res.Archived, "batches", res.BatchCount, "truncated", res.Truncated, "duration_ms", res.DurationMs)
}

// statementsFor returns the statements of each pass of sweep name for its age column's type as
// the catalog has it now, that type, and each pass naming its tables as the statements do.
func (r *Runner) statementsFor(ctx context.Context, name string) ([]statement.Set, []statement.Kind, []policy.Pass, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Settings.StatementTimeout)
	defer cancel()
	all, err := r.statements(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	sql := all.sql[name]
	kinds, err := statement.ReadKinds(ctx, r.cfg.Pool, sql)
	if err != nil {
		return nil, nil, nil, err
	}
	out := make([]statement.Set, len(sql))
	for i, k := range kinds {
		out[i] = all.stmts[name][i][k]
	}
	return out, kinds, sql, nil
}

// passTables maps each pass of spec to its table, whose size the history keeps with the pass.
func passTables(spec *policy.Spec) map[string]string {
	out := make(map[string]string, len(spec.Passes))
	for _, p := range spec.Passes {
		out[p.Name] = p.Table
	}
	return out
}

// cutoffOf is a pass's cutoff as its answer shows it: the instant, and for an age column of Unix
// time the integer its statements compare with, in the pass's unit.
func cutoffOf(cutoff time.Time, k statement.Kind, p policy.Pass) (time.Time, *int64, string) {
	if !k.Epoch() {
		return cutoff, nil, ""
	}
	n := statement.EpochOf(k, cutoff)
	return cutoff, &n, p.AgeUnit
}

// record runs one write of the run history under the statement timeout, and returns its error,
// logged. A history that cannot be written is never the run's failure: the rows the run deleted
// are gone either way, and its answer, log line and metrics still say so.
func (r *Runner) record(db context.Context, log *slog.Logger, write func(context.Context) error) error {
	if r.cfg.History == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(db, r.cfg.Settings.StatementTimeout)
	defer cancel()
	err := write(ctx)
	if err != nil {
		log.Error("run history", "err", err)
	}
	return err
}

// errorInfo turns an error into the answer's error object: a PostgreSQL error by its SQLSTATE,
// anything else by a short name of what failed.
func errorInfo(err error, pass string) *wire.ErrorInfo {
	info := &wire.ErrorInfo{Code: "internal", Message: err.Error(), Pass: pass}
	var pgErr *pgconn.PgError
	var netErr net.Error
	var short *ArchiveShortError
	var altered *ArchiveAlteredError
	var differs *ArchiveDiffersError
	var archiveLost *ArchiveLostError
	var halted *HaltedError
	var lost *CommitLostError
	var changed *SchemaChangedError
	switch {
	case errors.As(err, &changed):
		info.Code = SchemaChangedCode
	case errors.As(err, &short):
		info.Code = ArchiveShortCode
	case errors.As(err, &altered):
		info.Code = ArchiveAlteredCode
	case errors.As(err, &differs):
		info.Code = ArchiveDiffersCode
	case errors.As(err, &archiveLost), errors.As(err, &halted):
		info.Code = ArchiveLostCode
	case errors.As(err, &lost):
		info.Code = CommitLostCode
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
