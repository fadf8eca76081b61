package sweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	bt := s.batchTransaction(lockTimeout, pr.aids.arch != nil, ordered)
	bt.SearchPath = pr.searchPath
	tx := newPendingTx(pr.conn.Conn(), pr.r.beginSQL(bt))
	// end rolls tx back while the server holds it open. It reads the connection, not pgx's tx,
	// which CommitBatch's own COMMIT leaves taken for open: after a commit it costs nothing.
	end := func() {
		if pc := tx.Conn().PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
			tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the batch's error is the one to report
		}
	}
	defer end()
	if pr.searchPath == "" {
		if err := tx.QueryRow(ctx, statement.SearchPathSQL).Scan(&pr.searchPath); err != nil {
			return fmt.Errorf("read the batch's search_path: %w", err)
		}
	}
	if err := pr.measure(ctx, tx, fn); err != nil {
		return err
	}
	committing := pr.r.cfg.Now()
	err := pr.r.cfg.History.CommitBatch(ctx, tx, pr.of.id, pr.p.Name, pr.batchNumber(), b.n, pr.afterCommit()...)
	if bt.SyncCommit {
		// Only a commit that waits for its flush: one that does not is quick unless deferred
		// constraint checks run in it, and those grow with the rows like the batch's work.
		b.committing = pr.r.cfg.Now().Sub(committing)
	}
	var cerr *history.CommitError
	if errors.As(err, &cerr) {
		// A failure of the client's own may leave the transaction open: it ends before the
		// runner asks how it ended, or the question would wait for it.
		end()
		return pr.lostCommit(*b, cerr)
	}
	return err
}

// afterCommit are the reads that go behind a batch's COMMIT in its round trip: the pacer's WAL
// position, where it paces the WAL rate.
func (pr *passRun) afterCommit() []history.After {
	sql, scan := pr.aids.pacing.EndRead()
	if sql == "" {
		return nil
	}
	return []history.After{{SQL: sql, Scan: scan}}
}

// releaseConn gives the pass's connection back to the pool, if it holds one.
func (pr *passRun) releaseConn() {
	if pr.conn != nil {
		pr.conn.Release()
		pr.conn = nil
	}
}

// batchTransaction is how a batch begins under s: lockTimeout as its lock timeout, committing
// with its own WAL flush when s asks or archiving does (an archive may be on another server).
func (s Settings) batchTransaction(lockTimeout time.Duration, archiving, ordered bool) statement.BatchTransaction {
	return statement.BatchTransaction{StatementTimeout: s.StatementTimeout, LockTimeout: lockTimeout,
		IdleTimeout: 2 * s.StatementTimeout, SyncCommit: archiving || s.SyncCommit, Ordered: ordered,
		WALCompression: s.WALCompression, FlushAfter: s.FlushAfter}
}

// beginSQL is b.Begin(), rendered once per runner for each b.
func (r *Runner) beginSQL(b statement.BatchTransaction) []string {
	if sql, ok := r.begins.Load(b); ok {
		return sql.([]string)
	}
	sql := b.Begin()
	r.begins.Store(b, sql)
	return sql
}

// ErrWALCompressionDenied means the role may not set wal_compression, a superuser's setting.
var ErrWALCompressionDenied = errors.New("the role may not set wal_compression: GRANT SET ON PARAMETER wal_compression TO the role " +
	"(PostgreSQL 15 and later; before that only a superuser may set it), or unset BATCH_WAL_COMPRESSION")

// ErrWALCompressionUnknown means the server takes no such wal_compression: a method it was built
// without, or a method by name on PostgreSQL 14, which takes on and off only.
var ErrWALCompressionUnknown = errors.New("the server takes no such wal_compression (a method it was built without, " +
	"or a method by name before PostgreSQL 15, which takes on or off): name another, or unset BATCH_WAL_COMPRESSION")

// ErrFlushAfterRefused means the server refused the batch's backend_flush_after: one built
// without the kernel's writeback hints takes 0 only.
var ErrFlushAfterRefused = errors.New("the server refuses backend_flush_after (a server built without writeback hints, " +
	"off Linux, takes 0 only): unset BATCH_FLUSH_AFTER")

// CheckBatchSettings begins a batch's transaction as a run would and rolls it back, once for each
// setting the server may refuse, so that the API refuses to boot on it rather than fail every
// batch, and the error names the setting: a wal_compression the role may not set
// (ErrWALCompressionDenied) or the server does not know (ErrWALCompressionUnknown), a
// backend_flush_after it does not take (ErrFlushAfterRefused). PostgreSQL's errors are read by
// SQLSTATE.
func (r *Runner) CheckBatchSettings(ctx context.Context) error {
	s := r.cfg.Settings
	b := s.batchTransaction(s.LockTimeout, false, false)
	if s.WALCompression != "" {
		only := b
		only.FlushAfter = 0
		err := r.beginOnce(ctx, only)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient_privilege
			return fmt.Errorf("begin a batch's transaction: wal_compression = %s: %w", s.WALCompression, ErrWALCompressionDenied)
		case errors.As(err, &pgErr) && pgErr.Code == "22023": // invalid_parameter_value
			return fmt.Errorf("begin a batch's transaction: wal_compression = %s: %w", s.WALCompression, ErrWALCompressionUnknown)
		case err != nil:
			return fmt.Errorf("begin a batch's transaction: %w", err)
		}
	}
	if s.FlushAfter != 0 {
		only := b
		only.WALCompression = ""
		err := r.beginOnce(ctx, only)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "22023": // invalid_parameter_value
			return fmt.Errorf("begin a batch's transaction: backend_flush_after = %dkB: %w: %w", s.FlushAfter>>10, ErrFlushAfterRefused, err)
		case err != nil:
			return fmt.Errorf("begin a batch's transaction: %w", err)
		}
	}
	return nil
}

// beginOnce begins a transaction as b does on a connection of the pool, and rolls it back.
func (r *Runner) beginOnce(ctx context.Context, b statement.BatchTransaction) error {
	c, err := r.cfg.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection: %w", err)
	}
	defer c.Release()
	tx := newPendingTx(c.Conn(), b.Begin())
	err = tx.open(ctx)
	if c.Conn().PgConn().TxStatus() != 'I' {
		err = errors.Join(err, tx.Rollback(ctx))
	}
	return err
}
