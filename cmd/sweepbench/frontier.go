package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The frontier run: on the dense notifications table, with the foreground around each
// contestant, A, A′ and B as in the side-by-side run, and the rail end to end at several
// settings, from its defaults to gentler ones, in the same rounds. Its report is the frontier:
// each setting's rows/s against the foreground's p99 over idle, so an operator can read what a
// gentler setting costs in throughput and what it buys the foreground. With -variant-env or
// -variant-bin, C′ is a candidate measured beside them.

// frontierSetting is one setting of the rail the frontier run measures: its key, the
// environment it adds to the API's defaults, and what it is.
type frontierSetting struct {
	key  string
	env  []string
	what string
}

// frontierSettings are the rail's settings on the frontier, from the defaults to the gentlest.
// gentleKey names the one docs/CRON.md recommends beside live traffic ("Gentle on live
// traffic"), which the report holds to its target.
var frontierSettings = []frontierSetting{
	{"C", nil, "defaults"},
	{"C·10", []string{"BATCH_TARGET=10ms"}, "10 ms batches"},
	{"C·5", []string{"BATCH_TARGET=5ms", "BATCH_SIZE=200"}, "5 ms batches, from 200 rows"},
	{"C·2", []string{"BATCH_TARGET=2ms", "BATCH_SIZE=100"}, "2 ms batches, from 100 rows"},
	{"C·2s", []string{"BATCH_TARGET=2ms", "BATCH_SIZE=100", "BATCH_SYNC_COMMIT=true"}, "2 ms batches, from 100 rows, each flushing its own WAL"},
	{"C·1", []string{"BATCH_TARGET=1ms", "BATCH_SIZE=100"}, "1 ms batches, from 100 rows"},
	{"C·1s", []string{"BATCH_TARGET=1ms", "BATCH_SIZE=100", "BATCH_SYNC_COMMIT=true"}, "1 ms batches, from 100 rows, each flushing its own WAL"},
}

// gentleKey is the gentle setting, and its targets against B in the same rounds: a foreground
// p99 over idle no worse than B's, at least gentleVsBatched times B's rows/s.
const (
	gentleKey       = "C·1"
	gentleVsBatched = 5.0
)

// frontierResult is the frontier run: rounds of every contestant, back to back.
type frontierResult struct {
	rows      int
	eligible  int64
	batchSize int
	rounds    rounds
}

func (b *bench) frontierRun(ctx context.Context) (frontierResult, error) {
	defaults, err := apiDefaults()
	if err != nil {
		return frontierResult{}, err
	}
	res := frontierResult{rows: b.s.rows, batchSize: defaults.BatchSize}
	tpl, eligible, err := b.template(ctx, dense, b.s.rows)
	if err != nil {
		return res, err
	}
	res.eligible = eligible
	contestants := baselines("f_", res.batchSize)
	for i, s := range frontierSettings {
		name := "the rail, " + s.what
		if len(s.env) == 0 {
			name += fmt.Sprintf(" (%s batches)", fmtDuration(defaults.BatchTarget))
		} else {
			name += ": `" + strings.Join(s.env, " ") + "`"
		}
		contestants = append(contestants, contestant{key: s.key, db: fmt.Sprintf("f_c%d", i), name: name,
			setup: b.railSetup(b.s.binDir, "notifications", s.env)})
	}
	if v, ok := b.variant("f_variant", "notifications", nil); ok {
		contestants = append(contestants, v)
	}
	res.rounds, err = b.foregroundRounds(ctx, "frontier", "frontier round", tpl, contestants, eligible)
	return res, err
}

func (b *bench) renderFrontier(r frontierResult) string {
	var w strings.Builder
	b.header(&w, "The foreground frontier: the rail's settings beside live traffic")
	fmt.Fprintf(&w, "Table: %s notifications rows, %s eligible (%.1f%%). Foreground: %d workers × %.0f ops/s. %s.\n\n",
		fmtCount(int64(r.rows)), fmtCount(r.eligible), 100*float64(r.eligible)/float64(r.rows),
		fgWorkers, float64(time.Second)/float64(fgPeriod), roundsNote(r.rounds))
	as := acrossAll(r.rounds.counted())
	a2, bb := pick(as, "A′"), pick(as, "B")
	fgVs := func(ref across) column {
		return column{"fg p99 ÷ " + ref.key + "'s>", func(x across) string {
			if len(ref.rounds) == 0 {
				return ""
			}
			return fmt.Sprintf("%.2f", x.fgRatio()/ref.fgRatio())
		}}
	}
	contestantTable(&w, as, []column{colKey, colName, colTime, colRate, colRatio("A′", a2), colRatio("B", bb), colBatches, colP50, colP99,
		{"fg p99>", func(x across) string { return fmtDuration(percentile(x.fg(), 0.99)) }}, colFG, fgVs(bb), colWAL})
	w.WriteString("Every round, in order (ratios within the round):\n\n")
	roundList(&w, r.rounds, func(rd round, o outcome) string {
		rb, _ := findKey(rd.contestants, "B")
		idle := float64(percentile(rd.baseline, 0.99))
		p := fmt.Sprintf("%s %s, fg p99 %.2f × idle", o.key, fmtDuration(o.elapsed), float64(percentile(o.fg, 0.99))/idle)
		if o.key != "B" && rb.elapsed > 0 {
			p += fmt.Sprintf(" (%.1f × B's rows/s)", o.rowsPerSec()/rb.rowsPerSec())
		}
		return p
	})
	if g := pick(as, gentleKey); len(g.rounds) > 0 && len(bb.rounds) > 0 {
		vsB := g.ratio(bb)
		table(&w, []string{"target: the gentle setting (" + gentleKey + ") against B in the same rounds", "measured>", ""}, [][]string{
			{"foreground p99 ÷ idle ≤ B's", fmt.Sprintf("%.2f against %.2f", g.fgRatio(), bb.fgRatio()), verdict(g.fgRatio() <= bb.fgRatio())},
			{fmt.Sprintf("rows/s ≥ %.0f × B's", gentleVsBatched), fmt.Sprintf("%.1f ×", vsB), verdict(vsB >= gentleVsBatched)},
			{fmt.Sprintf("batch p99 ≤ %s", fmtDuration(targetP99Batch)), fmtDuration(percentile(g.batches(), 0.99)), verdict(percentile(g.batches(), 0.99) <= targetP99Batch)},
		})
	}
	return w.String()
}
