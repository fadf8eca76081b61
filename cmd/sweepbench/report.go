package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The targets.
const (
	targetVsMonolithic = 0.5
	targetVsBatched    = 3.0
	targetMaxBatch     = 250 * time.Millisecond
	targetP99Batch     = 100 * time.Millisecond
	targetForeground   = 2.0
	targetRSS          = 64 << 20
	targetScale        = 1.5
)

func verdict(ok bool) string {
	if ok {
		return "**pass**"
	}
	return "**MISS**"
}

func (m machine) String() string {
	return fmt.Sprintf("%d cores (%s), %s RAM; PostgreSQL %s (fsync %s, shared_buffers %s, wal_buffers %s); %s",
		m.cores, m.cpu, m.memory, m.pgVersion, m.fsync, m.sharedBuffers, m.walBufs, m.goVersion)
}

func header(w *strings.Builder, title string, m machine, s settings, elapsed time.Duration) {
	fmt.Fprintf(w, "%s (sweepbench %s): rerun it rather than edit this file. -->\n# %s\n\n", generatedNote, s.run, title)
	fmt.Fprintf(w, "`%s`, run %s, took %s.  \n", s.invocation(), time.Now().UTC().Format("2006-01-02 15:04 MST"), elapsed.Round(time.Second))
	fmt.Fprintf(w, "Machine: %s.\n\n", m)
}

func byKey(outs []outcome, key string) (outcome, bool) {
	for _, o := range outs {
		if o.key == key {
			return o, true
		}
	}
	return outcome{}, false
}

// median of xs; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// across is one contestant over every round of a side-by-side run. Rates, ratios and the
// foreground are each round's, then the median of the rounds: a burst of a noisy neighbour moves
// one round, not the report. Batch p99 and the longest transaction pool every batch of every
// round: they are promises about each batch, so the worst one counts.
type across struct {
	key, name string
	rounds    []outcome
	// idle pools the baselines of the same rounds.
	idle []time.Duration
}

func (a across) med(f func(o outcome, i int) float64) float64 {
	xs := make([]float64, len(a.rounds))
	for i, o := range a.rounds {
		xs[i] = f(o, i)
	}
	return median(xs)
}

func (a across) batches() []time.Duration {
	var ds []time.Duration
	for _, o := range a.rounds {
		ds = append(ds, o.batchDurations()...)
	}
	return ds
}

// fg pools the foreground's latencies over the rounds: one window holds a few hundred
// operations, too few for a p99 of its own.
func (a across) fg() []time.Duration {
	var ds []time.Duration
	for _, o := range a.rounds {
		ds = append(ds, o.fg...)
	}
	return ds
}

func (a across) fgRatio() float64 {
	return float64(percentile(a.fg(), 0.99)) / float64(percentile(a.idle, 0.99))
}

// ratio is the median over rounds of a's rows/s over b's in the same round.
func (a across) ratio(b across) float64 {
	return a.med(func(o outcome, i int) float64 { return o.rowsPerSec() / b.rounds[i].rowsPerSec() })
}

func (a across) peakRSS() int64 {
	var m int64
	for _, o := range a.rounds {
		m = max(m, o.peakRSS)
	}
	return m
}

// contestantsAcross regroups a run's rounds by contestant, in the order they ran.
func contestantsAcross(r sideResult) []across {
	var out []across
	rounds := r.counted()
	if len(rounds) == 0 {
		return nil
	}
	for _, first := range rounds[0].contestants {
		a := across{key: first.key, name: first.name}
		for _, rd := range rounds {
			o, _ := byKey(rd.contestants, first.key)
			a.rounds = append(a.rounds, o)
			a.idle = append(a.idle, rd.baseline...)
		}
		out = append(out, a)
	}
	return out
}

func acrossByKey(as []across, key string) across {
	for _, a := range as {
		if a.key == key {
			return a
		}
	}
	return across{}
}

func renderSideBySide(m machine, s settings, r sideResult) string {
	var w strings.Builder
	header(&w, "Side by side", m, s, r.elapsed)
	fmt.Fprintf(&w, "Table: %s notifications rows, %s eligible (%.1f%%); every contestant on a fresh copy of it. "+
		"Foreground: %d workers × %.0f ops/s (insert, mark read), synchronous commit, latency from each operation's due time.\n\n",
		fmtCount(int64(r.rows)), fmtCount(r.eligible), 100*float64(r.eligible)/float64(r.rows),
		fgWorkers, float64(time.Second)/float64(fgPeriod))
	switch clean := r.clean(); {
	case clean == len(r.rounds):
		fmt.Fprintf(&w, "Rounds: %d, all clean (other tenants took at most %.0f%% of the machine in any window).\n\n", len(r.rounds), 100*maxForeign)
	case clean > 0:
		fmt.Fprintf(&w, "Rounds: %d run, %d clean; the medians leave out the %d in which other tenants took more than %.0f%% of the machine in some window.\n\n",
			len(r.rounds), clean, len(r.rounds)-clean, 100*maxForeign)
	default:
		fmt.Fprintf(&w, "Rounds: %d run, **none clean**: other tenants took more than %.0f%% of the machine in every round, so these numbers measure the neighbours as much as the contestants.\n\n",
			len(r.rounds), 100*maxForeign)
	}

	as := contestantsAcross(r)
	a, a2 := acrossByKey(as, "A"), acrossByKey(as, "A′")
	var idle []time.Duration
	for _, rd := range r.counted() {
		idle = append(idle, rd.baseline...)
	}
	w.WriteString("| | contestant | time | rows/s | ÷ A | ÷ A′ | batches | batch p50 | batch p99 | longest txn | fg p50 | fg p99 | fg p99 ÷ idle | WAL | API peak RSS |\n")
	w.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	fmt.Fprintf(&w, "| idle | foreground alone, %s | | | | | | | | | %s | %s | 1.00 | | |\n",
		fgBaseline, fmtDuration(percentile(idle, 0.5)), fmtDuration(percentile(idle, 0.99)))
	for _, c := range as {
		ds := c.batches()
		rss := ""
		if c.peakRSS() > 0 {
			rss = fmtMiB(c.peakRSS())
		}
		dur := func(f func(o outcome) time.Duration) string {
			return fmtDuration(time.Duration(c.med(func(o outcome, _ int) float64 { return float64(f(o)) })))
		}
		fmt.Fprintf(&w, "| %s | %s | %s | %s | %.2f | %.2f | %.0f | %s | %s | %s | %s | %s | %.2f | %.0f MB | %s |\n",
			c.key, c.name, dur(func(o outcome) time.Duration { return o.elapsed }),
			fmtRate(c.med(func(o outcome, _ int) float64 { return o.rowsPerSec() })),
			c.ratio(a), c.ratio(a2), c.med(func(o outcome, _ int) float64 { return float64(len(o.batches)) }),
			dur(func(o outcome) time.Duration { return percentile(o.batchDurations(), 0.5) }),
			fmtDuration(percentile(ds, 0.99)), fmtDuration(maxDuration(ds)),
			fmtDuration(percentile(c.fg(), 0.5)), fmtDuration(percentile(c.fg(), 0.99)),
			c.fgRatio(), c.med(func(o outcome, _ int) float64 { return float64(o.wal) / 1e6 }), rss)
	}
	w.WriteString("\n")
	w.WriteString("Time, rows/s, its ratios (taken within each round), batches, batch p50 and WAL are medians over the counted rounds; " +
		"batch p99, the longest transaction and the foreground's percentiles pool every batch and every operation of the counted rounds. " +
		"C's batch durations are the runner's own (BEGIN to COMMIT) from its per-batch debug line (`LOG_LEVEL=debug`); A's and B's are the client's. " +
		"WAL is the insert position's advance over the contestant, cluster-wide (it includes the foreground's).\n\n")
	w.WriteString("Every round, in order (ratios within the round; \"others\" is the most other tenants took of the machine in any of its windows):\n\n")
	for _, rd := range r.rounds {
		ra, _ := byKey(rd.contestants, "A")
		ra2, _ := byKey(rd.contestants, "A′")
		rb, _ := byKey(rd.contestants, "B")
		state := "clean"
		if rd.disturbed() {
			state = "disturbed, left out"
		}
		var parts []string
		for _, o := range rd.contestants {
			if !strings.HasPrefix(o.key, "C") {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s (%.2f × A, %.2f × A′, %.1f × B), %d batches, longest %s, foreground p99 %.2f × idle, %d sweepcron run(s) whose answers took %s of it",
				o.key, fmtDuration(o.elapsed), o.rowsPerSec()/ra.rowsPerSec(), o.rowsPerSec()/ra2.rowsPerSec(), o.rowsPerSec()/rb.rowsPerSec(),
				len(o.batches), fmtDuration(maxDuration(o.batchDurations())), float64(percentile(o.fg, 0.99))/float64(percentile(rd.baseline, 0.99)),
				o.runs, fmtDuration(o.serverTime)))
		}
		fmt.Fprintf(&w, "- round %d (%s, others ≤ %.0f%%): A %s, A′ %s, B %s; %s.\n", rd.n, state, 100*rd.maxForeign(),
			fmtDuration(ra.elapsed), fmtDuration(ra2.elapsed), fmtDuration(rb.elapsed), strings.Join(parts, "; "))
	}
	w.WriteString("\n")
	b := acrossByKey(as, "B")
	if c := acrossByKey(as, "C"); len(c.rounds) > 0 {
		writeTargets(&w, "C", c, a, a2, b)
	}
	if c := acrossByKey(as, "C′"); len(c.rounds) > 0 {
		writeTargets(&w, "C′ (for comparison: not what make bench promises)", c, a, a2, b)
	}
	return w.String()
}

func writeTargets(w *strings.Builder, who string, c, a, a2, b across) {
	ds := c.batches()
	vsA, vsA2, vsB, fg := c.ratio(a), c.ratio(a2), c.ratio(b), c.fgRatio()
	fmt.Fprintf(w, "| target: %s against the others in the same round, median of rounds | measured | |\n|---|--:|---|\n", who)
	fmt.Fprintf(w, "| rows/s ≥ %.1f × A's | %.2f × | %s |\n", targetVsMonolithic, vsA, verdict(vsA >= targetVsMonolithic))
	fmt.Fprintf(w, "| rows/s ≥ %.1f × A′'s (the same DELETE, other plan) | %.2f × | %s |\n", targetVsMonolithic, vsA2, verdict(vsA2 >= targetVsMonolithic))
	fmt.Fprintf(w, "| rows/s ≥ %.0f × B's | %.1f × | %s |\n", targetVsBatched, vsB, verdict(vsB >= targetVsBatched))
	fmt.Fprintf(w, "| every batch transaction ≤ %s (every batch of the counted rounds) | longest %s | %s |\n", fmtDuration(targetMaxBatch), fmtDuration(maxDuration(ds)), verdict(maxDuration(ds) <= targetMaxBatch))
	fmt.Fprintf(w, "| batch p99 ≤ %s (every batch of the counted rounds) | %s | %s |\n", fmtDuration(targetP99Batch), fmtDuration(percentile(ds, 0.99)), verdict(percentile(ds, 0.99) <= targetP99Batch))
	fmt.Fprintf(w, "| foreground p99 ≤ %.0f × idle | %.2f × | %s |\n", targetForeground, fg, verdict(fg <= targetForeground))
	fmt.Fprintf(w, "| API peak RSS ≤ %s (any counted round) | %s | %s |\n", fmtMiB(targetRSS), fmtMiB(c.peakRSS()), verdict(c.peakRSS() > 0 && c.peakRSS() <= targetRSS))
	w.WriteString("\n")
}

func renderScale(m machine, s settings, r scaleResult) string {
	var w strings.Builder
	header(&w, "Scale: per-batch cost at 1M and 5M rows", m, s, r.elapsed)
	fmt.Fprintf(&w, "Each size is seeded the same way (80%% eligible) and swept twice on fresh copies, without foreground: "+
		"by the engine in-process with every batch at BATCH_SIZE=%d (so batch durations compare directly), and by the rail end to end "+
		"(adaptive batches grow until they take BATCH_TARGET or reach the 20,000-row cap, at any size, so the comparable figure is the cost per row).\n\n", r.fixedSize)
	w.WriteString("| rows | eligible | fixed: batches | fixed: batch p50 | fixed: p99 | fixed: max | rail: time | rail: batches | rail: batch p50 | rail: rows/batch p50 | rail: µs/row p50 | rail: longest txn |\n")
	w.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range r.points {
		fd, rd := p.fixed.batchDurations(), p.rail.batchDurations()
		fmt.Fprintf(&w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s |\n",
			fmtCount(int64(p.rows)), fmtCount(p.eligible), fmtCount(int64(len(fd))),
			fmtDuration(percentile(fd, 0.5)), fmtDuration(percentile(fd, 0.99)), fmtDuration(maxDuration(fd)),
			fmtDuration(p.rail.elapsed), fmtCount(int64(len(rd))), fmtDuration(percentile(rd, 0.5)),
			fmtCount(int64(medianRows(p.rail.batches))), perRowMedian(p.rail.batches), fmtDuration(maxDuration(rd)))
	}
	w.WriteString("\n")
	if len(r.points) == 2 {
		small, large := r.points[0], r.points[1]
		fixedRatio := float64(percentile(large.fixed.batchDurations(), 0.5)) / float64(percentile(small.fixed.batchDurations(), 0.5))
		rowRatio := perRowMedian(large.rail.batches) / perRowMedian(small.rail.batches)
		w.WriteString("| target | measured | |\n|---|--:|---|\n")
		fmt.Fprintf(&w, "| fixed-size batch p50 at %s ≤ %.1f × at %s | %.2f × | %s |\n",
			fmtCount(int64(large.rows)), targetScale, fmtCount(int64(small.rows)), fixedRatio, verdict(fixedRatio <= targetScale))
		fmt.Fprintf(&w, "| rail cost per row p50 at %s ≤ %.1f × at %s | %.2f × | %s |\n",
			fmtCount(int64(large.rows)), targetScale, fmtCount(int64(small.rows)), rowRatio, verdict(rowRatio <= targetScale))
		fmt.Fprintf(&w, "| every rail batch ≤ %s at %s | longest %s | %s |\n", fmtDuration(targetMaxBatch), fmtCount(int64(large.rows)),
			fmtDuration(maxDuration(large.rail.batchDurations())), verdict(maxDuration(large.rail.batchDurations()) <= targetMaxBatch))
		w.WriteString("\n")
	}
	return w.String()
}

// full reports whether b was a full batch: as many rows as asked (the index path), or a heap
// path's range, sized in blocks (the last, cut at the table's end, is among them: one of many).
func full(b batch) bool { return b.rows > 0 && (b.rows >= int64(b.size) || b.blocks > 0) }

// medianRows is the median rows deleted per batch, counting only full batches: the last, short
// batch of a pass says when the backlog ended, not how large batches were.
func medianRows(bs []batch) int64 {
	var rows []time.Duration // percentile works on durations; rows fit in one
	for _, b := range bs {
		if full(b) {
			rows = append(rows, time.Duration(b.rows))
		}
	}
	return int64(percentile(rows, 0.5))
}

// perRowMedian is the median of each full batch's duration per row, in microseconds.
func perRowMedian(bs []batch) float64 {
	var per []time.Duration
	for _, b := range bs {
		if full(b) {
			per = append(per, b.took/time.Duration(b.rows))
		}
	}
	return float64(percentile(per, 0.5)) / float64(time.Microsecond)
}

// generatedNote opens every report: the file is the run's, written whole, and docs/BENCHMARKS.md
// holds the prose about it.
const generatedNote = "<!-- Written by cmd/sweepbench"

// writeReport writes a run's report whole to path, making its folder.
func writeReport(path, report string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(strings.TrimRight(report, "\n")+"\n"), 0o644)
}

func (b *bench) sideBySideReport(ctx context.Context) (string, error) {
	res, err := b.sideBySide(ctx)
	if err != nil {
		return "", err
	}
	res.elapsed = time.Since(b.began)
	return renderSideBySide(b.machine, b.s, res), nil
}

func (b *bench) scaleReport(ctx context.Context) (string, error) {
	res, err := b.scaleRun(ctx)
	if err != nil {
		return "", err
	}
	res.elapsed = time.Since(b.began)
	return renderScale(b.machine, b.s, res), nil
}
