package sweep

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/statement"
)

// indexBatch deletes the next batch of the index path: the eligible rows of the ages from the
// cursor to the age a batch of rows past it (Set.Bound), which the planner reads in heap order
// (a bitmap of the age index: each page once, where its rows are deleted), or the rest where
// fewer are left. Where more than a batch of rows share the cursor's age, the range would be
// empty, and the batch deletes a batch of them, by rows. The next batch starts where this one's
// range ended.
func (pr *passRun) indexBatch(ctx context.Context, tx pgx.Tx, a statement.Args, lock bool) (b batchResult, err error) {
	var end any
	if a.From = pr.at.index.after; a.From == nil {
		if err := tx.QueryRow(ctx, pr.st.Bound.SQL, pr.st.Bound.Params.Bind(a)...).Scan(&a.From, &end); err != nil {
			return batchResult{}, fmt.Errorf("read the batch's range: %w", err)
		}
		if a.From == nil {
			return batchResult{}, nil
		}
	} else if err := tx.QueryRow(ctx, pr.st.BoundAfter.SQL, pr.st.BoundAfter.Params.Bind(a)...).Scan(&end); err != nil {
		return batchResult{}, fmt.Errorf("read the batch's range: %w", err)
	}
	forms := pr.forms(lock)
	switch {
	case end != nil && sameAge(end, a.From):
		if b, err = exec(ctx, tx, forms.IndexAfter, a); err != nil {
			return batchResult{}, err
		}
		b.more = b.n >= int64(a.Limit)
	case end != nil:
		a.Before = end
		if b, err = exec(ctx, tx, forms.Range, a); err != nil {
			return batchResult{}, err
		}
		b.more, b.newest = true, end
	default:
		if b, err = exec(ctx, tx, forms.Tail, a); err != nil {
			return batchResult{}, err
		}
		b.newest = nil
	}
	return pr.aids.arch.prove(ctx, tx, b)
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
