package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/migrations"
)

// readyTimeout bounds one readiness check: a probe that hangs is worse than one that fails.
const readyTimeout = 2 * time.Second

// handleHealthz serves GET /healthz: the process is up and serving. It never touches the
// database, so a database outage does not get every replica restarted.
func handleHealthz(logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, r, logger, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// readyAnswer is the body of a 200 from /readyz.
type readyAnswer struct {
	Status string `json:"status"`
	// Migration is the newest of sweeprail's own migrations the database holds.
	Migration int64 `json:"migration"`
}

// handleReadyz serves GET /readyz: the database answers, holds every migration of sweeprail's
// own set (schema sweeprail) that this build embeds and its lease table, and every table the
// served policy sweeps or guards by. It never looks at the demo schema: on a database of the
// operator's there is none. A database ahead of the build (a newer replica migrated it) is
// ready: migrations only add what older code ignores.
func handleReadyz(logger *slog.Logger, pool *pgxpool.Pool, tables []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pool == nil {
			writeError(w, r, logger, newError(http.StatusServiceUnavailable, codeDatabaseUnreachable, "no database is configured"))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		applied, err := migrations.Sweeprail.Check(ctx, pool)
		var missing []string
		if err == nil {
			missing, err = missingTables(ctx, pool, tables)
		}
		var notReady *migrations.NotReadyError
		switch {
		case errors.As(err, &notReady):
			writeError(w, r, logger, newError(http.StatusServiceUnavailable, codeMigrationsPending, "%s", notReady.Error()))
		case err != nil:
			// /readyz is unauthenticated: the host, user and database names stay in the log.
			logger.Warn("readiness check failed", "request_id", requestIDFrom(r.Context()), "err", err)
			writeError(w, r, logger, newError(http.StatusServiceUnavailable, codeDatabaseUnreachable,
				"the database does not answer; the server log has the details"))
		case len(missing) > 0:
			writeError(w, r, logger, newError(http.StatusServiceUnavailable, codePolicyTablesMissing,
				"the served policy's tables do not exist: %s", strings.Join(missing, ", ")))
		default:
			writeJSON(w, r, logger, http.StatusOK, readyAnswer{Status: "ready", Migration: applied})
		}
	})
}

// policyTables lists, once each, the tables the specs delete from or guard by, as the policy
// names them (bare or schema-qualified).
func policyTables(specs []policy.Spec) []string {
	var out []string
	for _, s := range specs {
		for _, p := range s.Passes {
			out = append(out, p.Table)
			for _, g := range p.Guards {
				out = append(out, g.Table)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// missingTables returns which of tables do not exist, resolved as the sweep statements resolve
// them (exact names, schema-qualified or on the search_path): one query, whatever their number.
func missingTables(ctx context.Context, pool *pgxpool.Pool, tables []string) ([]string, error) {
	if len(tables) == 0 {
		return nil, nil
	}
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = pgx.Identifier(strings.Split(t, ".")).Sanitize()
	}
	var idx []int32
	err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(i::int ORDER BY i), '{}')
  FROM unnest($1::text[]) WITH ORDINALITY AS t(name, i) WHERE to_regclass(name) IS NULL`, quoted).Scan(&idx)
	if err != nil {
		return nil, fmt.Errorf("look up the policy's tables: %w", err)
	}
	missing := make([]string, len(idx))
	for i, n := range idx {
		missing[i] = tables[n-1]
	}
	return missing, nil
}

// handleNotFound answers a path no route serves.
func handleNotFound(logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, logger, newError(http.StatusNotFound, codeNotFound, "no route %s", clip([]byte(r.URL.Path))))
	}
}

// handleMethodNotAllowed answers a known path asked with the wrong method, and lists the methods
// it takes in Allow, as RFC 9110 asks. chi hands a custom 405 handler no list, so it asks the
// router which methods match the path.
func handleMethodNotAllowed(logger *slog.Logger, mux *chi.Mux) http.HandlerFunc {
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	return func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		var allowed []string
		for _, m := range methods {
			if mux.Match(chi.NewRouteContext(), m, path) {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
		}
		writeError(w, r, logger, newError(http.StatusMethodNotAllowed, codeMethodNotAllowed,
			"%s is not served on %s", r.Method, clip([]byte(r.URL.Path))))
	}
}
