package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/statement"
)

// inTx runs fn in one batch transaction under the batch settings, lockTimeout as its lock timeout,
// and commits it. ordered prices out sorts and sequential scans in the transaction, for the index
// path: its bound then reads the age index in order, a batch of entries, as the policy check's
// index verdict plans it, and its range of ages is read through the index (a bitmap, in heap
// order), never the whole table. Left to its estimates the planner may read every remaining
// eligible row and sort them for a LIMIT, and every batch re-reads what is left of the backlog
// (measured in docs/BENCHMARKS.md on a 1% backlog scattered over 5M rows, where a redundant
// `read_at IS NOT NULL` made it guess 20 times too few rows).
func (pr *passRun) inTx(lockTimeout time.Duration, ordered bool, fn func(ctx context.Context, tx pgx.Tx) error) error {
	s := pr.r.cfg.Settings
	// The client-side timeout is a backstop for a connection that stops answering; the server's
	// statement timeout fires first in every other case.
	ctx, cancel := context.WithTimeout(pr.db, s.StatementTimeout+5*time.Second)
	defer cancel()
	if pr.conn == nil {
		c, err := pr.r.cfg.Pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("acquire a connection: %w", err)
		}
		pr.conn = c
	}
	// A connection that broke, or that a failed begin left in a transaction, goes back to the
	// pool (which closes it) and the next batch takes another.
	defer func() {
		if pr.conn == nil {
			return
		}
		if c := pr.conn.Conn(); c.IsClosed() || c.PgConn().TxStatus() != 'I' {
			pr.releaseConn()
		}
	}()
	begin := statement.BatchTransaction{StatementTimeout: s.StatementTimeout, LockTimeout: lockTimeout,
		IdleTimeout: 2 * s.StatementTimeout, SyncCommit: pr.arch != nil || s.SyncCommit, Ordered: ordered}
	tx, err := pr.conn.BeginTx(ctx, pgx.TxOptions{BeginQuery: begin.Begin()})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit
	if err := pr.measure(ctx, tx, fn); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// releaseConn gives the pass's connection back to the pool, if it holds one.
func (pr *passRun) releaseConn() {
	if pr.conn != nil {
		pr.conn.Release()
		pr.conn = nil
	}
}
