package statement

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/config"
)

// BatchTransaction is how a batch's transaction begins: its bounds, and the commit and planner
// settings it runs under (sql/transaction.sql says why each).
type BatchTransaction struct {
	// StatementTimeout, LockTimeout and IdleTimeout bound the batch's statements, its waits
	// for locks and its idle time in the transaction, in whole milliseconds (at least one).
	StatementTimeout, LockTimeout, IdleTimeout time.Duration
	// SyncCommit makes the commit wait for the batch's own WAL flush.
	SyncCommit bool
	// Ordered prices out sorts and sequential scans, for the index path.
	Ordered bool
	// WALCompression is the batch's wal_compression, one of config.WALCompressions; empty keeps
	// the server's.
	WALCompression string
	// FlushAfter is the batch's backend_flush_after in bytes, whole config.FlushAfterPage pages
	// up to config.MaxFlushAfter; zero keeps the server's.
	FlushAfter int64
	// SearchPath is the search_path a batch before computed (SearchPathSQL read it), which this
	// one sets as it is; empty computes it, pg_temp last.
	SearchPath string
}

// SearchPathSQL reads the search_path a batch's transaction runs under, once Begin has set it.
const SearchPathSQL = `SELECT current_setting('search_path')`

// Check refuses a WALCompression other than empty or one of config.WALCompressions, and a
// FlushAfter PostgreSQL would refuse or round: both are written into SQL, so nothing else may
// reach Begin.
func (b BatchTransaction) Check() error { return checkWrites(b.WALCompression, b.FlushAfter) }

// checkWrites refuses a wal_compression other than empty or one of config.WALCompressions, and a
// backend_flush_after in bytes PostgreSQL would refuse or round.
func checkWrites(walCompression string, flushAfter int64) error {
	if walCompression != "" && !slices.Contains(config.WALCompressions, walCompression) {
		return fmt.Errorf("wal_compression %q: want one of %s", walCompression, strings.Join(config.WALCompressions, ", "))
	}
	if flushAfter < 0 || flushAfter > config.MaxFlushAfter || flushAfter%config.FlushAfterPage != 0 {
		return fmt.Errorf("backend_flush_after %d bytes: want whole 8 KiB pages, at most 2 MiB", flushAfter)
	}
	return nil
}

// Begin is the statements that begin the transaction, BEGIN first, each on its own: they go out
// in one pipeline with the transaction's first statement (the extended protocol takes one
// statement a message).
func (b BatchTransaction) Begin() []string {
	v := struct {
		StatementTimeoutMs, LockTimeoutMs, IdleTimeoutMs int64
		SyncCommit, Ordered                              bool
		WALCompression, SearchPath                       string
		FlushAfterKB                                     int64
	}{wholeMs(b.StatementTimeout), wholeMs(b.LockTimeout), wholeMs(b.IdleTimeout), b.SyncCommit, b.Ordered, b.WALCompression,
		b.SearchPath, b.FlushAfter >> 10}
	return []string{render("begin", v), render("begin-session", v), render("begin-reset", v), render("begin-settings", v)}
}

// Timeouts bound a transaction that is no batch (a survey, a dry run's count, a check's probe, a
// partition's detach, the lag read), set on it locally with the search_path a batch runs under:
// they end with it, and the session keeps its own.
type Timeouts struct {
	// Statement and Lock are its statement_timeout and lock_timeout, in whole milliseconds (at
	// least one); zero leaves the session's setting.
	Statement, Lock time.Duration
	// WALCompression and FlushAfter are a batch's (BatchTransaction), for a read that writes what
	// the batches left: the first read of a page a drain emptied prunes it, WAL and a dirty page
	// as a batch's delete makes them. Empty and zero leave the session's.
	WALCompression string
	FlushAfter     int64
}

// SQL is the statement that sets t and the search_path, pg_temp last.
func (t Timeouts) SQL() string {
	var v struct {
		StatementMs, LockMs int64
		WALCompression      string
		FlushAfterKB        int64
	}
	if t.Statement > 0 {
		v.StatementMs = wholeMs(t.Statement)
	}
	if t.Lock > 0 {
		v.LockMs = wholeMs(t.Lock)
	}
	v.WALCompression, v.FlushAfterKB = t.WALCompression, t.FlushAfter>>10
	return render("timeouts", v)
}

// Set sets t on tx, in one round trip (no arguments: the simple protocol, which a pooler in
// transaction mode forwards as it is). It refuses what BatchTransaction.Check refuses: both are
// written into SQL.
func (t Timeouts) Set(ctx context.Context, tx pgx.Tx) error {
	if err := checkWrites(t.WALCompression, t.FlushAfter); err != nil {
		return fmt.Errorf("set timeouts: %w", err)
	}
	if _, err := tx.Exec(ctx, t.SQL()); err != nil {
		return fmt.Errorf("set timeouts: %w", err)
	}
	return nil
}

// wholeMs is d in whole milliseconds, at least 1: a setting of 0 would turn its bound off.
func wholeMs(d time.Duration) int64 { return max(d.Milliseconds(), 1) }
