package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// addRoutes is the whole API surface, in one place. Everything under /internal/ is signed:
// NewServer checks before routing (signInternal), so an unsigned caller learns nothing of which
// routes or methods exist, and the subrouter checks again (ensureSigned).
func addRoutes(mux *chi.Mux, d Deps, signed func(http.Handler) http.Handler) {
	// Set before Route, so the /internal subrouter inherits them.
	mux.NotFound(handleNotFound(d.Logger))
	mux.MethodNotAllowed(handleMethodNotAllowed(d.Logger, mux))

	mux.Method(http.MethodGet, "/healthz", handleHealthz(d.Logger))
	mux.Method(http.MethodGet, "/readyz", handleReadyz(d.Logger, d.Pool, policyTables(d.Runner.Specs())))
	mux.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(d.Gatherer, promhttp.HandlerOpts{
		ErrorLog: slogErrorLog{d.Logger},
		// A collector that fails must not hide every other metric.
		ErrorHandling: promhttp.ContinueOnError,
	}))

	mux.Route("/internal", func(r chi.Router) {
		r.Use(ensureSigned(signed))
		r.With(strictQuery(d.Logger, "GET /internal/sweeps")).Method(http.MethodGet, "/sweeps", handleCatalog(d.Logger, d.Runner, d.Bounds,
			judging{history: d.History, expected: d.ExpectedInterval, now: d.Now}))
		r.With(refuseQuery(d.Logger)).Method(http.MethodPost, "/sweep-{name}",
			handleSweep(d.Logger, d.Runner, d.RunContext, newDryRunSlots(d.MaxDryRuns, d.Runner.Settings().CountTimeout)))
		r.With(strictQuery(d.Logger, "GET /internal/runs", "sweep", "limit")).Method(http.MethodGet, "/runs",
			handleRuns(d.Logger, d.History, d.Runner.Specs()))
	})
}
