// Package lease owns the single-flight lease on table sweeprail.sweep_lock (Table): at most one run
// of a sweep at a time, across any number of API replicas. The table is sweeprail's own, created
// by `api migrate up` (the migrations package's Sweeprail set), apart from the tables it sweeps.
//
// Every timestamp comes from the database's now(), never the application's clock, so replicas
// with skewed clocks still agree on who holds a lease and when it expires.
package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Table is the lease table, schema-qualified: the statements name it so whatever the role's
// search_path, and the migrations package's Sweeprail set lists it as required.
const Table = "sweeprail.sweep_lock"

// Querier is what Acquire needs of a pool or a connection.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Execer is what Release needs of a pool or a connection.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Lease is a held lease. Its Owner fences Release: a run that outlived its TTL cannot release
// the lease its successor took over.
type Lease struct {
	Label string
	Owner uuid.UUID
	// LockedAt is the database's now() when the lease was taken: the run's clock reading.
	LockedAt    time.Time
	LockedUntil time.Time
	// TookOver is the owner of the lease this one replaced before its TTL ended, its session
	// being gone; nil when the lease was free or expired.
	TookOver *uuid.UUID
}

// Holder describes the lease someone else holds.
type Holder struct {
	Owner       uuid.UUID
	LockedAt    time.Time
	LockedUntil time.Time
}

// ErrHeld is returned by Acquire when another owner holds an unexpired lease.
var ErrHeld = errors.New("lease held")

// acquireSQL inserts the lease, or takes over an expired one or one whose holder's session is
// gone, in one statement. The conflict update's WHERE makes the row come back only to the winner:
// a live holder's row is left alone and RETURNING yields nothing. Concurrent inserts of one label
// serialise on the primary key. The row keeps the holding session's pid and backend start ($4
// and $5); a session another role's, whose start pg_stat_activity hides without
// pg_read_all_stats, counts as alive while its pid is there. The statement reads
// pg_stat_activity only in the conflict's WHERE, after the row lock: a backend reads the activity
// of all sessions once per transaction, and a read before the wait would not see a holder whose
// session began meanwhile, and take its lease. The last column is the replaced owner when its TTL
// had not ended.
const acquireSQL = `
WITH prior AS (SELECT owner, locked_until FROM sweeprail.sweep_lock WHERE label = $1)
INSERT INTO sweeprail.sweep_lock AS l (label, owner, locked_at, locked_until, holder_pid, holder_started)
VALUES ($1, $2, now(), now() + $3 * interval '1 microsecond', $4::int, $5::timestamptz)
ON CONFLICT (label) DO UPDATE
   SET owner = EXCLUDED.owner, locked_at = EXCLUDED.locked_at, locked_until = EXCLUDED.locked_until,
       holder_pid = EXCLUDED.holder_pid, holder_started = EXCLUDED.holder_started
 WHERE l.locked_until < now()
    OR l.holder_pid IS NOT NULL AND NOT EXISTS (
         SELECT 1 FROM pg_stat_activity a
          WHERE a.pid = l.holder_pid AND (a.backend_start IS NULL OR a.backend_start = l.holder_started))
RETURNING locked_at, locked_until, (SELECT owner FROM prior WHERE prior.locked_until >= now())`

// Acquire takes the lease label for ttl under a fresh owner, for the session db runs on: the
// caller keeps that session open until it releases the lease, since a lease whose session is
// gone is taken over at once (Lease.TookOver says so). It returns ErrHeld, wrapped with the
// holder's details, when another owner holds it.
func Acquire(ctx context.Context, db Querier, label string, ttl time.Duration) (*Lease, error) {
	return acquire(ctx, db, label, ttl, nil)
}

// Session is a backend that holds a lease for its whole run: its pid and its backend start.
type Session struct {
	PID     int32
	Started time.Time
}

// AcquireFor takes the lease label for ttl, as Acquire does, on behalf of the session s, which
// the caller keeps (in an open transaction, so that a pooler in transaction mode cannot give
// its backend to another client) until it releases the lease: db may be any connection.
func AcquireFor(ctx context.Context, db Querier, label string, ttl time.Duration, s Session) (*Lease, error) {
	return acquire(ctx, db, label, ttl, &s)
}

func acquire(ctx context.Context, db Querier, label string, ttl time.Duration, s *Session) (*Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("acquire lease %q: ttl must be positive, got %s", label, ttl)
	}
	owner, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("acquire lease %q: new owner: %w", label, err)
	}
	l := &Lease{Label: label, Owner: owner}
	if s == nil {
		// The acquiring session holds it: read in a statement of its own (see acquireSQL).
		s = &Session{}
		if err := db.QueryRow(ctx, `SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&s.PID, &s.Started); err != nil {
			return nil, fmt.Errorf("acquire lease %q: read the session: %w", label, err)
		}
	}
	err = db.QueryRow(ctx, acquireSQL, label, owner, ttl.Microseconds(), s.PID, s.Started).Scan(&l.LockedAt, &l.LockedUntil, &l.TookOver)
	if errors.Is(err, pgx.ErrNoRows) {
		h, herr := holder(ctx, db, label)
		if herr != nil {
			return nil, fmt.Errorf("acquire lease %q: %w", label, ErrHeld)
		}
		return nil, &HeldError{Label: label, Holder: h}
	}
	if err != nil {
		return nil, fmt.Errorf("acquire lease %q: %w", label, err)
	}
	return l, nil
}

// HeldError reports the holder of a lease that Acquire could not take. It matches ErrHeld.
type HeldError struct {
	Label  string
	Holder Holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %q held by %s until %s", e.Label, e.Holder.Owner, e.Holder.LockedUntil.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

func holder(ctx context.Context, db Querier, label string) (Holder, error) {
	var h Holder
	err := db.QueryRow(ctx, `SELECT owner, locked_at, locked_until FROM sweeprail.sweep_lock WHERE label = $1`, label).
		Scan(&h.Owner, &h.LockedAt, &h.LockedUntil)
	return h, err
}

// Release deletes the lease if, and only if, l's owner still holds it. It reports whether a row
// was deleted: false means the lease expired and was taken over (or cleared by hand).
func Release(ctx context.Context, db Execer, l *Lease) (bool, error) {
	tag, err := db.Exec(ctx, `DELETE FROM sweeprail.sweep_lock WHERE label = $1 AND owner = $2`, l.Label, l.Owner)
	if err != nil {
		return false, fmt.Errorf("release lease %q: %w", l.Label, err)
	}
	return tag.RowsAffected() == 1, nil
}
