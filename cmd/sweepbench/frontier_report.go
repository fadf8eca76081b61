package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// frontierRow is one contestant of the frontier, as its report reads it.
type frontierRow struct {
	a      across
	fg     interval
	budget int64
	// overIdle is the p99's interval over the idle p99; vsB rows/s over B's, in the same rounds.
	overIdle, vsB   float64
	walP95, walMean float64
}

// gentle reports whether r meets both of the frontier's targets.
func (r frontierRow) gentle() bool { return r.overIdle <= gentleOverIdle && r.vsB >= gentleVsBatched }

// frontierRows reads each contestant's row from r; idle is the pooled idle baseline's p99.
func frontierRows(r frontierResult, as []across, idle interval) []frontierRow {
	bb := pick(as, "B")
	var rows []frontierRow
	for i, a := range as {
		row := frontierRow{a: a, fg: p99Interval(a.fg(), uint64(i+1)), budget: r.budgets[a.key]}
		row.overIdle = float64(row.fg.hi) / float64(idle.est)
		if len(bb.rounds) > 0 {
			row.vsB = a.ratio(bb)
		}
		row.walP95, row.walMean = percentileF(r.walRates[a.key], 0.95), meanF(r.walRates[a.key])
		rows = append(rows, row)
	}
	return rows
}

func (b *bench) renderFrontier(r frontierResult) string {
	var w strings.Builder
	b.header(&w, "The foreground frontier: the rail's settings and WAL budgets beside live traffic")
	fmt.Fprintf(&w, "Table: %s notifications rows, %s eligible (%.1f%%). Foreground: %d workers × %.0f ops/s. "+
		"Each contestant drains for %s at most beside it; its window starts with nothing dirty in the kernel's page "+
		"cache and ends with the kernel writing back the pages left dirty (sync), the foreground still running. %s. Load average at the end: %s.\n\n",
		fmtCount(int64(r.rows)), fmtCount(r.eligible), 100*float64(r.eligible)/float64(r.rows),
		fgWorkers, float64(time.Second)/float64(fgPeriod), fmtDuration(r.window), roundsNote(r.rounds), loadAverage())
	as := acrossAll(r.rounds.counted())
	var idleOps []time.Duration
	for _, rd := range r.rounds.counted() {
		idleOps = append(idleOps, rd.baseline...)
	}
	idle := p99Interval(idleOps, 0)
	fmt.Fprintf(&w, "Idle foreground p99: %s (95%% interval %s–%s, %s operations). An interval is a moving-block bootstrap "+
		"(%d resamples of one-second blocks of each worker's operations) over the rounds' operations pooled. "+
		"%s is the foreground alone again at each round's end, measured as a contestant: its interval's top over the idle p99 "+
		"is what the measurement moves by itself.\n\n",
		fmtDuration(idle.est), fmtDuration(idle.lo), fmtDuration(idle.hi), fmtCount(int64(len(idleOps))), bootResamples, idleAgainKey)
	var idleWaits []waits
	for _, rd := range r.rounds.counted() {
		idleWaits = append(idleWaits, rd.baselineWaits)
	}
	if iw := medianWaits(idleWaits); iw.known {
		fmt.Fprintf(&w, "Waiting, as the kernel's pressure stall information counts it (the share of a window during which "+
			"some task was runnable with no core free, or blocked on I/O; medians of rounds): idle %s.\n\n", iw)
	}
	rows := frontierRows(r, as, idle)
	frontierTable(&w, rows)
	w.WriteString("Every round, in order (ratios within the round):\n\n")
	roundList(&w, r.rounds, func(rd round, o outcome) string {
		rb, _ := findKey(rd.contestants, "B")
		p := fmt.Sprintf("%s %s, %s rows/s, fg p99 %.2f × idle", o.key, fmtDuration(o.elapsed), fmtRate(o.rowsPerSec()),
			float64(percentile(o.fg, 0.99))/float64(percentile(rd.baseline, 0.99)))
		if o.key != "B" && o.key != idleAgainKey && rb.elapsed > 0 {
			p += fmt.Sprintf(" (%.1f × B's rows/s)", o.rowsPerSec()/rb.rowsPerSec())
		}
		p += fmt.Sprintf(", writeback %s", fmtDuration(o.writeback))
		if o.waits.known {
			p += ", waiting " + o.waits.String()
		}
		return p
	})
	frontierVerdict(&w, rows)
	return w.String()
}

// frontierTable writes the frontier: one row per contestant.
func frontierTable(w *strings.Builder, rows []frontierRow) {
	var out [][]string
	for _, r := range rows {
		budget, p95, mean := "", fmtMiBs(r.walP95), fmtMiBs(r.walMean)
		if r.budget > 0 {
			budget = fmtMiBs(float64(r.budget))
			p95 += fmt.Sprintf(" (%.2f ×)", r.walP95/float64(r.budget))
			mean += fmt.Sprintf(" (%.2f ×)", r.walMean/float64(r.budget))
		}
		a := r.a
		out = append(out, []string{a.key, a.name,
			fmtDuration(a.medDur(func(o outcome) time.Duration { return o.elapsed })),
			fmtRate(a.med(outcome.rowsPerSec)), fmt.Sprintf("%.2f", r.vsB),
			fmt.Sprintf("%.0f", a.med(func(o outcome) float64 { return float64(len(o.batches)) })),
			fmtDuration(percentile(a.batches(), 0.99)),
			fmt.Sprintf("%s [%s–%s]", fmtDuration(r.fg.est), fmtDuration(r.fg.lo), fmtDuration(r.fg.hi)),
			fmt.Sprintf("%.2f", r.overIdle), budget, p95, mean,
			fmtDuration(a.medDur(func(o outcome) time.Duration { return o.throttled })),
			medianWaits(a.waits()).String(),
		})
	}
	table(w, []string{"", "contestant", "time>", "rows/s>", "÷ B>", "batches>", "batch p99>", "fg p99 [95% CI]>",
		"CI top ÷ idle p99>", "WAL budget>", "WAL 1-s p95>", "WAL mean>", "throttled>", "waiting>"}, out)
}

// frontierVerdict picks the gentle setting, the fastest of the rail's settings (not B, not a
// candidate C′) that meets both targets, and writes the targets against it.
func frontierVerdict(w *strings.Builder, rows []frontierRow) {
	var best *frontierRow
	for i, r := range rows {
		if isFrontierSetting(r.a.key) && r.gentle() && (best == nil || r.a.med(outcome.rowsPerSec) > best.a.med(outcome.rowsPerSec)) {
			best = &rows[i]
		}
	}
	if best == nil {
		fmt.Fprintf(w, "No setting met both targets (foreground p99's interval top ≤ %.1f × idle, rows/s ≥ %.0f × B's) in these rounds.\n\n",
			gentleOverIdle, gentleVsBatched)
		return
	}
	table(w, []string{"target: the gentle setting, " + best.a.key + ", against B and idle in the same rounds", "measured>", ""}, [][]string{
		{fmt.Sprintf("foreground p99 (interval top) ≤ %.1f × idle p99", gentleOverIdle), fmt.Sprintf("%.2f ×", best.overIdle), verdict(best.overIdle <= gentleOverIdle)},
		{fmt.Sprintf("rows/s ≥ %.0f × B's", gentleVsBatched), fmt.Sprintf("%.1f ×", best.vsB), verdict(best.vsB >= gentleVsBatched)},
		{fmt.Sprintf("batch p99 ≤ %s", fmtDuration(targetP99Batch)), fmtDuration(percentile(best.a.batches(), 0.99)),
			verdict(percentile(best.a.batches(), 0.99) <= targetP99Batch)},
	})
}

// isFrontierSetting reports whether key is one of frontierSettings.
func isFrontierSetting(key string) bool {
	for _, s := range frontierSettings {
		if s.key == key {
			return true
		}
	}
	return false
}

// loadAverage is the machine's 1, 5 and 15 minute load averages, as uptime shows them.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], ", ")
	}
	return "unknown"
}

func fmtMiBs(bytes float64) string { return fmt.Sprintf("%.1f MiB/s", bytes/(1<<20)) }
