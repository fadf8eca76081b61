// Package httpapi serves sweeprail's HTTP routes: the signed sweep routes and the catalog under
// /internal/, and the unauthenticated /healthz, /readyz and /metrics.
//
// Every route is listed in routes.go. Every answer is JSON written by encode.go, which is also the
// one place where an error becomes a status code and an envelope {"error": code, "message": text}.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/trace"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// maxBodyBytes caps a request body. A sweep request is a few dozen bytes; the cap keeps the
// signature middleware, which must buffer the body to hash it, from buffering whatever a client
// sends.
const maxBodyBytes = 64 << 10

// Defaults of the Deps fields that have one.
const (
	// defaultBodyTimeout is how long a request's body may take to arrive once its signature
	// header passed. A signed body is a few dozen bytes, sent with the header; seconds, not the
	// write timeout, is what a slow client may hold a connection for.
	defaultBodyTimeout = 5 * time.Second
	// defaultMaxDryRuns is MAX_CONCURRENT_DRY_RUNS's default.
	defaultMaxDryRuns = 2
)

// Deps are what the server is built from. Runner is required; the others have the defaults
// their comments give.
type Deps struct {
	// Logger receives access logs and errors; nil discards them.
	Logger *slog.Logger
	// Runner runs and counts the sweeps; its catalog is what the routes serve.
	Runner *sweep.Runner
	// History serves GET /internal/runs; nil answers 404 there.
	History *history.Store
	// Pool is what /readyz checks; nil makes /readyz answer 503.
	Pool *pgxpool.Pool
	// Verifier checks the signature of every /internal/* request. Nil means no key is configured:
	// every /internal/* route answers 503 signing_not_configured (fail-closed).
	Verifier *signing.Verifier
	// Metrics counts refused signatures and unsigned requests; nil counts nothing.
	Metrics *metrics.Metrics
	// Tracing starts a server span for each request whose signature passed, continuing the
	// caller's trace context; nil traces nothing. Unsigned requests are never traced.
	Tracing *trace.Tracing
	// Gatherer is what /metrics exposes; nil exposes an empty registry.
	Gatherer prometheus.Gatherer
	// Bounds are the server's own limits, reported by GET /internal/sweeps.
	Bounds Bounds
	// RunContext is the context sweeps run under, instead of the request's: a client that goes
	// away must not stop a run midway (its deadline bounds it), while cancelling RunContext at
	// shutdown makes every run stop between batches with "shutdown" and answer. Nil means
	// context.Background().
	RunContext context.Context
	// Now is the clock of the access log; nil means time.Now.
	Now func() time.Time
	// BodyTimeout bounds the read of a signed request's body, from when its header passed;
	// 0 means defaultBodyTimeout.
	BodyTimeout time.Duration
	// MaxDryRuns caps the dry runs counting at once; past it a dry run answers 429 busy.
	// 0 means defaultMaxDryRuns.
	MaxDryRuns int
	// ExpectedInterval is SWEEP_EXPECTED_INTERVAL, the schedule the catalog's retention
	// verdicts are judged by; 0 infers it from the history.
	ExpectedInterval time.Duration
}

// Bounds are the server's own limits, which GET /internal/sweeps reports next to the runner's
// settings, so that a client can check its timeout against what the server may take.
type Bounds struct {
	// ServerWriteTimeout is http.Server.WriteTimeout: past it, an answer is cut.
	ServerWriteTimeout time.Duration
	// SignatureMaxAge is the replay window of signatures, both directions.
	SignatureMaxAge time.Duration
	// InternalFetchTimeout is the cron client's timeout as the server was told it; 0 when unset,
	// and then not reported.
	InternalFetchTimeout time.Duration
	// ShutdownGrace is how long a SIGTERM waits for runs in flight.
	ShutdownGrace time.Duration
}

// NewServer returns the API's handler: every route of routes.go behind request ids, access logs
// and panic recovery. It panics when deps.Runner is nil, a wiring mistake no request can fix.
func NewServer(deps Deps) http.Handler {
	if deps.Runner == nil {
		panic("httpapi: NewServer needs a Runner")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Gatherer == nil {
		deps.Gatherer = prometheus.NewRegistry()
	}
	if deps.RunContext == nil {
		deps.RunContext = context.Background()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.BodyTimeout <= 0 {
		deps.BodyTimeout = defaultBodyTimeout
	}
	if deps.MaxDryRuns <= 0 {
		deps.MaxDryRuns = defaultMaxDryRuns
	}
	check := requireSignature(deps.Logger, deps.Verifier, deps.Metrics, deps.BodyTimeout, deps.Tracing)
	mux := chi.NewRouter()
	// Outermost first: the request id is set before anything logs, and the recoverer sits inside
	// the access log so that a panic is logged as the 500 it answers. The signature comes last,
	// before routing, so no method or path under /internal reaches the router unsigned.
	mux.Use(requestID, countUnsigned(deps.Metrics), accessLog(deps.Logger, deps.Now), recoverPanic(deps.Logger), signInternal(check))
	addRoutes(mux, deps, check)
	return mux
}

// MetricLabels lists every label value the metrics of a server over specs can take: each sweep
// and pass (and which passes archive or run per row), each outcome, each reason the signature
// check refuses for. metrics.New exports them all at zero from boot.
func MetricLabels(specs []policy.Spec) metrics.Labels {
	l := metrics.Labels{Outcomes: wire.Outcomes()}
	for _, s := range specs {
		ms := metrics.Sweep{Name: s.Name, Tables: map[string][]string{}, Cascades: map[string][]string{}, PerRow: map[string]string{}}
		for _, p := range s.Passes {
			ms.Passes = append(ms.Passes, p.Name)
			ms.Tables[p.Name] = policy.DeletedTables(p)
			ms.Cascades[p.Name] = p.Cascades
			if p.Mode == policy.ModePerRow {
				ms.PerRow[p.Name] = p.Table
			}
			if p.ArchiveTo != "" {
				ms.Archiving = append(ms.Archiving, p.Name)
			}
		}
		l.Sweeps = append(l.Sweeps, ms)
	}
	for _, r := range signing.Reasons() {
		l.AuthReasons = append(l.AuthReasons, string(r))
	}
	return l
}
