package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// handleRuns serves GET /internal/runs?sweep=&limit=: the run history, newest first. Both
// parameters are optional; strictQuery refuses any other, and an unknown sweep is refused here,
// so that a typo is not read as "no runs".
func handleRuns(logger *slog.Logger, store *history.Store, specs []policy.Spec) http.Handler {
	known := map[string]bool{}
	for _, s := range specs {
		known[s.Name] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if store == nil {
			writeError(w, r, logger, newError(http.StatusNotFound, codeNotFound, "this server keeps no run history"))
			return
		}
		// strictQuery admitted only sweep and limit, each at most once.
		q := r.URL.Query()
		name := q.Get("sweep")
		if name != "" && !known[name] {
			writeError(w, r, logger, newError(http.StatusNotFound, codeUnknownSweep,
				"no sweep %q in the catalog: GET /internal/sweeps lists them", clip([]byte(name))))
			return
		}
		limit := wire.DefaultHistoryLimit
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > wire.MaxHistoryLimit {
				writeError(w, r, logger, badRequest("limit: want a whole number within 1..%d, got %s", wire.MaxHistoryLimit, clip([]byte(v))))
				return
			}
			limit = n
		}
		runs, err := store.List(r.Context(), name, limit)
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		writeJSON(w, r, logger, http.StatusOK, wire.History{Runs: runs, Unrecorded: store.UnrecordedRuns(name)})
	})
}
