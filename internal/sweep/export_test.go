package sweep

import (
	"time"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// WithTestKnobs returns cfg with the test knobs set: every batched pass on path (empty: chosen),
// the heap path's ranges fixed at heapBlocks blocks (0: adaptive), the first attempt's lock
// timeout rowLockWait (0: rowLockTimeout), and every batch in the locking form when alwaysLock.
func WithTestKnobs(cfg Config, path Path, heapBlocks uint32, rowLockWait time.Duration, alwaysLock bool) Config {
	cfg.AccessPath, cfg.heapBlocks, cfg.rowLockWait, cfg.alwaysLock = path, heapBlocks, rowLockWait, alwaysLock
	return cfg
}

// HeapBatchSQL is pass p's heap-path batch in its first form, for a timestamptz age column;
// capped, the form of a pass with max_rows (which binds the rows it leaves as $4).
func HeapBatchSQL(p policy.Pass, capped bool) string {
	if capped {
		p.MaxRows = max(p.MaxRows, 1)
	}
	return statement.Build(p, statement.Instant).Unlocked.Heap.SQL
}

// ReadFingerprint is a run's fingerprint read: in a read-only transaction under timeouts t.
var ReadFingerprint = readFingerprint

// NewPendingTx is a batch's transaction whose begin rides with its first statement.
var NewPendingTx = newPendingTx
