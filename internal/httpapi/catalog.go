package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// handleCatalog serves GET /internal/sweeps. The catalog is fixed for the process's life, so
// the answer is built once.
func handleCatalog(logger *slog.Logger, runner *sweep.Runner, b Bounds) http.Handler {
	answer := buildCatalog(runner, b)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, r, logger, http.StatusOK, answer)
	})
}

func buildCatalog(runner *sweep.Runner, b Bounds) wire.Catalog {
	a := wire.Catalog{Sweeps: []wire.CatalogSweep{}}
	for _, s := range runner.Specs() {
		e := wire.CatalogSweep{Name: s.Name, Route: wire.SweepRoutePrefix + s.Name, Passes: []wire.CatalogPass{}}
		for _, p := range s.Passes {
			e.Passes = append(e.Passes, policy.CatalogPass(p))
		}
		a.Sweeps = append(a.Sweeps, e)
	}
	st := runner.Settings()
	a.Bounds = wire.Bounds{
		ServerWriteTimeoutMs:    b.ServerWriteTimeout.Milliseconds(),
		SweepDeadlineMs:         st.Deadline.Milliseconds(),
		BatchStatementTimeoutMs: st.StatementTimeout.Milliseconds(),
		BatchLockTimeoutMs:      st.LockTimeout.Milliseconds(),
		CountTimeoutMs:          st.CountTimeout.Milliseconds(),
		SignatureMaxAgeMs:       b.SignatureMaxAge.Milliseconds(),
		InternalFetchTimeoutMs:  b.InternalFetchTimeout.Milliseconds(),
		ShutdownGraceMs:         b.ShutdownGrace.Milliseconds(),
		LeaseTTLMs:              runner.LeaseTTL().Milliseconds(),
		BatchSize:               st.BatchSize,
		MinBatchSize:            st.MinBatchSize,
		MaxBatchSize:            st.MaxBatchSize,
		BatchTargetMs:           st.BatchTarget.Milliseconds(),
		MaxBatches:              st.MaxBatches,
		BatchPauseMs:            st.Pause.Milliseconds(),
	}
	return a
}
