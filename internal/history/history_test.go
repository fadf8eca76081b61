package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestQueryModes: a run's start and end, its passes and its error, are written and read back the
// same in every query mode a connection string can choose. The exec and simple-protocol modes
// send a []byte as bytea, which the json columns refuse: every end failed in them.
func TestQueryModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, err := dbpool.NewPool(ctx, dbtest.SweeprailURL(t)+"&default_query_exec_mode="+mode)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			store := history.New(pool, time.Hour)
			id := uuid.Must(uuid.NewV7()).String()
			if err := store.Start(ctx, id, "outbox", "req-1"); err != nil {
				t.Fatal(err)
			}
			res := &wire.Result{
				Sweep: "outbox", RunID: id, Deleted: 7, StopReason: wire.StopBatchError,
				Passes: []wire.PassResult{{Pass: "dispatched", Deleted: 7, StopReason: wire.StopBatchError}},
				Error:  &wire.ErrorInfo{Code: "P0001", Message: `it's "quoted" \ and 'so'`, Pass: "dispatched"},
			}
			if err := store.Finish(ctx, res, "req-1", nil); err != nil {
				t.Fatal(err)
			}
			skipped := &wire.Result{Sweep: "outbox", RunID: uuid.Must(uuid.NewV7()).String(), Skipped: true, StopReason: wire.StopLeaseHeld, Passes: []wire.PassResult{}}
			if err := store.Finish(ctx, skipped, "", nil); err != nil {
				t.Fatal(err)
			}
			runs, err := store.List(ctx, "outbox", 10)
			if err != nil || len(runs) != 2 {
				t.Fatalf("%+v, %v; want two runs", runs, err)
			}
			var got wire.HistoryRun
			for _, r := range runs {
				if r.RunID == id {
					got = r
				}
			}
			if got.FinishedAt == nil || got.Deleted != 7 || len(got.Passes) != 1 || got.Passes[0].Deleted != 7 ||
				got.Error == nil || *got.Error != *res.Error || got.RequestID != "req-1" {
				t.Errorf("run read back as %+v (error %+v)", got, got.Error)
			}
		})
	}
}
