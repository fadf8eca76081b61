package sweep

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/statement"
)

// The index path's batch. Its rows are a range of ages, from where the previous batch's range
// ended to the age a batch of rows past that, read from the age index alone (Set.Bound). Given
// both ends, the planner reads the range's rows through a bitmap of the age index, in heap order:
// each page once, where its rows are deleted, rather than a page per row in age order, which is a
// random page each on a table whose eligible rows are scattered.

// indexBatch deletes the next batch of the index path: the eligible rows of the ages from the
// cursor to the age limit rows past it (Set.Bound), which the planner reads in heap order, or
// the rest where fewer are left. Where more than limit rows share the cursor's age, the range
// would be empty, and the batch deletes limit of them, by rows. The next batch starts where
// this one's range ended.
func (pr *passRun) indexBatch(ctx context.Context, tx pgx.Tx, lock bool) (b batchResult, err error) {
	from, end := pr.index.after, any(nil)
	if from == nil {
		if err := tx.QueryRow(ctx, pr.st.Bound.SQL, pr.cutoff, pr.limit).Scan(&from, &end); err != nil {
			return batchResult{}, fmt.Errorf("read the batch's range: %w", err)
		}
		if from == nil {
			return batchResult{}, nil
		}
	} else if err := tx.QueryRow(ctx, pr.st.BoundAfter.SQL, pr.cutoff, pr.limit, from).Scan(&end); err != nil {
		return batchResult{}, fmt.Errorf("read the batch's range: %w", err)
	}
	form := pr.batchForm(lock)
	switch {
	case end != nil && sameAge(end, from):
		if err := tx.QueryRow(ctx, form.IndexAfter.SQL, pr.cutoff, pr.limit, from).Scan(pr.answer(&b)...); err != nil {
			return batchResult{}, err
		}
		b.more = b.n >= int64(pr.limit)
		return pr.proven(ctx, tx, b)
	case end != nil:
		b, err = pr.rangeBatch(ctx, tx, form.Range, from, end)
		b.more, b.newest = true, end
	default:
		b, err = pr.rangeBatch(ctx, tx, form.Tail, from, nil)
	}
	if err != nil {
		return b, err
	}
	return pr.proven(ctx, tx, b)
}

// rangeBatch runs an index-path batch over a range of ages (ages: its first and, unless it is
// the last range, the one it ends before): capped, for a pass with max_rows; the bare DELETE
// where the pass needs nothing of the deleted rows and the batch takes no row locks; query
// otherwise.
func (pr *passRun) rangeBatch(ctx context.Context, tx pgx.Tx, form statement.Form, from, before any) (b batchResult, err error) {
	args := form.Params.Bind(statement.Args{Cutoff: pr.cutoff, From: from, Before: before, Limit: pr.limit})
	if !form.Answer.Row {
		tag, err := tx.Exec(ctx, form.SQL, args...)
		if err != nil {
			return batchResult{}, err
		}
		return batchResult{n: tag.RowsAffected()}, nil
	}
	if err := tx.QueryRow(ctx, form.SQL, args...).Scan(pr.answer(&b)...); err != nil {
		return batchResult{}, err
	}
	b.newest = nil
	return b, nil
}

// sameAge reports whether two ages as pgx reads them (a time, or a number of Unix time) are
// equal: a range's end is never before its start, so equal is empty.
func sameAge(a, b any) bool {
	if ta, ok := a.(time.Time); ok {
		tb, ok := b.(time.Time)
		return ok && ta.Equal(tb)
	}
	return reflect.DeepEqual(a, b)
}
