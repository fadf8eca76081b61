package statement

import "time"

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
}

// Begin is the statements that begin the transaction, for pgx.TxOptions.BeginQuery: sent
// without arguments, pgx runs them in one round trip through the simple protocol.
func (b BatchTransaction) Begin() string {
	return render("begin", struct {
		StatementTimeoutMs, LockTimeoutMs, IdleTimeoutMs int64
		SyncCommit, Ordered                              bool
	}{wholeMs(b.StatementTimeout), wholeMs(b.LockTimeout), wholeMs(b.IdleTimeout), b.SyncCommit, b.Ordered})
}

// wholeMs is d in whole milliseconds, at least 1: a setting of 0 would turn its bound off.
func wholeMs(d time.Duration) int64 { return max(d.Milliseconds(), 1) }
