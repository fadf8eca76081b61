package sweep

import (
	"testing"
	"time"
)

func TestChoosePath(t *testing.T) {
	t.Parallel()
	dense := survey{kind: "r", blocks: 1000, eligible: 80_000, total: 100_000, tidRange: true, analyzed: true}
	with := func(change func(*survey)) survey {
		sv := dense
		change(&sv)
		return sv
	}
	tests := []struct {
		name   string
		sv     survey
		forced Path
		want   Path
	}{
		{"dense: heap", dense, "", PathHeap},
		{"at the crossover: heap", with(func(sv *survey) { sv.eligible = heapShare * sv.total }), "", PathHeap},
		{"below the crossover: index", with(func(sv *survey) { sv.eligible = heapShare*sv.total - 1 }), "", PathIndex},
		{"sparse: index", with(func(sv *survey) { sv.eligible = 1000 }), "", PathIndex},
		{"never analyzed: index, whatever the default selectivity says", with(func(sv *survey) { sv.analyzed = false }), "", PathIndex},
		{"empty table: index", with(func(sv *survey) { sv.blocks, sv.eligible, sv.total = 0, 0, 0 }), "", PathIndex},
		{"partitioned: index", with(func(sv *survey) { sv.kind = "p" }), "", PathIndex},
		{"no TID Range Scan (before PostgreSQL 14): index", with(func(sv *survey) { sv.tidRange = false }), "", PathIndex},
		{"forced index on a dense table", dense, PathIndex, PathIndex},
		{"forced heap on a sparse table", with(func(sv *survey) { sv.eligible = 1 }), PathHeap, PathHeap},
		{"forced heap on a table never analyzed", with(func(sv *survey) { sv.analyzed = false }), PathHeap, PathHeap},
		{"forced heap where it cannot run: index", with(func(sv *survey) { sv.kind = "p" }), PathHeap, PathIndex},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.sv.choose(tt.forced); got != tt.want {
				t.Fatalf("choose(%q) over %+v = %s, want %s", tt.forced, tt.sv, got, tt.want)
			}
		})
	}
}

func TestHeapRange(t *testing.T) {
	t.Parallel()
	// 100 rows a block, 1,000 blocks.
	sv := survey{kind: "r", blocks: 1000, eligible: 80_000, total: 100_000, tidRange: true, analyzed: true}
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
		// Empty ranges: the density floor (5 rows a block at heapShare 0.10) caps the growth.
		if limit := uint32(20000 / h.floor); h.blocks > limit {
			t.Fatalf("%d blocks after empty ranges, want at most %d", h.blocks, limit)
		}
		h.adapt(int64(h.blocks)*100, h.blocks, time.Microsecond, target, 100, 20000)
		if h.blocks != 200 {
			t.Fatalf("%d blocks after a dense range, want the cap at its own density: 200", h.blocks)
		}
	})
}
