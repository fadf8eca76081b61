package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/migrations"
)

// readyTimeout bounds one readiness check: a probe that hangs is worse than one that fails.
const readyTimeout = 2 * time.Second

// sqlstateUndefinedTable is what a query on goose_db_version raises before any migration ran.
const sqlstateUndefinedTable = "42P01"

// handleHealthz serves GET /healthz: the process is up and serving. It never touches the
// database, so a database outage does not get every replica restarted.
func handleHealthz(logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, r, logger, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// readyAnswer is the body of a 200 from /readyz.
type readyAnswer struct {
	Status    string `json:"status"`
	Migration int64  `json:"migration"`
}

// handleReadyz serves GET /readyz: the database answers and holds every migration this build
// embeds. A database ahead of the build (a newer replica migrated it) is ready: migrations only
// add what older code ignores.
func handleReadyz(logger *slog.Logger, pool *pgxpool.Pool) http.Handler {
	latest, latestErr := migrations.Latest()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if latestErr != nil {
			writeError(w, r, logger, latestErr)
			return
		}
		if pool == nil {
			writeError(w, r, logger, newError(http.StatusServiceUnavailable, codeDatabaseUnreachable, "no database is configured"))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		applied, err := appliedMigration(ctx, pool)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == sqlstateUndefinedTable:
			writeError(w, r, logger, newError(http.StatusServiceUnavailable, codeMigrationsPending,
				"no migration is applied (no goose_db_version table): run api migrate up"))
		case err != nil:
			// /readyz is unauthenticated: the host, user and database names stay in the log.
			logger.Warn("readiness check failed", "request_id", requestIDFrom(r.Context()), "err", err)
			writeError(w, r, logger, newError(http.StatusServiceUnavailable, codeDatabaseUnreachable,
				"the database does not answer; the server log has the details"))
		case applied < latest:
			writeError(w, r, logger, newError(http.StatusServiceUnavailable, codeMigrationsPending,
				"the database is at migration %d, this build needs %d: run api migrate up", applied, latest))
		default:
			writeJSON(w, r, logger, http.StatusOK, readyAnswer{Status: "ready", Migration: applied})
		}
	})
}

// appliedMigration returns the newest migration goose recorded as applied, 0 for none.
func appliedMigration(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var v int64
	err := pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&v)
	return v, err
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
