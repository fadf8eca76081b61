package main

import (
	"context"
	"fmt"
	"time"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// scalePoint is the scale run at one table size.
type scalePoint struct {
	rows     int
	eligible int64
	// rail is C end to end (adaptive batches); fixed is the engine in-process with every batch
	// at BATCH_SIZE, so batch durations compare directly across sizes.
	rail, fixed outcome
}

// The sizes of the scale run: its per-batch cost at 1M and at 5M rows.
const (
	scaleSmall = 1_000_000
	scaleLarge = 5_000_000
)

type scaleResult struct {
	fixedSize int
	points    []scalePoint
	elapsed   time.Duration
}

// scaleRun measures the rail's per-batch cost at 1M and at 5M rows: O(batch) means the same
// batch costs the same whatever the table's size and however much of it was already deleted.
// No foreground runs: the question is the engine's own cost.
func (b *bench) scaleRun(ctx context.Context) (scaleResult, error) {
	defaults, err := apiDefaults()
	if err != nil {
		return scaleResult{}, err
	}
	res := scaleResult{fixedSize: defaults.BatchSize}
	for _, rows := range []int{scaleSmall, scaleLarge} {
		tpl, eligible, err := b.template(ctx, rows)
		if err != nil {
			return res, err
		}
		pt := scalePoint{rows: rows, eligible: eligible}
		for _, m := range []struct {
			c   contestant
			dst *outcome
		}{
			{contestant{key: "C", db: "scale_rail", name: "the rail, end to end", setup: b.railSetup(b.s.binDir, nil)}, &pt.rail},
			{contestant{key: "engine", db: "scale_fixed", name: "the engine, fixed batches", setup: b.engineSetupWith(policy.Catalog(), "notifications", "", fixedBatches(defaults.BatchSize))}, &pt.fixed},
		} {
			b.logf("scale %d rows: %s", rows, m.c.name)
			o, err := b.measure(ctx, m.c, tpl, false)
			if err != nil {
				return res, fmt.Errorf("scale %d rows, %s: %w", rows, m.c.name, err)
			}
			if o.deleted != eligible {
				return res, fmt.Errorf("scale %d rows, %s: deleted %d rows, but %d were eligible", rows, m.c.name, o.deleted, eligible)
			}
			b.logf("scale %d rows: %s: %d rows in %s, %d batches, p50 %s", rows, m.c.name, o.deleted,
				o.elapsed.Round(time.Millisecond), len(o.batches), fmtDuration(percentile(o.batchDurations(), 0.5)))
			*m.dst = o
		}
		res.points = append(res.points, pt)
		if err := b.drop(ctx, tpl); err != nil {
			return res, err
		}
	}
	return res, nil
}
