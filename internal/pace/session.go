package pace

import (
	"context"
	"fmt"
	"time"
)

// sessionsSQL counts the other active sessions of the database: client backends (not
// autovacuum, which the rail's own deletes wake, nor walsenders) running a statement, not idle
// nor idle in a transaction (which holds locks but no core), leaving out the reading session and
// every session of the rail's own role and application_name. A NULL state is hidden from the role.
const sessionsSQL = `
SELECT count(*) FILTER (WHERE state NOT LIKE 'idle%'), count(*) FILTER (WHERE state IS NULL)
  FROM pg_stat_activity
 WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
   AND NOT (usename = current_user AND application_name = current_setting('application_name'))`

// ActiveSessions returns how many other sessions of the database q reaches are active now; it
// returns ErrNoPrivilege when some session's state is hidden from the role.
func ActiveSessions(ctx context.Context, q Querier) (int, error) {
	var active, hidden int
	if err := q.QueryRow(ctx, sessionsSQL).Scan(&active, &hidden); err != nil {
		return 0, fmt.Errorf("read the active sessions: %w", err)
	}
	if hidden > 0 {
		return 0, fmt.Errorf("read the active sessions: %w", ErrNoPrivilege)
	}
	return active, nil
}

// CriticalError is the run stopping because more other sessions were active than the critical
// level allows.
type CriticalError struct {
	Active, Critical int
}

func (e *CriticalError) Error() string {
	return fmt.Sprintf("%d other sessions active, over MAX_ACTIVE_SESSIONS_CRITICAL %d: the run stops rather than add load", e.Active, e.Critical)
}

// sessionWait reads the active sessions and waits while more than MaxSessions are, reading again
// every Recheck, never past until; past CriticalSessions it returns a *CriticalError at once.
func (ps *Pass) sessionWait(ctx context.Context, q Querier, until time.Time) (time.Duration, error) {
	p := ps.p
	l := p.cfg.Limits
	start := p.cfg.Now()
	for reads := 0; ; reads++ {
		n, err := ActiveSessions(ctx, q)
		if err != nil {
			return p.cfg.Now().Sub(start), fmt.Errorf("pace the active sessions: %w", err)
		}
		now := p.cfg.Now()
		if l.CriticalSessions > 0 && n > l.CriticalSessions {
			p.cfg.Logger.Info("stopped: other sessions over the critical level", "active", n, "critical", l.CriticalSessions)
			return now.Sub(start), &CriticalError{Active: n, Critical: l.CriticalSessions}
		}
		if l.MaxSessions <= 0 || n <= l.MaxSessions {
			if reads > 0 {
				p.cfg.Logger.Debug("active sessions back within the limit", "waited_ms", now.Sub(start).Milliseconds(), "active", n)
			}
			return now.Sub(start), nil
		}
		if reads == 0 {
			p.cfg.Logger.Debug("throttled: other sessions over the limit", "active", n, "max", l.MaxSessions)
		}
		left := until.Sub(now)
		if left <= 0 {
			return now.Sub(start), nil
		}
		p.cfg.Sleep(ctx, min(p.cfg.Recheck, left))
		if err := ctx.Err(); err != nil {
			return p.cfg.Now().Sub(start), err
		}
	}
}
