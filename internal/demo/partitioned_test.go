package demo_test

import (
	"context"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/demo"
	"github.com/sweeprail/sweeprail/internal/partition"
)

func TestSeedPartitioned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	end := time.Date(2026, 4, 1, 13, 0, 0, 0, time.UTC) // truncated to midnight
	if err := demo.SeedPartitioned(ctx, pool, demo.Partitioned{Table: "events", Rows: 10_003, Days: 10, End: end, Default: true}); err != nil {
		t.Fatal(err)
	}
	parts, err := partition.List(ctx, pool, "events")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 11 || !parts[10].Default {
		t.Fatalf("%d partitions: %+v", len(parts), parts)
	}
	for i, p := range parts[:10] {
		lo := time.Date(2026, 3, 22+i, 0, 0, 0, 0, time.UTC)
		want := int64(1000)
		if i == 9 {
			want = 1003
		}
		var n, outside int64
		if err := pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE at < $1 OR at >= $2) FROM "+p.Name,
			lo, lo.AddDate(0, 0, 1)).Scan(&n, &outside); err != nil {
			t.Fatal(err)
		}
		if !p.Lower.Time.Equal(lo) || n != want || outside != 0 || p.Rows != want {
			t.Errorf("%s: [%v, %v) with %d rows (estimate %d), want [%v, +1 day) with %d", p.Name, p.Lower, p.Upper, n, p.Rows, lo, want)
		}
	}
	var distinct int64
	if err := pool.QueryRow(ctx, "SELECT count(DISTINCT id) FROM events WHERE id BETWEEN 1 AND 10003").Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if distinct != 10_003 {
		t.Errorf("%d distinct ids in 1..10003", distinct)
	}
}
