package sweep

import (
	"cmp"
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// batchResult is what one batch did.
type batchResult struct {
	// n is the rows deleted (or keys processed, per-row).
	n int64
	// more is whether the pass may have more to do: a short batch of rows ends the pass without
	// an extra empty round trip; the heap path ends at its last block.
	more bool
	// newest is the newest age an index-path batch deleted: where the next one resumes.
	newest any
	// blocks is the length of a heap-path batch's range.
	blocks uint32
	// retried says the batch's first attempt met a held row lock and it ran again, locking.
	retried bool
	// committing is how long the batch's COMMIT (its record with it) took where it waited for
	// its WAL flush (BATCH_SYNC_COMMIT, archiving): mostly the disk's, the same for any number
	// of rows. Zero for a commit that does not wait.
	committing time.Duration
	// children are the rows each delete_with child lost with the batch.
	children []int64
	// archived is the rows a healing batch's insert reported taking; recovered the rows it
	// found in the archive already, identical (archiver.prove); lost the rows a foreign archive
	// no longer held as they left when read back after the commit (passRun.readBack).
	archived, recovered, lost int64
	// heldKeys and heldRows are the rows a healing batch found in the archive, as text; keys
	// and digests the keys an archiving batch deleted and the md5 of each deleted row's text,
	// in key order, which the archive proof compares with the archive's rows.
	heldKeys, heldRows, keys, digests []string
}

// dest is where a form's row goes, as a says it answers.
func (b *batchResult) dest(a statement.Answer) []any {
	dest := []any{&b.n}
	if a.Newest {
		dest = append(dest, &b.newest)
	}
	if a.Archived {
		dest = append(dest, &b.archived)
	}
	if a.Held {
		dest = append(dest, &b.heldKeys, &b.heldRows)
	}
	if a.Digests {
		dest = append(dest, &b.keys, &b.digests)
	}
	b.children = make([]int64, a.Children)
	for i := range b.children {
		dest = append(dest, &b.children[i])
	}
	return dest
}

// exec runs the delete form f on tx with the arguments a binds to its parameters, and reads
// its answer: its row, or for a bare DELETE the command tag's count.
func exec(ctx context.Context, tx pgx.Tx, f statement.Form, a statement.Args) (batchResult, error) {
	args := f.Params.Bind(a)
	var b batchResult
	if !f.Answer.Row {
		tag, err := tx.Exec(ctx, f.SQL, args...)
		if err != nil {
			return batchResult{}, err
		}
		b.n = tag.RowsAffected()
		return b, nil
	}
	if err := tx.QueryRow(ctx, f.SQL, args...).Scan(b.dest(f.Answer)...); err != nil {
		return batchResult{}, err
	}
	return b, nil
}

// batch runs one batch of the pass with arguments a. A batch of the heap or index path first
// runs without row locks under the short rowLockTimeout; if that attempt meets a row another
// transaction holds, it is rolled back and run once more in the locking form, which skips held
// rows, under the full lock timeout. An archive that holds some of the rows already runs it
// once more, healing (archiver.healed).
func (pr *passRun) batch(a statement.Args) (batchResult, error) {
	s := pr.r.cfg.Settings
	if pr.at.path != PathHeap && pr.at.path != PathIndex {
		var b batchResult
		attempt := func() error {
			return pr.inTx(s.LockTimeout, false, &b, func(ctx context.Context, tx pgx.Tx) (err error) {
				b, err = pr.modeBatch(ctx, tx, a)
				return err
			})
		}
		err := pr.aids.arch.healed(attempt(), attempt)
		return b, err
	}
	if pr.at.path == PathHeap {
		a.FirstBlock, a.EndBlock = pr.at.heap.take()
	}
	attempt := func(lockTimeout time.Duration, lock bool) (b batchResult, err error) {
		err = pr.inTx(lockTimeout, pr.at.path == PathIndex, &b, func(ctx context.Context, tx pgx.Tx) (err error) {
			if pr.at.path == PathHeap {
				b, err = pr.heapBatch(ctx, tx, a, lock)
			} else {
				b, err = pr.indexBatch(ctx, tx, a, lock)
			}
			return err
		})
		return b, err
	}
	first := min(s.LockTimeout, cmp.Or(pr.r.cfg.rowLockWait, rowLockTimeout))
	b, err := attempt(first, pr.r.cfg.alwaysLock)
	if err != nil && !pr.r.cfg.alwaysLock && isRowLockConflict(err) {
		pr.log.Debug("sweep batch met a held row lock: retrying it, skipping held rows", "pass", pr.p.Name, "err", err)
		b, err = attempt(s.LockTimeout, true)
		b.retried = true
	}
	retried := b.retried
	err = pr.aids.arch.healed(err, func() (err error) {
		b, err = attempt(s.LockTimeout, retried || pr.r.cfg.alwaysLock)
		return err
	})
	b.retried = b.retried || retried
	return b, err
}

// forms are the batch statements a batch runs now (lock: the locking form): the archive's,
// healing or not, for a pass with archive_to.
func (pr *passRun) forms(lock bool) statement.Batch {
	switch {
	case pr.aids.arch != nil:
		return pr.aids.arch.batch(lock)
	case lock:
		return pr.st.Locked
	}
	return pr.st.Unlocked
}

// heapBatch deletes the eligible rows of the blocks a names: all of them, or at most what
// max_rows leaves. The newest age it answers is not a cursor: the range is.
func (pr *passRun) heapBatch(ctx context.Context, tx pgx.Tx, a statement.Args, lock bool) (batchResult, error) {
	b, err := exec(ctx, tx, pr.forms(lock).Heap, a)
	if err != nil {
		return batchResult{}, err
	}
	b.newest, b.blocks, b.more = nil, a.EndBlock-a.FirstBlock, !pr.at.heap.done()
	return pr.aids.arch.prove(ctx, tx, b)
}

// modeBatch runs one batch of a single-mode pass (every eligible row, one statement) or of a
// per-row pass (one key, its function called).
func (pr *passRun) modeBatch(ctx context.Context, tx pgx.Tx, a statement.Args) (batchResult, error) {
	if pr.p.Mode == policy.ModeSingle {
		f := pr.st.Single
		if pr.aids.arch != nil {
			f = pr.aids.arch.single()
		}
		b, err := exec(ctx, tx, f, a)
		if err != nil {
			return batchResult{}, err
		}
		return pr.aids.arch.prove(ctx, tx, b)
	}
	var b batchResult
	rows, err := tx.Query(ctx, pr.st.PerRow.SQL, pr.st.PerRow.Params.Bind(a)...)
	if err != nil {
		return b, err
	}
	defer rows.Close()
	var processed int64
	for rows.Next() {
		processed++
		var v any
		if err := rows.Scan(&v); err != nil {
			return batchResult{}, err
		}
		// A function answering false did nothing (another caller got there first).
		if ok, isBool := v.(bool); !isBool || ok {
			b.n++
		}
	}
	if err := rows.Err(); err != nil {
		return batchResult{}, err
	}
	b.more = processed > 0
	return b, nil
}
