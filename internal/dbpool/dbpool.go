// Package dbpool builds the PostgreSQL pools the API runs on. Every connection goes back to its
// pool with its session reset, so that nothing one run leaves on it (a policy condition's
// set_config, a trigger's SET, a SET ROLE, an advisory lock) reaches whatever runs on it next;
// and the readiness probe gets a small pool of its own, which the sweeps cannot exhaust.
package dbpool

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// resetSQL is DISCARD ALL without its DEALLOCATE ALL: pgx keeps a cache of prepared statements
// per connection, and deallocating them behind its back would fail their next use. RESET ALL
// returns every setting to the session's default, which keeps what the connection string set
// at startup (application_name, options=-c …).
const resetSQL = `CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; ` +
	`SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES`

// resetTimeout bounds one reset. A connection whose reset fails or times out is closed rather
// than pooled: one that may still carry a run's settings must never serve another.
const resetTimeout = 5 * time.Second

// probeConns is the size of the probe's pool: one probe at a time is what Kubernetes sends, and
// a second lets a manual check overlap it.
const probeConns = 2

// ParseConfig parses a connection string as pgxpool.ParseConfig does, with the session reset on
// release (ResetOnRelease). Its error is pgx's, which may quote the connection string: the
// caller redacts it.
func ParseConfig(dsn string, logger *slog.Logger) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	ResetOnRelease(cfg, logger)
	return cfg, nil
}

// ResetOnRelease makes cfg's pool reset each connection's session as it is released, before any
// other acquirer can have it (pgxpool holds it back until AfterRelease returns). A connection
// released inside a transaction never gets here: pgxpool closes it. logger may be nil.
func ResetOnRelease(cfg *pgxpool.Config, logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.AfterRelease = func(c *pgx.Conn) bool {
		ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
		defer cancel()
		if _, err := c.Exec(ctx, resetSQL); err != nil {
			logger.Warn("reset a released connection; closing it instead", "err", err)
			return false
		}
		return true
	}
}

// ProbeConfig returns a copy of cfg for the readiness probe's own pool, of probeConns
// connections. A probe that queued behind the sweeps for the main pool timed out and reported a
// healthy server as unreachable, and Kubernetes pulled it.
func ProbeConfig(cfg *pgxpool.Config) *pgxpool.Config {
	p := cfg.Copy()
	p.MaxConns = probeConns
	p.MinConns = 0
	p.MinIdleConns = 0
	return p
}
