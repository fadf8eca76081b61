package pace

import (
	"context"
	"fmt"
	"time"
)

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

// walWait reads the WAL position and waits while the bucket owes, reading again after each
// sleep, never past until. It returns the time waited and the first and last positions read:
// where the last batch ended, and where the next one begins.
func (ps *Pass) walWait(ctx context.Context, q Querier, until time.Time) (waited time.Duration, first, last int64, err error) {
	p := ps.p
	start := p.cfg.Now()
	for {
		lsn, err := readLSN(ctx, q)
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
