package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The side-by-side run: on the dense notifications table, with the foreground around each
// contestant, A and A′ (the monolithic DELETE, typed and with the cutoff bound), B (the ordered
// batches of other tools), C (the rail end to end) and, with -variant-env or -variant-bin, C′.

// The side-by-side run's targets for C.
const (
	targetVsMonolithic = 0.5
	targetVsBatched    = 3.0
	targetForeground   = 2.0
	targetRSS          = 64 << 20
)

// sideResult is the side-by-side run: rounds of every contestant, back to back.
type sideResult struct {
	rows      int
	eligible  int64
	batchSize int
	rounds    rounds
}

// baselines are the contestants every dense-table run measures the rail against: the monolithic
// DELETE with its cutoff computed (A) and bound (A′), and the ordered id-IN loop (B). Their
// databases are named with prefix, so two runs' templates do not meet.
func baselines(prefix string, batchSize int) []contestant {
	return []contestant{
		{key: "A", db: prefix + "a", name: "monolithic `DELETE … read_at < now() - interval '30 days'`", setup: monolithic(monolithicSQL, "")},
		{key: "A′", db: prefix + "a_bound", name: "monolithic `DELETE … read_at < $1` (cutoff bound)", setup: monolithic(monolithicBoundSQL, cutoffSQL)},
		{key: "B", db: prefix + "b", name: fmt.Sprintf("`id IN (SELECT … ORDER BY read_at LIMIT %d FOR UPDATE SKIP LOCKED)`, a transaction per batch", batchSize),
			setup: orderedBatches(batchSize)},
	}
}

func (b *bench) sideBySide(ctx context.Context) (sideResult, error) {
	defaults, err := apiDefaults()
	if err != nil {
		return sideResult{}, err
	}
	res := sideResult{rows: b.s.rows, batchSize: defaults.BatchSize}
	tpl, eligible, err := b.template(ctx, dense, b.s.rows)
	if err != nil {
		return res, err
	}
	res.eligible = eligible
	contestants := append(baselines("", res.batchSize),
		contestant{key: "C", db: "c", name: "the rail: `api serve` (defaults) + `sweepcron --only notifications`", setup: b.railSetup(b.s.binDir, "notifications", nil)})
	if v, ok := b.variant("c_variant", "notifications", nil); ok {
		contestants = append(contestants, v)
	}
	res.rounds, err = b.foregroundRounds(ctx, "side by side", "round", tpl, contestants, eligible)
	return res, err
}

// foregroundRounds plays cs beside the foreground workload, each round after the foreground
// alone, then drops the template tpl. Rounds run until enough are clean, within a cap on rounds
// and on time: a disturbed round is kept in the report's round list but left out of the medians.
func (b *bench) foregroundRounds(ctx context.Context, run, roundName, tpl string, cs []contestant, eligible int64) (rounds, error) {
	var rs rounds
	err := b.addRounds(run, b.began, roundsBudget, func() bool { return rs.clean() >= b.s.rounds }, func(n int) error {
		what := fmt.Sprintf("%s %d", roundName, n)
		rd, err := b.fgRound(ctx, n, what, tpl)
		if err == nil {
			err = b.play(ctx, what, &rd, cs, tpl, probe{fg: true}, eligible)
		}
		rs = append(rs, rd)
		return err
	})
	if err != nil {
		return rs, err
	}
	return rs, b.drop(ctx, tpl)
}

// play runs each of cs in round rd, within p, each to delete want rows.
func (b *bench) play(ctx context.Context, what string, rd *round, cs []contestant, tpl string, p probe, want int64) error {
	for _, c := range cs {
		o, err := b.contest(ctx, what, c, tpl, p, want)
		if err != nil {
			return err
		}
		rd.contestants = append(rd.contestants, o)
	}
	if rd.disturbed() {
		b.logf("%s: disturbed (other tenants took up to %.0f%% of the machine): left out of the medians", what, 100*rd.maxForeign())
	}
	return nil
}

// fgRound starts a round of a run with a foreground: its idle baseline.
func (b *bench) fgRound(ctx context.Context, n int, what, tpl string) (round, error) {
	rd := round{n: n}
	var err error
	b.logf("%s: foreground alone for %s (the idle baseline)", what, fgBaseline)
	rd.baseline, rd.baselineForeign, err = b.baseline(ctx, tpl)
	return rd, err
}

func (b *bench) renderSideBySide(r sideResult) string {
	var w strings.Builder
	b.header(&w, "Side by side")
	fmt.Fprintf(&w, "Table: %s notifications rows, %s eligible (%.1f%%). Foreground: %d workers × %.0f ops/s. %s.\n\n",
		fmtCount(int64(r.rows)), fmtCount(r.eligible), 100*float64(r.eligible)/float64(r.rows),
		fgWorkers, float64(time.Second)/float64(fgPeriod), roundsNote(r.rounds))
	as := acrossAll(r.rounds.counted())
	a, a2 := pick(as, "A"), pick(as, "A′")
	var idle []time.Duration
	for _, rd := range r.rounds.counted() {
		idle = append(idle, rd.baseline...)
	}
	fgAt := func(head string, q float64) column {
		return column{head, func(x across) string { return fmtDuration(percentile(x.fg(), q)) }}
	}
	contestantTable(&w, as, []column{colKey, colName, colTime, colRate, colRatio("A", a), colRatio("A′", a2), colBatches, colP50, colP99, colLongest,
		fgAt("fg p50>", 0.5), fgAt("fg p99>", 0.99), colFG, colWAL, {"API peak RSS>", func(x across) string {
			if rss := x.most(func(o outcome) float64 { return float64(o.peakRSS) }); rss > 0 {
				return fmtMiB(int64(rss))
			}
			return ""
		}}}, []string{"idle", "foreground alone, " + fgBaseline.String(), "", "", "", "", "", "", "", "",
		fmtDuration(percentile(idle, 0.5)), fmtDuration(percentile(idle, 0.99)), "1.00", "", ""})
	w.WriteString("Every round, in order (ratios within the round):\n\n")
	roundList(&w, r.rounds, func(rd round, o outcome) string {
		ra, ra2, rb := rd.contestants[0], rd.contestants[1], rd.contestants[2]
		if !strings.HasPrefix(o.key, "C") {
			return fmt.Sprintf("%s %s", o.key, fmtDuration(o.elapsed))
		}
		return fmt.Sprintf("%s %s (%.2f × A, %.2f × A′, %.1f × B), %d batches, longest %s, foreground p99 %.2f × idle, %d sweepcron run(s) whose answers took %s of it",
			o.key, fmtDuration(o.elapsed), o.rowsPerSec()/ra.rowsPerSec(), o.rowsPerSec()/ra2.rowsPerSec(), o.rowsPerSec()/rb.rowsPerSec(),
			len(o.batches), fmtDuration(maxDuration(o.batchDurations())), float64(percentile(o.fg, 0.99))/float64(percentile(rd.baseline, 0.99)),
			o.runs, fmtDuration(o.serverTime))
	})
	for _, c := range []struct{ key, who string }{{"C", "C"}, {"C′", "C′ (for comparison: not what make bench promises)"}} {
		if x := pick(as, c.key); len(x.rounds) > 0 {
			writeSideTargets(&w, c.who, x, a, a2, pick(as, "B"))
		}
	}
	return w.String()
}

func writeSideTargets(w *strings.Builder, who string, c, a, a2, b across) {
	ds := c.batches()
	vsA, vsA2, vsB, fg, rss := c.ratio(a), c.ratio(a2), c.ratio(b), c.fgRatio(), int64(c.most(func(o outcome) float64 { return float64(o.peakRSS) }))
	table(w, []string{"target: " + who + " against the others in the same round, median of rounds", "measured>", ""}, [][]string{
		{fmt.Sprintf("rows/s ≥ %.1f × A's", targetVsMonolithic), fmt.Sprintf("%.2f ×", vsA), verdict(vsA >= targetVsMonolithic)},
		{fmt.Sprintf("rows/s ≥ %.1f × A′'s (the same DELETE, other plan)", targetVsMonolithic), fmt.Sprintf("%.2f ×", vsA2), verdict(vsA2 >= targetVsMonolithic)},
		{fmt.Sprintf("rows/s ≥ %.0f × B's", targetVsBatched), fmt.Sprintf("%.1f ×", vsB), verdict(vsB >= targetVsBatched)},
		{fmt.Sprintf("every batch transaction ≤ %s (every batch of the counted rounds)", fmtDuration(targetMaxBatch)),
			"longest " + fmtDuration(maxDuration(ds)), verdict(maxDuration(ds) <= targetMaxBatch)},
		{fmt.Sprintf("batch p99 ≤ %s (every batch of the counted rounds)", fmtDuration(targetP99Batch)),
			fmtDuration(percentile(ds, 0.99)), verdict(percentile(ds, 0.99) <= targetP99Batch)},
		{fmt.Sprintf("foreground p99 ≤ %.0f × idle", targetForeground), fmt.Sprintf("%.2f ×", fg), verdict(fg <= targetForeground)},
		{fmt.Sprintf("API peak RSS ≤ %s (any counted round)", fmtMiB(targetRSS)), fmtMiB(rss), verdict(rss > 0 && rss <= targetRSS)},
	})
}
