package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// The scale run: the rail's per-batch cost at 1M and at 5M rows. O(batch) means the same batch
// costs the same whatever the table's size and however much of it was already deleted. No
// foreground runs: the question is the engine's own cost.
const (
	scaleSmall = 1_000_000
	scaleLarge = 5_000_000
	// targetScale bounds the cost at 5M against the cost at 1M.
	targetScale = 1.5
)

// scalePoint is the scale run at one table size.
type scalePoint struct {
	rows     int
	eligible int64
	// rail is C end to end (adaptive batches); fixed is the engine in-process with every batch
	// at BATCH_SIZE, so batch durations compare directly across sizes.
	rail, fixed outcome
}

type scaleResult struct {
	fixedSize int
	points    []scalePoint
}

func (b *bench) scaleRun(ctx context.Context) (scaleResult, error) {
	defaults, err := apiDefaults()
	if err != nil {
		return scaleResult{}, err
	}
	res := scaleResult{fixedSize: defaults.BatchSize}
	for _, rows := range []int{scaleSmall, scaleLarge} {
		tpl, eligible, err := b.template(ctx, dense, rows)
		if err != nil {
			return res, err
		}
		pt := scalePoint{rows: rows, eligible: eligible}
		what := fmt.Sprintf("scale %d rows", rows)
		if pt.rail, err = b.contest(ctx, what, contestant{key: "C", db: "scale_rail", name: "the rail, end to end",
			setup: b.railSetup(b.s.binDir, "notifications", nil)}, tpl, probe{}, eligible); err != nil {
			return res, err
		}
		if pt.fixed, err = b.contest(ctx, what, contestant{key: "engine", db: "scale_fixed", name: "the engine, fixed batches",
			setup: b.engineSetup([]policy.Spec{catalogSpec("notifications")}, "", fixedBatches(defaults.BatchSize))}, tpl, probe{}, eligible); err != nil {
			return res, err
		}
		res.points = append(res.points, pt)
		if err := b.drop(ctx, tpl); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (b *bench) renderScale(r scaleResult) string {
	var w strings.Builder
	b.header(&w, "Scale: per-batch cost at 1M and 5M rows")
	fmt.Fprintf(&w, "Fixed batches: BATCH_SIZE=%d.\n\n", r.fixedSize)
	var rows [][]string
	for _, p := range r.points {
		fd, rd := p.fixed.batchDurations(), p.rail.batchDurations()
		rows = append(rows, []string{fmtCount(int64(p.rows)), fmtCount(p.eligible), fmtCount(int64(len(fd))),
			fmtDuration(percentile(fd, 0.5)), fmtDuration(percentile(fd, 0.99)), fmtDuration(maxDuration(fd)),
			fmtDuration(p.rail.elapsed), fmtCount(int64(len(rd))), fmtDuration(percentile(rd, 0.5)),
			fmtCount(medianRows(p.rail.batches)), fmt.Sprintf("%.2f", perRowMedian(p.rail.batches)), fmtDuration(maxDuration(rd))})
	}
	table(&w, []string{"rows>", "eligible>", "fixed: batches>", "fixed: batch p50>", "fixed: p99>", "fixed: max>", "rail: time>", "rail: batches>",
		"rail: batch p50>", "rail: rows/batch p50>", "rail: µs/row p50>", "rail: longest txn>"}, rows)
	if len(r.points) == 2 {
		small, large := r.points[0], r.points[1]
		fixedRatio := float64(percentile(large.fixed.batchDurations(), 0.5)) / float64(percentile(small.fixed.batchDurations(), 0.5))
		rowRatio := perRowMedian(large.rail.batches) / perRowMedian(small.rail.batches)
		longest := maxDuration(large.rail.batchDurations())
		at := func(p scalePoint) string { return fmtCount(int64(p.rows)) }
		table(&w, []string{"target", "measured>", ""}, [][]string{
			{fmt.Sprintf("fixed-size batch p50 at %s ≤ %.1f × at %s", at(large), targetScale, at(small)), fmt.Sprintf("%.2f ×", fixedRatio), verdict(fixedRatio <= targetScale)},
			{fmt.Sprintf("rail cost per row p50 at %s ≤ %.1f × at %s", at(large), targetScale, at(small)), fmt.Sprintf("%.2f ×", rowRatio), verdict(rowRatio <= targetScale)},
			{fmt.Sprintf("every rail batch ≤ %s at %s", fmtDuration(targetMaxBatch), at(large)), "longest " + fmtDuration(longest), verdict(longest <= targetMaxBatch)},
		})
	}
	return w.String()
}
