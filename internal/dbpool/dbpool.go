// Package dbpool builds the PostgreSQL connections and pools sweeprail runs on. Every statement
// goes out in a query mode that needs no named prepared statement, so the same plain connection
// string works on a direct connection and through a transaction pooler (PgBouncer's
// pool_mode=transaction hands each transaction to any server connection, where a statement
// prepared on another is missing or already exists). Every connection goes back to its pool with
// its session reset, so that nothing one run leaves on it (a policy condition's set_config, a
// trigger's SET, a SET ROLE, an advisory lock) reaches whatever runs on it next; and the
// readiness probe gets a small pool of its own, which the sweeps cannot exhaust. Every socket has
// keepalives and a bound on unacknowledged data (dial.go).
package dbpool

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultQueryExecMode is the query mode of a connection string that names none. pgx's own
// default (cache_statement) prepares a named statement per query on each connection, which a
// transaction pooler breaks (42P05, 26000); exec sends each query with its parameters in one
// round trip through the unnamed statement, which every pooler passes. It costs the server a
// parse per statement, which a prepared one would save; the plan it would not, since a batch
// plans each execution anyway (plan_cache_mode=force_custom_plan).
const DefaultQueryExecMode = pgx.QueryExecModeExec

// execModeParam is the connection string parameter by which pgx takes a query mode; a string that
// sets it keeps its choice.
const execModeParam = "default_query_exec_mode"

// ConnConfig parses a connection string as pgx.ParseConfig does, with DefaultQueryExecMode unless
// the string sets default_query_exec_mode. Its error is pgx's, which may quote the connection
// string: the caller redacts it.
func ConnConfig(dsn string) (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if err := defaultExecMode(dsn, cc); err != nil {
		return nil, err
	}
	harden(&cc.Config)
	return cc, nil
}

// defaultExecMode sets cc, parsed from dsn, to DefaultQueryExecMode unless dsn names a query
// mode. pgx removes the parameter from the parsed config, so it is read from pgconn's parse,
// which keeps every unknown parameter.
func defaultExecMode(dsn string, cc *pgx.ConnConfig) error {
	c, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return err
	}
	if _, explicit := c.RuntimeParams[execModeParam]; !explicit {
		cc.DefaultQueryExecMode = DefaultQueryExecMode
	}
	return nil
}

// ResetSQL is what a released connection runs before it is pooled again, in one simple-protocol
// query, so it is also the last query pg_stat_activity shows for a connection at rest. It is
// DISCARD ALL without its DEALLOCATE ALL: pgx keeps a cache of prepared statements
// per connection, and deallocating them behind its back would fail their next use. RESET ALL
// returns every setting to the session's default, which keeps what the connection string set
// at startup (application_name, options=-c …). It comes before DISCARD TEMP, the one statement
// that may wait on a lock, so that wait is not bounded by a lock_timeout or statement_timeout
// the last holder left; what runs before it takes no lock (a tiny statement_timeout can still
// cancel it: then the connection is closed, as for any failed reset).
const ResetSQL = `CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; ` +
	`SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES`

// resetTimeout bounds one reset. A connection whose reset fails or times out is closed rather
// than pooled: one that may still carry a run's settings must never serve another.
const resetTimeout = 5 * time.Second

// probeConns is the size of the probe's pool: one probe at a time is what Kubernetes sends, a
// second lets a manual check or a signed request's replay check (one short INSERT) overlap it.
const probeConns = 2

// ParseConfig parses a connection string as pgxpool.ParseConfig does, in DefaultQueryExecMode
// unless the string names a mode, with the session reset on release (ResetOnRelease). Its error
// is pgx's, which may quote the connection string: the caller redacts it.
func ParseConfig(dsn string, logger *slog.Logger) (*pgxpool.Config, error) {
	cfg, err := PoolConfig(dsn)
	if err != nil {
		return nil, err
	}
	ResetOnRelease(cfg, logger)
	return cfg, nil
}

// PoolConfig parses a connection string as pgxpool.ParseConfig does, in DefaultQueryExecMode
// unless the string names a mode, without the reset on release: for the commands that run once
// and close their pool (migrate, policy check).
func PoolConfig(dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if err := defaultExecMode(dsn, cfg.ConnConfig); err != nil {
		return nil, err
	}
	harden(&cfg.ConnConfig.Config)
	return cfg, nil
}

// NewPool opens a pool on dsn as PoolConfig parses it. The pool connects lazily.
func NewPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := PoolConfig(dsn)
	if err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// Connect opens one connection on dsn as ConnConfig parses it.
func Connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cc, err := ConnConfig(dsn)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cc)
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
		if _, err := c.Exec(ctx, ResetSQL); err != nil {
			logger.Warn("reset a released connection; closing it instead", "err", err)
			return false
		}
		return true
	}
}

// ProbeConfig returns a copy of cfg for the pool of the readiness probe and the replay check, of
// probeConns connections. A probe that queued behind the sweeps for the main pool timed out and
// reported a healthy server as unreachable, and Kubernetes pulled it; a replay check that queued
// there held a dry run past its 429 until the counts ahead of it ended.
func ProbeConfig(cfg *pgxpool.Config) *pgxpool.Config {
	p := cfg.Copy()
	p.MaxConns = probeConns
	p.MinConns = 0
	p.MinIdleConns = 0
	return p
}
