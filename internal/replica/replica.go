// Package replica reads how far a primary's standbys are behind it, and throttles work on the
// primary while any is too far: a retention drain is the largest WAL burst most clusters see, and
// a standby that falls behind serves stale reads and makes a failover slower.
//
// Everything is read on the primary, from pg_stat_replication and pg_replication_slots, in one
// query; the throttle never connects to a standby. What the primary cannot see it cannot
// throttle on: standbys of standbys (cascading replication) and replicas that do not stream
// from it (Aurora's, say).
package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier is what reading the lag needs of a pool or a connection to the primary.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Kind tells a streaming standby from a replication slot.
type Kind string

// The kinds of Lag.
const (
	// KindStandby is a standby streaming from the primary now: a row of pg_stat_replication.
	KindStandby Kind = "standby"
	// KindSlot is a physical replication slot, whose consumer may be connected or not.
	KindSlot Kind = "slot"
)

// Lag is how far one standby, or one physical replication slot, is behind the primary.
type Lag struct {
	Kind Kind
	// Name is the standby's application_name, or the slot's name.
	Name string
	// Bytes is the WAL the primary has written that the standby has not replayed yet, or, for a
	// slot, that the slot still holds for its consumer.
	Bytes int64
	// Replay is the standby's replay_lag; 0 when PostgreSQL shows none (NULL: a standby that has
	// been caught up and idle for a while, or one that just connected), and for a slot.
	Replay time.Duration
	// Reported is when the standby sent the status message Replay was computed from
	// (reply_time, on the standby's clock); zero for a slot. Two reads with the same Reported
	// saw the same report.
	Reported time.Time
	// Position is the primary's WAL position at the read, in bytes from 0/0: the standby has
	// replayed up to Position - Bytes.
	Position int64
	// Behind is how long ago the oldest WAL the standby has not replayed was written, as a
	// Throttle's own reads date it (see walClock); 0 from Read, which keeps no history.
	Behind time.Duration
	// CatchUp is how long the standby will take to replay what it has left, at the rate it
	// replayed over the last second of a Throttle's reads; 0 when that rate is not known yet.
	CatchUp time.Duration
}

// ErrNoPrivilege means the role cannot see the standbys' positions: PostgreSQL shows
// pg_stat_replication's rows to every role but fills them only for superusers and members of
// pg_read_all_stats (pg_monitor includes it). Without it every standby would look caught up, so
// a throttle refuses to run blind rather than never throttle.
var ErrNoPrivilege = errors.New("the role cannot read the standbys' replication positions: grant it pg_monitor (or pg_read_all_stats)")

// ErrNotPrimary means the pool is connected to a standby, where pg_current_wal_lsn() does not
// exist: the throttle must read the primary, the server the sweeps write to.
var ErrNotPrimary = errors.New("the server is a standby (in recovery): the replica lag is read on the primary")

// lagSQL reads every standby and every physical slot in one round trip, against one
// pg_current_wal_lsn(); docs/CRON.md ("Replica lag") says what counts and why. Standbys are
// walsenders that replay (not pg_basebackup's, pg_receivewal's or logical ones); a NULL state is
// a row the role may not see into, returned so the caller refuses it. A slot counts by
// restart_lsn, what it makes the primary keep: a disconnected standby; a lost one is left out.
const lagSQL = `
WITH cur AS (SELECT pg_current_wal_lsn() AS lsn)
SELECT 'standby', coalesce(r.application_name, ''), r.state IS NULL,
       coalesce(greatest(pg_wal_lsn_diff(cur.lsn, r.replay_lsn), 0), 0)::bigint,
       coalesce((extract(epoch FROM r.replay_lag) * 1000000)::bigint, 0), r.reply_time,
       pg_wal_lsn_diff(cur.lsn, '0/0')::bigint
  FROM pg_stat_replication r, cur
 WHERE (r.state IS NULL OR (r.state IN ('streaming', 'catchup') AND r.replay_lsn IS NOT NULL))
   AND NOT EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical')
UNION ALL
SELECT 'slot', s.slot_name, false, greatest(pg_wal_lsn_diff(cur.lsn, s.restart_lsn), 0)::bigint, 0, NULL,
       pg_wal_lsn_diff(cur.lsn, '0/0')::bigint
  FROM pg_replication_slots s, cur
 WHERE s.slot_type = 'physical' AND s.restart_lsn IS NOT NULL AND s.wal_status IS DISTINCT FROM 'lost'`

// Read returns the lag of every standby streaming from the primary q is connected to, and of
// every physical replication slot. It returns ErrNoPrivilege when the role cannot see into a
// standby's row, and ErrNotPrimary when q is connected to a standby.
func Read(ctx context.Context, q Querier) ([]Lag, error) {
	rows, err := q.Query(ctx, lagSQL)
	if err != nil {
		return nil, readError(err)
	}
	var (
		lags   []Lag
		hidden bool
	)
	for rows.Next() {
		var (
			l      Lag
			kind   string
			hide   bool
			micros int64
			at     *time.Time
		)
		if err := rows.Scan(&kind, &l.Name, &hide, &l.Bytes, &micros, &at, &l.Position); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read replica lag: %w", err)
		}
		if hide {
			hidden = true
			continue
		}
		l.Kind, l.Replay = Kind(kind), time.Duration(micros)*time.Microsecond
		if at != nil {
			l.Reported = *at
		}
		lags = append(lags, l)
	}
	if err := rows.Err(); err != nil {
		return nil, readError(err)
	}
	if hidden {
		return nil, fmt.Errorf("read replica lag: %w", ErrNoPrivilege)
	}
	return lags, nil
}

// readError names the two refusals an operator can fix.
func readError(err error) error {
	if isRecovery(err) {
		return fmt.Errorf("read replica lag: %w", ErrNotPrimary)
	}
	return fmt.Errorf("read replica lag: %w", err)
}

// Check tells whether replica lag can be read through q: the role may see the standbys'
// positions, and q is connected to a primary. Read finds the first only when a standby is
// connected; Check finds it at once, so the API can refuse to boot with a throttle that would be
// blind.
func Check(ctx context.Context, q Querier) error {
	var (
		allowed, recovery bool
		role              string
	)
	err := q.QueryRow(ctx, `SELECT current_user, pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'), pg_is_in_recovery()`).
		Scan(&role, &allowed, &recovery)
	if err != nil {
		return fmt.Errorf("check replica lag access: %w", err)
	}
	if recovery {
		return fmt.Errorf("check replica lag access: %w", ErrNotPrimary)
	}
	if !allowed {
		return fmt.Errorf("check replica lag access: role %s: %w", role, ErrNoPrivilege)
	}
	if _, err := Read(ctx, q); err != nil {
		return fmt.Errorf("check replica lag access: %w", err)
	}
	return nil
}
