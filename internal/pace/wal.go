package pace

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// freshEnd is how old a position read behind a batch's COMMIT may be for the next Wait to spend
// it instead of reading its own: the batch loop's own work between the two takes microseconds,
// and a pause or a wait on the replicas in between is time whose WAL the bucket would charge a
// batch late.
const freshEnd = 10 * time.Millisecond

// lsnSQL reads the server's WAL insert position in bytes from 0/0. The insert position, not the
// write position: a batch that commits asynchronously (BATCH_SYNC_COMMIT off) leaves its WAL in
// the buffers for up to wal_writer_delay, and the pacer must see it as soon as it is written.
const lsnSQL = `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint`

// readLSN reads the WAL position through q.
func readLSN(ctx context.Context, q Querier) (int64, error) {
	var lsn int64
	if err := q.QueryRow(ctx, lsnSQL).Scan(&lsn); err != nil {
		if isRecovery(err) {
			return 0, ErrNotPrimary
		}
		return 0, fmt.Errorf("read the WAL position: %w", err)
	}
	return lsn, nil
}

// EndRead is the read of the WAL position to send behind a batch's COMMIT, in its round trip:
// where the batch ended, which the next Wait spends instead of a round trip of its own. sql is
// "" when the pass does not pace the WAL rate. scan takes the read's row; a read that failed
// leaves the next Wait to read for itself.
func (ps *Pass) EndRead() (sql string, scan func(pgx.Row)) {
	if ps == nil || ps.p.cfg.WALRate <= 0 {
		return "", nil
	}
	return lsnSQL, func(row pgx.Row) {
		var lsn int64
		if row.Scan(&lsn) == nil {
			ps.ended, ps.endedAt = lsn, ps.p.cfg.Now()
		}
	}
}

// walWait reads the WAL position and waits while the bucket owes, reading again after each
// sleep, never past until. It returns the time waited and the first and last positions read:
// where the last batch ended, and where the next one begins.
func (ps *Pass) walWait(ctx context.Context, q Querier, until time.Time) (waited time.Duration, first, last int64, err error) {
	p := ps.p
	start := p.cfg.Now()
	for {
		lsn, err := ps.position(ctx, q, p.cfg.Now())
		if err != nil {
			return p.cfg.Now().Sub(start), first, last, fmt.Errorf("pace the WAL rate: %w", err)
		}
		if first == 0 {
			first = lsn
		}
		last = lsn
		now := p.cfg.Now()
		p.mu.Lock()
		wait := p.wal.observe(now, lsn)
		p.mu.Unlock()
		left := until.Sub(now)
		if wait <= 0 || left <= 0 {
			return now.Sub(start), first, last, nil
		}
		p.cfg.Sleep(ctx, min(wait, left))
		if err := ctx.Err(); err != nil {
			return p.cfg.Now().Sub(start), first, last, err
		}
	}
}

// position is the WAL position at now: the one read behind the last batch's COMMIT when it is
// fresh (spent once), else one read through q.
func (ps *Pass) position(ctx context.Context, q Querier, now time.Time) (int64, error) {
	ended, at := ps.ended, ps.endedAt
	ps.ended = 0
	if ended > 0 && now.Sub(at) <= freshEnd {
		return ended, nil
	}
	return readLSN(ctx, q)
}
