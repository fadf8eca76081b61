package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestIdleRuns: a run that found nothing to do is counted on its sweep's row of the minute; any
// run that did something, failed, was truncated or stopped early keeps a row of its own.
func TestIdleRuns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		res  wire.Result
		own  bool
	}{
		{"nothing to do", wire.Result{StopReason: wire.StopExhausted}, false},
		{"deleted", wire.Result{StopReason: wire.StopExhausted, Deleted: 1}, true},
		{"archived", wire.Result{StopReason: wire.StopExhausted, Archived: 1}, true},
		{"processed", wire.Result{StopReason: wire.StopExhausted, Processed: 1}, true},
		{"dropped a partition", wire.Result{StopReason: wire.StopExhausted, PartitionsDropped: 1}, true},
		{"failed", wire.Result{StopReason: wire.StopExhausted, Error: &wire.ErrorInfo{Code: "57014", Message: "cancelled"}}, true},
		{"truncated", wire.Result{StopReason: wire.StopExhausted, Truncated: true}, true},
		{"stopped at its budget", wire.Result{StopReason: wire.StopBudget}, true},
		{"lease-held, counted apart", wire.Result{StopReason: wire.StopLeaseHeld, Skipped: true}, false},
		{"a batch error", wire.Result{StopReason: wire.StopBatchError}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := dbtest.Pool(t)
			store := history.New(pool, time.Hour)
			for range 3 {
				res := tt.res
				res.Sweep, res.RunID, res.Passes = "outbox", uuid.Must(uuid.NewV7()).String(), []wire.PassResult{}
				// A lease-held answer never started a run.
				if !res.Skipped {
					if err := store.Start(ctx, res.RunID, res.Sweep, "req"); err != nil {
						t.Fatal(err)
					}
				}
				if err := store.Finish(ctx, &res, "req", nil); err != nil {
					t.Fatal(err)
				}
			}
			runs, err := store.List(ctx, "outbox", 10)
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			for _, r := range runs {
				total += r.Requests
			}
			switch {
			case total != 3:
				t.Errorf("the rows count %d runs, want 3", total)
			case tt.own && len(runs) != 3:
				t.Errorf("%d rows for 3 runs, want a row each", len(runs))
			case !tt.own && len(runs) > 2:
				t.Errorf("%d rows for 3 idle runs, want one per minute", len(runs))
			}
		})
	}
}
