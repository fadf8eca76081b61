// Package pace keeps a sweep within a budget of the server it runs on, between batches: a WAL
// rate (MAX_WAL_RATE), and a number of other active sessions (MAX_ACTIVE_SESSIONS), past a
// critical level of which a run stops instead of waiting. It is the budget language of gh-ost's
// --max-load and --critical-load and of pt-archiver's --max-lag, spoken on PostgreSQL.
//
// The WAL rate counts the whole server's WAL, read from pg_current_wal_insert_lsn(): what a
// standby replays and a WAL archive stores is the server's WAL, whoever wrote it, so a budget
// meant for them has to count all of it. The rail is the one writer that can be held back, so it
// spends what the others leave: alone on a server it uses nearly the whole budget, and beside an
// application that writes more than the budget by itself it waits. The arithmetic is a token
// bucket (bucket.go) whose burst is an eighth of a second of budget, and batches are sized so
// that one writes at most that much: any one-second window then holds at most 1.25 × the budget.
//
// Sessions are client backends of the same database running a statement (not idle, nor idle in
// a transaction), leaving out the reading session and the rail's own: those of the same role
// and application_name, which is why MAX_ACTIVE_SESSIONS needs DATABASE_URL to name one.
package pace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Cause names what a wait waited on: the label of the throttled metric, a key of the answer's
// throttledBy and a span's attribute.
type Cause string

// The causes of a wait between batches.
const (
	CauseReplicaLag     Cause = "replica-lag"
	CauseWALRate        Cause = "wal-rate"
	CauseActiveSessions Cause = "active-sessions"
)

// Causes returns every cause, in a fixed order.
func Causes() []Cause { return []Cause{CauseReplicaLag, CauseWALRate, CauseActiveSessions} }

// Querier is what the pacer's reads need of a pool or a connection.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DefaultRecheck is how often a wait on sessions reads them again.
const DefaultRecheck = 250 * time.Millisecond

// Limits are the budgets a pass keeps to; a zero field is off.
type Limits struct {
	// WALRate is the most WAL, in bytes per second, the server may write while a pass runs.
	WALRate int64
	// MaxSessions is the most other active sessions a batch may start beside.
	MaxSessions int
	// CriticalSessions is the number of other active sessions past which the run stops.
	CriticalSessions int
}

// Off reports whether no limit is set.
func (l Limits) Off() bool { return l.WALRate <= 0 && l.MaxSessions <= 0 && l.CriticalSessions <= 0 }

// Config configures a Pacer; everything but Limits defaults.
type Config struct {
	Limits
	// Recheck is how long a wait on sessions sleeps between reads; 0 is DefaultRecheck.
	Recheck time.Duration
	// Now is the clock of the bucket and of waits; nil is time.Now.
	Now func() time.Time
	// Sleep pauses for d or until ctx is done; nil is a timer.
	Sleep func(ctx context.Context, d time.Duration)
	// Logger says when a wait starts and ends; nil discards.
	Logger *slog.Logger
}

// Pacer holds the budgets of one process. Its WAL bucket is shared by every pass it paces, since
// they all spend the one server's WAL. A nil or Off Pacer never reads and never waits.
type Pacer struct {
	cfg Config
	mu  sync.Mutex
	wal bucket
}

// New returns the Pacer of cfg.
func New(cfg Config) *Pacer {
	if cfg.Recheck <= 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleepCtx
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pacer{cfg: cfg, wal: newBucket(cfg.WALRate)}
}

// Enabled reports whether the pacer has a limit to keep.
func (p *Pacer) Enabled() bool { return p != nil && !p.cfg.Off() }

// Limits returns the pacer's limits.
func (p *Pacer) Limits() Limits {
	if p == nil {
		return Limits{}
	}
	return p.cfg.Limits
}

// ErrNoPrivilege means the role cannot see other roles' sessions' state in pg_stat_activity:
// every other session would look idle, and the pacer would never wait.
var ErrNoPrivilege = errors.New("the role cannot see other sessions' state: grant it pg_monitor (or pg_read_all_stats)")

// ErrNoApplicationName means the rail's sessions carry no application_name, so they cannot be
// told from the application's.
var ErrNoApplicationName = errors.New("the connection names no application_name, which tells the rail's own sessions from the others: add application_name=sweeprail to DATABASE_URL")

// ErrNotPrimary means q reaches a standby, which writes no WAL of its own to pace.
var ErrNotPrimary = errors.New("the server is a standby (in recovery): the WAL rate is read on the primary")

// Check tells whether the pacer's reads work through q, so the API can refuse to boot with a pacer
// that would be blind: the WAL position on a primary, and the sessions' state with a role that
// sees it and an application_name of the rail's own.
func (p *Pacer) Check(ctx context.Context, q Querier) error {
	if !p.Enabled() {
		return nil
	}
	if p.cfg.WALRate > 0 {
		if _, err := readLSN(ctx, q); err != nil {
			return fmt.Errorf("check the WAL position: %w", err)
		}
	}
	if p.cfg.MaxSessions <= 0 && p.cfg.CriticalSessions <= 0 {
		return nil
	}
	var (
		role, app string
		allowed   bool
	)
	err := q.QueryRow(ctx, `SELECT current_user, current_setting('application_name'),
		pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')`).Scan(&role, &app, &allowed)
	switch {
	case err != nil:
		return fmt.Errorf("check the sessions' access: %w", err)
	case !allowed:
		return fmt.Errorf("check the sessions' access: role %s: %w", role, ErrNoPrivilege)
	case app == "":
		return fmt.Errorf("check the sessions' access: %w", ErrNoApplicationName)
	}
	if _, err := ActiveSessions(ctx, q); err != nil {
		return fmt.Errorf("check the sessions' access: %w", err)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// isRecovery reports whether err is PostgreSQL refusing a WAL function during recovery.
func isRecovery(err error) bool {
	var pgErr *pgconn.PgError
	// 55000 object_not_in_prerequisite_state: "recovery is in progress".
	return errors.As(err, &pgErr) && pgErr.Code == "55000"
}
