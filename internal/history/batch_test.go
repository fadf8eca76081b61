package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestBatchRecords checks a batch's outcome as Outcome settles it, and that Prune prunes the
// records past the retention with the runs.
func TestBatchRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	store := history.New(pool, 24*time.Hour)
	const run = "00000000-0000-0000-0000-0000000000aa"
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.RecordBatch(ctx, tx, run, "read", 1, 100); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		batch int
		want  wire.BatchOutcome
	}{
		{"a recorded batch committed", 1, wire.BatchCommitted},
		{"an unrecorded batch rolled back", 2, wire.BatchRolledBack},
		{"asked again, a rolled-back batch stays rolled back", 2, wire.BatchRolledBack},
	}
	// In order, not in parallel: the third asks again what the second settled.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := store.Outcome(ctx, run, "read", tc.batch, 100)
			if err != nil || got != tc.want {
				t.Fatalf("%s %v, want %s", got, err, tc.want)
			}
		})
	}
	if _, err := pool.Exec(ctx, `UPDATE sweeprail.run_batch SET recorded_at = now() - interval '2 days' WHERE batch = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	var left []int
	rows, err := pool.Query(ctx, `SELECT batch FROM sweeprail.run_batch ORDER BY batch`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var b int
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		left = append(left, b)
	}
	if len(left) != 1 || left[0] != 2 {
		t.Fatalf("records left %v, want batch 2's only: the old one pruned", left)
	}
}
