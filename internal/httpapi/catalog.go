package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// handleCatalog serves GET /internal/sweeps. The catalog is fixed for the process's life, so
// it is built once; each sweep's retention verdict is judged per request from its history.
func handleCatalog(logger *slog.Logger, runner *sweep.Runner, b Bounds, j judging) http.Handler {
	static := buildCatalog(runner, b)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer := static
		answer.Sweeps = j.judge(r.Context(), logger, static.Sweeps)
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

// verdictRuns is how many runs of each sweep its verdict is judged from, and verdictTimeout
// bounds the reads of one request: one indexed, bounded read per sweep.
const (
	verdictRuns    = 20
	verdictTimeout = 5 * time.Second
)

// judging is what the catalog's verdicts are judged from; a nil history judges nothing.
type judging struct {
	history  *history.Store
	expected time.Duration
	now      func() time.Time
}

// judge returns sweeps with each one's verdict, or sweeps as they are when the history cannot
// be read: the catalog is what sweepcron needs, and must answer without it.
func (j judging) judge(ctx context.Context, logger *slog.Logger, sweeps []wire.CatalogSweep) []wire.CatalogSweep {
	if j.history == nil {
		return sweeps
	}
	ctx, cancel := context.WithTimeout(ctx, verdictTimeout)
	defer cancel()
	out := make([]wire.CatalogSweep, len(sweeps))
	now := j.now()
	for i, s := range sweeps {
		runs, err := j.history.List(ctx, s.Name, verdictRuns)
		if err != nil {
			logger.Error("catalog: read the run history", "sweep", s.Name, "err", err)
			return sweeps
		}
		v := wire.Judge(runs, now, j.expected)
		s.Retention = &v
		out[i] = s
	}
	return out
}
