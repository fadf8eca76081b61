package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/lease"
)

// holdSQL opens the transaction that keeps the lease's session for the run. Open, it pins its
// backend even behind a pooler in transaction mode, so the pid the lease names is the run's
// until it ends; it takes no snapshot past its first statement and writes nothing, so it holds
// back no vacuum; and its own idle timeout is off, since a server's timeout killing it would
// hand the lease to a second run while this one goes on.
const holdSQL = `BEGIN ISOLATION LEVEL READ COMMITTED, READ ONLY;
SET LOCAL idle_in_transaction_session_timeout = 0`

// sessionSQL reads the pinned backend's pid and start.
const sessionSQL = `SELECT pg_backend_pid(), backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`

// acquireLease takes the sweep's lease for a session the run keeps: a connection taken out of
// the pool (the pool opens another in its place), in an open transaction, until done closes it
// after the lease is released. The lease row names that session, and a lease whose session is
// gone, its run having died with it, is taken over at once. A lease held by a live session is
// ErrHeld.
func (r *Runner) acquireLease(ctx context.Context, name string) (l *lease.Lease, done func(), err error) {
	c, err := r.cfg.Pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire lease %q: take a connection: %w", name, err)
	}
	conn := c.Hijack()
	done = func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}
	s, err := holdSession(ctx, conn)
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("acquire lease %q: %w", name, err)
	}
	l, err = lease.AcquireFor(ctx, r.cfg.Pool, name, r.LeaseTTL(), s)
	if err != nil {
		done()
		return nil, nil, err
	}
	return l, done, nil
}

// holdSession opens the keeping transaction on conn and reads its session.
func holdSession(ctx context.Context, conn *pgx.Conn) (lease.Session, error) {
	var s lease.Session
	if _, err := conn.Exec(ctx, holdSQL); err != nil {
		return s, fmt.Errorf("keep a session: %w", err)
	}
	if err := conn.QueryRow(ctx, sessionSQL).Scan(&s.PID, &s.Started); err != nil {
		return s, fmt.Errorf("read the kept session: %w", err)
	}
	return s, nil
}
