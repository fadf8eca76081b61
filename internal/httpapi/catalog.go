package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/sweeprail/sweeprail/internal/sweep"
)

// catalogAnswer is the body of GET /internal/sweeps. The cron client relies on sweeps[].name,
// sweeps[].route and bounds.serverWriteTimeoutMs; the rest is for operators.
type catalogAnswer struct {
	Sweeps []sweepEntry  `json:"sweeps"`
	Bounds boundsSection `json:"bounds"`
}

// sweepEntry is one sweep of the catalog and the route that runs it.
type sweepEntry struct {
	Name   string      `json:"name"`
	Route  string      `json:"route"`
	Passes []passEntry `json:"passes"`
}

// passEntry is one pass. It is its own type rather than sweep.Pass so that the wire format does
// not change when the engine's struct does.
type passEntry struct {
	Pass      string     `json:"pass"`
	Table     string     `json:"table"`
	Mode      sweep.Mode `json:"mode"`
	AgeColumn string     `json:"ageColumn"`
	// Retention is a Go duration ("720h0m0s"); RetentionSeconds the same as a number.
	Retention        string       `json:"retention"`
	RetentionSeconds int64        `json:"retentionSeconds"`
	Where            string       `json:"where"`
	Guards           []guardEntry `json:"guards"`
	Function         string       `json:"function,omitempty"`
	KeyColumn        string       `json:"keyColumn,omitempty"`
	BatchSize        int          `json:"batchSize,omitempty"`
	MaxBatches       int          `json:"maxBatches,omitempty"`
}

// guardEntry is a keep guard: a row stays while <table>.<column> references its <references>.
type guardEntry struct {
	Table      string `json:"table"`
	Column     string `json:"column"`
	References string `json:"references"`
}

// boundsSection is every time and size bound of a run on this server, durations in milliseconds.
type boundsSection struct {
	ServerWriteTimeoutMs    int64 `json:"serverWriteTimeoutMs"`
	SweepDeadlineMs         int64 `json:"sweepDeadlineMs"`
	BatchStatementTimeoutMs int64 `json:"batchStatementTimeoutMs"`
	BatchLockTimeoutMs      int64 `json:"batchLockTimeoutMs"`
	CountTimeoutMs          int64 `json:"countTimeoutMs"`
	SignatureMaxAgeMs       int64 `json:"signatureMaxAgeMs"`
	InternalFetchTimeoutMs  int64 `json:"internalFetchTimeoutMs,omitempty"`
	ShutdownGraceMs         int64 `json:"shutdownGraceMs"`
	LeaseTTLMs              int64 `json:"leaseTtlMs"`
	BatchSize               int   `json:"batchSize"`
	MinBatchSize            int   `json:"minBatchSize"`
	MaxBatchSize            int   `json:"maxBatchSize"`
	BatchTargetMs           int64 `json:"batchTargetMs"`
	MaxBatches              int   `json:"maxBatches"`
	BatchPauseMs            int64 `json:"batchPauseMs"`
}

// handleCatalog serves GET /internal/sweeps. The catalog is fixed for the process's life, so
// the answer is built once.
func handleCatalog(logger *slog.Logger, runner *sweep.Runner, b Bounds) http.Handler {
	answer := buildCatalog(runner, b)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, r, logger, http.StatusOK, answer)
	})
}

func buildCatalog(runner *sweep.Runner, b Bounds) catalogAnswer {
	a := catalogAnswer{Sweeps: []sweepEntry{}}
	for _, s := range runner.Specs() {
		e := sweepEntry{Name: s.Name, Route: "/internal/sweep-" + s.Name, Passes: []passEntry{}}
		for _, p := range s.Passes {
			mode := p.Mode
			if mode == "" {
				mode = sweep.ModeBatched
			}
			pe := passEntry{
				Pass: p.Name, Table: p.Table, Mode: mode, AgeColumn: p.AgeColumn,
				Retention: p.Retention.String(), RetentionSeconds: int64(p.Retention / time.Second),
				Where: p.Where, Guards: []guardEntry{}, Function: p.Function, KeyColumn: p.KeyColumn,
				BatchSize: p.BatchSize, MaxBatches: p.MaxBatches,
			}
			for _, g := range p.Guards {
				pe.Guards = append(pe.Guards, guardEntry{Table: g.Table, Column: g.Column, References: g.References})
			}
			e.Passes = append(e.Passes, pe)
		}
		a.Sweeps = append(a.Sweeps, e)
	}
	st := runner.Settings()
	a.Bounds = boundsSection{
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
