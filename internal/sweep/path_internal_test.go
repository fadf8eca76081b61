package sweep

import (
	"testing"
	"time"
)

func TestChoosePath(t *testing.T) {
	t.Parallel()
	dense := survey{kind: "r", blocks: 1000, eligible: 80_000, total: 100_000, correlation: 1, tidRange: true, analyzed: true}
	with := func(change func(*survey)) survey {
		sv := dense
		change(&sv)
		return sv
	}
	share := func(s float64) func(*survey) { return func(sv *survey) { sv.eligible = s * sv.total } }
	tests := []struct {
		name   string
		sv     survey
		forced Path
		want   Path
	}{
		{"dense: heap", dense, "", PathHeap},
		{"age in heap order, at its crossover: heap", with(share(HeapShareOrdered)), "", PathHeap},
		{"age in heap order, below it: index", with(share(HeapShareOrdered - 0.01)), "", PathIndex},
		{"age in reverse heap order, below it: index", with(func(sv *survey) { share(HeapShareOrdered - 0.01)(sv); sv.correlation = -1 }), "", PathIndex},
		{"age scattered, at its crossover: heap", with(func(sv *survey) { share(HeapShareScattered)(sv); sv.correlation = 0 }), "", PathHeap},
		{"age scattered, below it: index", with(func(sv *survey) { share(HeapShareScattered - 0.001)(sv); sv.correlation = 0 }), "", PathIndex},
		{"correlation 0.5: a quarter of the way", with(func(sv *survey) {
			share(HeapShareScattered + (HeapShareOrdered-HeapShareScattered)/4 + 0.001)(sv)
			sv.correlation = 0.5
		}), "", PathHeap},
		{"correlation 0.5, below: index", with(func(sv *survey) {
			share(HeapShareScattered + (HeapShareOrdered-HeapShareScattered)/4 - 0.001)(sv)
			sv.correlation = 0.5
		}), "", PathIndex},
		{"sparse: index", with(share(0.001)), "", PathIndex},
		{"never analyzed: index, whatever the default selectivity says", with(func(sv *survey) { sv.analyzed = false }), "", PathIndex},
		{"empty table: index", with(func(sv *survey) { sv.blocks, sv.eligible, sv.total = 0, 0, 0 }), "", PathIndex},
		{"partitioned: index", with(func(sv *survey) { sv.kind = "p" }), "", PathIndex},
		{"no TID Range Scan (before PostgreSQL 14): index", with(func(sv *survey) { sv.tidRange = false }), "", PathIndex},
		{"forced index on a dense table", dense, PathIndex, PathIndex},
		{"forced heap on a sparse table", with(share(0.00001)), PathHeap, PathHeap},
		{"forced heap on a table never analyzed", with(func(sv *survey) { sv.analyzed = false }), PathHeap, PathHeap},
		{"forced heap where it cannot run: index", with(func(sv *survey) { sv.kind = "p" }), PathHeap, PathIndex},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.sv.choose(tt.forced); got != tt.want {
				t.Fatalf("choose(%q) over %+v (share %.4f, threshold %.4f) = %s, want %s", tt.forced, tt.sv, tt.sv.share(),
					heapShare(tt.sv.correlation), got, tt.want)
			}
		})
	}
}

func TestHeapRange(t *testing.T) {
	t.Parallel()
	// 100 rows a block, 1,000 blocks.
	sv := survey{kind: "r", blocks: 1000, eligible: 80_000, total: 100_000, correlation: 1, tidRange: true, analyzed: true}
	const target = 100 * time.Millisecond

	t.Run("the first range holds about the first batch of rows of any kind", func(t *testing.T) {
		if h := newHeapRange(sv, 1000); h.blocks != 10 || h.end != 1000 || h.next != 0 {
			t.Fatalf("first range %+v, want 10 blocks of 1000", h)
		}
	})
	t.Run("ranges cover every block once, the last one cut at the end", func(t *testing.T) {
		h := heapRange{end: 25, blocks: 10}
		var got [][2]uint32
		for !h.done() {
			from, to := h.take()
			got = append(got, [2]uint32{from, to})
		}
		if len(got) != 3 || got[0] != [2]uint32{0, 10} || got[1] != [2]uint32{10, 20} || got[2] != [2]uint32{20, 25} {
			t.Fatalf("ranges %v, want [0,10) [10,20) [20,25)", got)
		}
	})
	t.Run("below floorShare the floor is half of it", func(t *testing.T) {
		scattered := sv
		scattered.eligible, scattered.correlation = 5000, 0
		if h := newHeapRange(scattered, 1000); h.floor != 100*floorShare/2 {
			t.Fatalf("floor %.2f, want %.2f", h.floor, 100*floorShare/2)
		}
	})
	t.Run("fast ranges at most double, slow ones at most halve", func(t *testing.T) {
		h := newHeapRange(sv, 1000)
		h.adapt(800, 10, time.Millisecond, target, 100, 20000)
		if h.blocks != 20 {
			t.Fatalf("after a 1ms batch: %d blocks, want 20", h.blocks)
		}
		h.adapt(1600, 20, time.Second, target, 100, 20000)
		if h.blocks != 10 {
			t.Fatalf("after a 1s batch: %d blocks, want 10", h.blocks)
		}
	})
	t.Run("the row cap holds at the density seen", func(t *testing.T) {
		h := newHeapRange(sv, 1000)
		// 100 rows a block deleted: 20,000 rows is 200 blocks, however fast.
		for range 10 {
			h.adapt(int64(h.blocks)*100, h.blocks, time.Microsecond, target, 100, 20000)
		}
		if h.blocks != 200 {
			t.Fatalf("%d blocks, want 200 (20,000 rows at 100 a block)", h.blocks)
		}
	})
	t.Run("a dense stretch after empty ones is capped at once", func(t *testing.T) {
		h := newHeapRange(sv, 1000)
		for range 20 {
			h.adapt(0, h.blocks, time.Microsecond, target, 100, 20000)
		}
		// Empty ranges: the density floor (40 rows a block: half the planner's 80%) caps the
		// growth at 500 blocks, 50,000 rows should the next ones be all eligible.
		if h.floor != 40 || h.blocks != 500 {
			t.Fatalf("%d blocks after empty ranges (floor %.1f), want 500 (floor 40)", h.blocks, h.floor)
		}
		h.adapt(int64(h.blocks)*100, h.blocks, time.Microsecond, target, 100, 20000)
		if h.blocks != 200 {
			t.Fatalf("%d blocks after a dense range, want the cap at its own density: 200", h.blocks)
		}
	})
}
