package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/config"
	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/nonce"
	"github.com/sweeprail/sweeprail/internal/pace"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/replica"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/statement"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/trace"
	"github.com/sweeprail/sweeprail/migrations"
)

// The server's fixed limits; the ones an operator tunes come from the environment.
const (
	// adaptiveMinBatchSize and adaptiveMaxBatchSize bound adaptive batch sizing, below a
	// request's own range (wire.MaxRequestBatchSize), which only sets a pass's first batch. The
	// cap keeps a batch's WAL under the default WAL buffers; docs/BENCHMARKS.md has the
	// measurement behind the number.
	adaptiveMinBatchSize = 100
	adaptiveMaxBatchSize = 20000
	// replayCacheSize bounds the nonces the verifier remembers (see signing.NewVerifier).
	replayCacheSize = 100_000
	// readHeaderTimeout bounds a client that sends its headers slowly, which would hold a
	// connection without ever reaching a handler.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout closes kept-alive connections nobody uses.
	idleTimeout = 60 * time.Second
	// maxHeaderBytes: a signed request's headers are well under 1 KiB.
	maxHeaderBytes = 32 << 10
)

// serve runs the API until ctx is done (SIGTERM or interrupt), then shuts down: it stops
// accepting, lets each run finish its batch in flight, stop with "shutdown", release its lease and
// answer, and returns nil. It returns an error when SHUTDOWN_GRACE runs out first, so the exit
// status tells an orchestrator that answers were cut.
func serve(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("serve: unexpected arguments %q: the configuration comes from the environment", args)
	}
	cfg, err := config.LoadAPI(environ)
	if err != nil {
		return fmt.Errorf("configuration refused:\n%w", err)
	}
	logger := newLogger(cfg, environ, stderr)
	pol, own, err := loadPolicy(cfg)
	if err != nil {
		return err
	}
	logRetentions(logger, own, pol.Specs)

	var open closers
	defer open.close()
	pools, err := openPools(ctx, cfg, logger, &open)
	if err != nil {
		return err
	}
	proven, err := checkPolicy(ctx, pol, pools.sweep, logger)
	if err != nil {
		return err
	}
	srv, replay, err := newAPIServer(ctx, cfg, environ, pol.Specs, proven, pools, logger, &open)
	if err != nil {
		return err
	}
	ln, err := listen(ctx, cfg, environ, pol.Specs, pools.config, logger, stdout, &open)
	if err != nil {
		return err
	}
	return runUntilShutdown(ctx, cfg, srv, ln, replay, pools, logger)
}

// closers holds what serve has opened; close closes it, last opened first, each once.
type closers []func()

func (c *closers) push(f func()) { *c = append(*c, f) }

// close has a pointer receiver: serve defers it before anything is pushed.
func (c *closers) close() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// newLogger returns the API's JSON logger. LOG_LEVEL=debug adds a line per batch (its duration
// and size), for tuning BATCH_TARGET. Masked: a pgx error may quote DATABASE_URL.
func newLogger(cfg config.API, environ map[string]string, stderr io.Writer) *slog.Logger {
	return slog.New(redactor(environ).Handler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel.Level()}))).
		With("app_env", cfg.AppEnv)
}

// apiPools are the sweeps' pool and the probe's, which no number of sweeps can take: /readyz and
// the replay check every signed request passes before it may start anything, which must not
// queue behind the runs and counts it admits. Each connection's session is reset on release:
// nothing a run sets survives into the next.
type apiPools struct {
	config *pgxpool.Config // the status page's pool is a copy
	sweep  *pgxpool.Pool
	probe  *pgxpool.Pool
	// cut is set when SHUTDOWN_GRACE ran out: a batch still in flight keeps its connection until
	// its statement ends, so the sweeps' pool is closed without waiting for it; PostgreSQL rolls
	// the transaction back when the process exits.
	cut bool
}

// openPools opens the pools and pushes their closing onto open. The pools connect lazily: a
// database that is down at boot makes /readyz say so, rather than the process crash-looping.
func openPools(ctx context.Context, cfg config.API, logger *slog.Logger, open *closers) (*apiPools, error) {
	poolCfg, err := dbpool.ParseConfig(cfg.DatabaseURL, logger)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	p := &apiPools{config: poolCfg}
	if p.sweep, err = pgxpool.NewWithConfig(ctx, poolCfg); err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	open.push(func() {
		if p.cut {
			go p.sweep.Close()
			return
		}
		p.sweep.Close()
	})
	if p.probe, err = pgxpool.NewWithConfig(ctx, dbpool.ProbeConfig(poolCfg)); err != nil {
		return nil, fmt.Errorf("open the probe's database pool: %w", err)
	}
	open.push(p.probe.Close)
	return p, nil
}

// newAPIServer builds the HTTP server over the runner, with its metrics, tracing, replica
// throttle and replay store, and pushes onto open what must be closed: the traces' flush and
// the runs' context.
func newAPIServer(ctx context.Context, cfg config.API, environ map[string]string, specs []policy.Spec, proven proven, pools *apiPools,
	logger *slog.Logger, open *closers) (*http.Server, *nonce.Store, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg, httpapi.MetricLabels(specs))
	if err != nil {
		return nil, nil, fmt.Errorf("register metrics: %w", err)
	}
	// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT is set; a malformed OTEL_* refuses boot.
	tr, err := trace.New(ctx, environ, "sweeprail-api", logger)
	if err != nil {
		return nil, nil, fmt.Errorf("configuration refused:\n%w", err)
	}
	open.push(func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(flushCtx); err != nil {
			logger.Warn("flush traces", "err", err)
		}
	})
	// MAX_REPLICA_LAG(_BYTES): a throttle that cannot read the standbys' lag (no pg_monitor, or
	// a standby as DATABASE_URL) refuses boot, rather than failing every batch.
	throttle := replica.New(replica.Config{
		Limits: replica.Limits{MaxLag: cfg.MaxReplicaLag, MaxLagBytes: int64(cfg.MaxReplicaLagBytes)},
		Pool:   pools.sweep, QueryTimeout: cfg.BatchStatementTimeout, Logger: logger,
	})
	if err := throttle.Check(ctx); err != nil {
		return nil, nil, fmt.Errorf("MAX_REPLICA_LAG / MAX_REPLICA_LAG_BYTES: %w", err)
	}
	pacer, err := newPacer(ctx, cfg, pools.sweep, logger)
	if err != nil {
		return nil, nil, err
	}
	runs := history.New(pools.sweep, time.Duration(cfg.RunHistoryRetention))
	runner, err := sweep.NewRunner(sweep.Config{Pool: pools.sweep, Specs: specs, Names: proven.names, Settings: sweepSettings(cfg), Logger: logger,
		Metrics: m, Tracing: tr, Throttle: throttle, Pacer: pacer, History: runs, Proofs: proven.proofs})
	if err != nil {
		return nil, nil, err
	}
	if err := checkBatchSettings(ctx, cfg, runner); err != nil {
		return nil, nil, err
	}

	// Runs get a context of their own, cancelled once the listener is closed: shutdown must reach
	// the runs, and the signal's context must not, or a run would stop before the server stopped
	// accepting.
	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	open.push(cancelRuns)
	replay := nonce.New(pools.probe)
	handler := httpapi.NewServer(httpapi.Deps{
		Logger:     logger,
		Runner:     runner,
		History:    runs,
		Pool:       pools.probe,
		Verifier:   newVerifier(cfg, logger, replay),
		Metrics:    m,
		Tracing:    tr,
		Gatherer:   reg,
		RunContext: runCtx,
		MaxDryRuns: cfg.MaxDryRuns,

		ExpectedInterval: cfg.ExpectedInterval,
		Bounds: httpapi.Bounds{
			ServerWriteTimeout:   cfg.ServerWriteTimeout,
			SignatureMaxAge:      cfg.SignatureMaxAge,
			InternalFetchTimeout: cfg.InternalFetchTimeout,
			ShutdownGrace:        cfg.ShutdownGrace,
		},
	})
	srv := newHTTPServer(cfg, handler, logger)
	// Shutdown closes the listeners and then calls this: no new request can start a run
	// after the runs were told to stop.
	srv.RegisterOnShutdown(cancelRuns)
	return srv, replay, nil
}

// newPacer builds the pacer of MAX_WAL_RATE and MAX_ACTIVE_SESSIONS(_CRITICAL), refusing boot
// when its reads would be blind: a standby as DATABASE_URL, a role that cannot see other
// sessions' state, or no application_name to tell the rail's sessions from the others.
func newPacer(ctx context.Context, cfg config.API, pool *pgxpool.Pool, logger *slog.Logger) (*pace.Pacer, error) {
	pacer := pace.New(pace.Config{Limits: pace.Limits{WALRate: int64(cfg.MaxWALRate), MaxSessions: cfg.MaxActiveSessions,
		CriticalSessions: cfg.MaxActiveSessionsCritical}, Logger: logger})
	checkCtx, cancel := context.WithTimeout(ctx, cfg.BatchStatementTimeout)
	defer cancel()
	if err := pacer.Check(checkCtx, pool); err != nil {
		return nil, fmt.Errorf("MAX_WAL_RATE / MAX_ACTIVE_SESSIONS: %w", err)
	}
	return pacer, nil
}

// checkBatchSettings refuses boot when BATCH_WAL_COMPRESSION or BATCH_FLUSH_AFTER sets what the
// server refuses in a batch's transaction, naming the variable: every batch would fail on it.
func checkBatchSettings(ctx context.Context, cfg config.API, runner *sweep.Runner) error {
	if cfg.BatchWALCompression == "" && cfg.BatchFlushAfter == 0 {
		return nil
	}
	checkCtx, cancel := context.WithTimeout(ctx, cfg.BatchStatementTimeout)
	defer cancel()
	err := runner.CheckBatchSettings(checkCtx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sweep.ErrFlushAfterRefused):
		return fmt.Errorf("BATCH_FLUSH_AFTER=%dKiB: %w", cfg.BatchFlushAfter>>10, err)
	case errors.Is(err, sweep.ErrWALCompressionDenied), errors.Is(err, sweep.ErrWALCompressionUnknown):
		return fmt.Errorf("BATCH_WAL_COMPRESSION=%s: %w", cfg.BatchWALCompression, err)
	}
	return fmt.Errorf("check the batch settings: %w", err)
}

// listen opens the API's listener and the status page (STATUS_ADDR, off unless set: a listener
// and a pool of its own), then says where each listens. The API's listener is the server's to
// close once it serves.
func listen(ctx context.Context, cfg config.API, environ map[string]string, specs []policy.Spec, poolCfg *pgxpool.Config,
	logger *slog.Logger, stdout io.Writer, open *closers) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on LISTEN_ADDR=%s: %w", cfg.ListenAddr, err)
	}
	statusSrv, err := listenStatus(ctx, cfg, poolCfg, specs, redactor(environ), logger)
	if err != nil {
		ln.Close()
		return nil, err
	}
	open.push(statusSrv.close)
	logger.Info("listening", "addr", ln.Addr().String(), "sweeps", len(specs),
		"write_timeout", cfg.ServerWriteTimeout.String(), "sweep_deadline", cfg.SweepDeadline.String(),
		"batch_target", cfg.BatchTarget.String(), "batch_sync_commit", cfg.BatchSyncCommit,
		"batch_wal_compression", string(cfg.BatchWALCompression), "batch_flush_after", int64(cfg.BatchFlushAfter))
	// The actual address, for LISTEN_ADDR=:0: a test or a script reads the port from this line.
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	statusSrv.announce(stdout, logger)
	statusSrv.serve(logger)
	return ln, nil
}

// runUntilShutdown serves on ln, and purges expired nonces, until ctx is done; then it shuts the
// server down within SHUTDOWN_GRACE.
func runUntilShutdown(ctx context.Context, cfg config.API, srv *http.Server, ln net.Listener, replay *nonce.Store,
	pools *apiPools, logger *slog.Logger) error {
	// Expired nonces leave on a schedule of their own, in every replica, so a flood's rows do not
	// wait for the next request to leave.
	purgeCtx, stopPurge := context.WithCancel(context.WithoutCancel(ctx))
	purged := make(chan struct{})
	go func() {
		defer close(purged)
		replay.Run(purgeCtx, nonce.PurgeInterval, logger)
	}()
	stopPurging := func() { stopPurge(); <-purged }

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		stopPurging()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	logger.Info("shutting down", "grace", cfg.ShutdownGrace.String())
	graceCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(graceCtx)
	<-served // http.ErrServerClosed, at once
	stopPurging()
	if err != nil {
		// Cut what is left rather than overrun the grace further.
		_ = srv.Close()
		pools.cut = true
		return fmt.Errorf("shut down: SHUTDOWN_GRACE=%s ran out with requests in flight: %w", cfg.ShutdownGrace, err)
	}
	logger.Info("stopped")
	return nil
}

// loadPolicy returns the policy to serve, statically valid: SWEEP_POLICY_FILE, or the bundled
// catalog when it is unset, with SWEEP_RETENTION's overrides applied; and the policy's own specs,
// before the overrides.
func loadPolicy(cfg config.API) (*policy.Policy, []policy.Spec, error) {
	pol, err := policy.LoadFile(cfg.SweepPolicyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("sweep policy refused:\n%w", err)
	}
	own := pol.Specs
	if pol.Specs, err = policy.WithRetention(pol.Specs, cfg.Retention); err != nil {
		return nil, nil, fmt.Errorf("SWEEP_RETENTION: %w", err)
	}
	return pol, own, nil
}

// checkPolicy validates the policy against the live schema before the API serves it: a policy
// whose tables, columns or indexes are not what it says would delete by rules nobody checked.
// It checks sweeprail's own schema too (checkOwnSchema): without its lease table the first run
// would fail. An unreachable database refuses the boot too, rather than serving an unchecked
// policy; the orchestrator's restart retries it. It answers what the check proved: the tables,
// which every statement of the runner names, and the proofs each run compares its passes'
// catalog with before their first batch.
func checkPolicy(ctx context.Context, pol *policy.Policy, pool *pgxpool.Pool, logger *slog.Logger) (proven, error) {
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	own := checkOwnSchema(checkCtx, pool)
	proofs, warnings, err := check.Prove(checkCtx, pool, pol)
	for _, w := range warnings {
		logger.Warn("sweep policy", "file", pol.File, "warning", w)
	}
	if err != nil {
		err = fmt.Errorf("sweep policy %s refused against the database:\n%w", pol.File, err)
		if !isNotReady(own) {
			own = nil // the same failure (an unreachable database), said once
		}
	}
	if err := errors.Join(own, err); err != nil {
		return proven{}, err
	}
	names, err := check.Names(checkCtx, pool, pol)
	return proven{proofs: proofs, names: names}, err
}

// proven is what the boot's policy check proved.
type proven struct {
	// proofs are the passes' fingerprints, compared by each run before its first batch.
	proofs *check.Proofs
	// names are the tables the check resolved, schema-qualified.
	names statement.Names
}

// checkOwnSchema confirms that the database holds sweeprail's own schema as this build needs it:
// every migration of migrations.Sweeprail and its lease table. Its error names the command that
// installs them (api migrate up).
func checkOwnSchema(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := migrations.Sweeprail.Check(ctx, pool); err != nil {
		if isNotReady(err) {
			return err
		}
		return fmt.Errorf("check sweeprail's own schema: %w", err)
	}
	return nil
}

func isNotReady(err error) bool {
	var nr *migrations.NotReadyError
	return errors.As(err, &nr)
}

// sweepSettings maps the configuration onto the runner's bounds.
func sweepSettings(cfg config.API) sweep.Settings {
	return sweep.Settings{
		Deadline:         cfg.SweepDeadline,
		StatementTimeout: cfg.BatchStatementTimeout,
		LockTimeout:      cfg.BatchLockTimeout,
		CountTimeout:     cfg.CountTimeout,
		BatchSize:        cfg.BatchSize,
		MinBatchSize:     adaptiveMinBatchSize,
		MaxBatchSize:     adaptiveMaxBatchSize,
		BatchTarget:      cfg.BatchTarget,
		SyncCommit:       cfg.BatchSyncCommit,
		WALCompression:   string(cfg.BatchWALCompression),
		FlushAfter:       int64(cfg.BatchFlushAfter),
		MaxBatches:       cfg.MaxBatches,
		Pause:            cfg.BatchPause,
	}
}

// newVerifier returns the verifier of the configured keys, or nil when no key is set, which
// closes every /internal/* route (503) rather than opening it.
func newVerifier(cfg config.API, logger *slog.Logger, store signing.ReplayStore) *signing.Verifier {
	if cfg.SigningKey == "" {
		logger.Warn("INTERNAL_SIGNING_KEY is empty: every /internal/* route answers 503 signing_not_configured")
		return nil
	}
	keys := [][]byte{[]byte(cfg.SigningKey)}
	if cfg.SigningKeyPrevious != "" {
		keys = append(keys, []byte(cfg.SigningKeyPrevious))
	}
	// The in-memory cache is the first line; the store in sweeprail's own schema is shared by
	// every replica and outlives a restart.
	return signing.NewVerifier(keys, cfg.SignatureMaxAge, time.Now, replayCacheSize).WithStore(store)
}

// newHTTPServer returns the server with the configured bounds. WriteTimeout is what cuts a
// handler that runs too long; config.LoadAPI has checked that a run fits inside it.
// ReadTimeout is as long: when it fires during a handler, net/http cancels the request's
// context, which would cut a dry run that is still within its bounds.
func newHTTPServer(cfg config.API, h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Addr:              cfg.ListenAddr,
		Handler:           h,
		ReadHeaderTimeout: min(readHeaderTimeout, cfg.ServerWriteTimeout),
		ReadTimeout:       cfg.ServerWriteTimeout,
		WriteTimeout:      cfg.ServerWriteTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
