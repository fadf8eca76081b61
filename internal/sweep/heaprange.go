package sweep

import (
	"math"
	"time"
)

// floorShare is the least eligible share a heap range is sized for (heapRange.floor).
const floorShare = 0.25

// heapRange is where a heap-path pass stands: the next batch covers blocks [next, next+blocks),
// and the pass ends at end, the table's size when the pass started.
type heapRange struct {
	next, end, blocks uint32
	// floor is the eligible rows per block the sizing assumes at least (half the planner's
	// share, at least half floorShare, of the rows per block), so that empty blocks cannot grow
	// a range far past MaxBatchSize rows should the next ones be dense: at most 8 times, once.
	floor float64
	// visited and deleted are the pass's blocks and rows so far: the observed density.
	visited uint64
	deleted int64
}

// newHeapRange starts a heap-path pass over sv. Its first range holds at most about firstRows
// rows of any kind: the planner's estimate of the eligible rows can be far off (on a table never
// analyzed it is a default selectivity), and the ranges after it are sized from what the batches
// find.
func newHeapRange(sv survey, firstRows int) heapRange {
	h := heapRange{end: sv.blocks}
	perBlock := 0.0
	if sv.blocks > 0 {
		perBlock = sv.total / float64(sv.blocks)
		h.floor = perBlock * max(sv.share(), floorShare) / 2
	}
	h.blocks = blocksFor(firstRows, perBlock)
	return h
}

// blocksFor is how many blocks hold about rows eligible rows at perBlock a block, at least one.
func blocksFor(rows int, perBlock float64) uint32 {
	if perBlock <= 0 {
		return 1
	}
	return uint32(min(max(math.Ceil(float64(rows)/perBlock), 1), math.MaxUint32/2))
}

// take returns the next batch's range and moves past it.
func (h *heapRange) take() (from, to uint32) {
	from = h.next
	to = from + min(h.blocks, h.end-from)
	h.next = to
	return from, to
}

// done reports whether the pass has covered every block it started with.
func (h *heapRange) done() bool { return h.next >= h.end }

// adapt sizes the next range after a batch that deleted n rows from blocks blocks in took: toward
// the range that would have taken target (at most doubling or halving, as row batches do), and
// within the rows [lo, hi] at the density seen so far (the larger of this batch's and the pass's,
// so a dense stretch shrinks the range at once).
func (h *heapRange) adapt(n int64, blocks uint32, took, target time.Duration, lo, hi int) {
	h.visited += uint64(blocks)
	h.deleted += n
	density := h.floor
	if blocks > 0 {
		density = max(density, float64(n)/float64(blocks))
	}
	if h.visited > 0 {
		density = max(density, float64(h.deleted)/float64(h.visited))
	}
	loBlocks, hiBlocks := 1, math.MaxInt32
	if density > 0 {
		if lo > 0 {
			loBlocks = int(blocksFor(lo, density))
		}
		if hi > 0 {
			hiBlocks = max(int(float64(hi)/density), 1)
		}
	}
	h.blocks = uint32(nextSize(int(blocks), took, target, min(loBlocks, hiBlocks), hiBlocks))
}

// keyset is where an index-path pass stands: the newest age deleted so far, from which the next
// batch resumes (nil before the first batch). Rows older than it that a batch skipped (locked by
// someone else, in a retried batch) wait for the next run. An age is the column's value as pgx
// reads it (a time, or a number of Unix time), bound back as the same type.
type keyset struct{ after any }

// advance moves the keyset to newest, the newest age a batch deleted (nil: it deleted none).
func (k *keyset) advance(newest any) {
	if newest != nil {
		k.after = newest
	}
}
