// Package sweep is the retention engine: the Runner that takes a sweep's lease and runs its
// passes in order under one time budget, a pass's batch loop and access paths, the dry run, and
// the glue of archive_to and mode partitions. What a pass says is package policy's; the SQL it
// runs is package statement's; the live-schema check before boot is package check's.
//
// Where things are:
//
//	runner.go          Runner, Config and Run: the lease, the reference time, the passes in order
//	names.go           the statements of every pass, naming the tables the check resolved
//	pass.go            one pass of one run: the batch loop, adaptive sizes, the replica throttle
//	reproof.go         before a pass's first batch: its schema against its proof, re-proved
//	pace.go            the waits on the WAL rate and the active sessions (package pace)
//	batch.go           one batch: its form (a statement.Form), its arguments, its batchResult;
//	                   no row locks first, retried once in the locking form on a held row
//	batchtx.go         one batch's transaction, on the pass's connection, with its record
//	begintx.go         a batch's transaction whose begin rides with its first statement
//	commitlost.go      a batch whose COMMIT's reply was lost: asked on a fresh connection
//	settle.go          the earlier runs' batches of unknown outcome, settled under the lease
//	indexbatch.go      the index path's batch: a range of ages from the cursor
//	path.go            the access paths, the survey they are chosen from, per pass and run
//	heaprange.go       the heap path's block ranges, and the index path's cursor
//	archive.go         archive_to: the archiver, its statements for the run
//	archiveproof.go    the archiver's proof of each batch, and its healing of the crash window
//	archivelost.go     a foreign archive read back after each commit; the halt of its sweep
//	cascadestats.go    a run's count of what cascades did, from the transaction's statistics
//	deletewith.go      delete_with children's rows in an answer
//	partitions.go      mode partitions: detach and drop, then the boundary's batches
//	dryrun.go          DryRun: counts, estimates and the index verdict, writing nothing
//	dryruncount.go     the dry run's count statement, cascades included, and its rows
//	dryruntriggers.go  the dry run's list of DELETE triggers
//	lag.go             the retention lag of each pass, read at the end of a run
//
// The answers the API serves are the types of package wire.
package sweep

import (
	"errors"
	"time"
)

// ErrUnknownSweep is returned for a sweep name the catalog does not hold.
var ErrUnknownSweep = errors.New("unknown sweep")

// Settings bound every run of a Runner.
type Settings struct {
	// Deadline is one run's time budget, checked between batches.
	Deadline time.Duration
	// StatementTimeout and LockTimeout are set locally in each batch transaction.
	StatementTimeout time.Duration
	LockTimeout      time.Duration
	// CountTimeout bounds a dry run's exact count.
	CountTimeout time.Duration
	// BatchSize is a pass's first batch; adaptive sizing moves it toward BatchTarget within
	// [MinBatchSize, MaxBatchSize].
	BatchSize    int
	MinBatchSize int
	MaxBatchSize int
	BatchTarget  time.Duration
	// SyncCommit commits each batch with synchronous_commit on, waiting for its own WAL flush;
	// off (the default), a batch leaves the flush to the next commit on the server.
	SyncCommit bool
	// WALCompression is each batch's wal_compression (config.WALCompressions); empty keeps
	// the server's.
	WALCompression string
	// FlushAfter is each batch's backend_flush_after in bytes (whole 8 KiB pages, at most
	// 2 MiB): how much of the pages it dirties its backend writes before asking the kernel to
	// write them back; zero keeps the server's.
	FlushAfter int64
	// MaxBatches caps the batches of one pass in one run.
	MaxBatches int
	// Pause is slept between batches (replicas, autovacuum); zero for none.
	Pause time.Duration
}

// Options are one request's choices.
type Options struct {
	// BatchSize overrides Settings.BatchSize as the first batch of each pass when > 0.
	BatchSize int
	// RequestID is the HTTP request's id, kept in the run history.
	RequestID string
}
