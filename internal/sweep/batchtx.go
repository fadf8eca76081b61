package sweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// inTx runs fn in one batch transaction under the batch settings, lockTimeout as its lock timeout,
// writes the record of b, the batch fn leaves there, in it (so that the record commits exactly
// when the batch does), and commits it. A COMMIT whose reply is lost is settled (lostCommit).
// ordered prices out sorts and sequential scans, for the index path: left to its
// estimates the planner may read and sort every remaining eligible row for a LIMIT, each batch
// (docs/BENCHMARKS.md measured it on a 1% backlog scattered over 5M rows).
func (pr *passRun) inTx(lockTimeout time.Duration, ordered bool, b *batchResult, fn func(ctx context.Context, tx pgx.Tx) error) error {
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
		IdleTimeout: 2 * s.StatementTimeout, SyncCommit: pr.aids.arch != nil || s.SyncCommit, Ordered: ordered}
	tx, err := pr.conn.BeginTx(ctx, pgx.TxOptions{BeginQuery: begin.Begin()})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// end rolls tx back while the server holds it open. It reads the connection, not pgx's tx,
	// which CommitBatch's own COMMIT leaves taken for open: after a commit it costs nothing.
	end := func() {
		if pc := tx.Conn().PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
			tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the batch's error is the one to report
		}
	}
	defer end()
	if err := pr.measure(ctx, tx, fn); err != nil {
		return err
	}
	err = pr.r.cfg.History.CommitBatch(ctx, tx, pr.of.id, pr.p.Name, pr.batchNumber(), b.n)
	var cerr *history.CommitError
	if errors.As(err, &cerr) {
		// A failure of the client's own may leave the transaction open: it ends before the
		// runner asks how it ended, or the question would wait for it.
		end()
		return pr.lostCommit(*b, cerr)
	}
	return err
}

// releaseConn gives the pass's connection back to the pool, if it holds one.
func (pr *passRun) releaseConn() {
	if pr.conn != nil {
		pr.conn.Release()
		pr.conn = nil
	}
}
