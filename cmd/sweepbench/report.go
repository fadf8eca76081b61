package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The targets every run that has them shares: each batch's transaction is bounded.
const (
	targetMaxBatch = 250 * time.Millisecond
	targetP99Batch = 100 * time.Millisecond
)

func verdict(ok bool) string {
	if ok {
		return "**pass**"
	}
	return "**MISS**"
}

func (m machine) String() string {
	return fmt.Sprintf("%d cores (%s), %s RAM; PostgreSQL %s (fsync %s, shared_buffers %s, wal_buffers %s, min_wal_size %s, max_wal_size %s); %s",
		m.cores, m.cpu, m.memory, m.pgVersion, m.fsync, m.sharedBuffers, m.walBufs, m.minWAL, m.maxWAL, m.goVersion)
}

// generatedNote opens every report: the file is the run's, written whole, and docs/BENCHMARKS.md
// holds the prose about it.
const generatedNote = "<!-- Written by cmd/sweepbench"

// header opens a run's report: what wrote it, how to run it again, and where.
func (b *bench) header(w *strings.Builder, title string) {
	fmt.Fprintf(w, "%s (sweepbench %s): rerun it rather than edit this file. -->\n# %s\n\n", generatedNote, b.s.run, title)
	fmt.Fprintf(w, "`%s`, run %s, took %s.  \n", b.s.invocation(), time.Now().UTC().Format("2006-01-02 15:04 MST"),
		time.Since(b.began).Round(time.Second))
	fmt.Fprintf(w, "Machine: %s. What the columns mean: docs/BENCHMARKS.md.\n\n", b.machine)
}

// writeReport writes a run's report whole to path, making its folder.
func writeReport(path, report string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(strings.TrimRight(report, "\n")+"\n"), 0o644)
}

// table writes a Markdown table; a heading that ends in ">" is right-aligned (a number).
func table(w *strings.Builder, heads []string, rows [][]string) {
	var rule strings.Builder
	for i, h := range heads {
		if t, ok := strings.CutSuffix(h, ">"); ok {
			heads[i] = t
			rule.WriteString("--:|")
		} else {
			rule.WriteString("---|")
		}
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(heads, " | "), rule.String())
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	w.WriteString("\n")
}

// roundsNote says how many rounds ran and which the medians count.
func roundsNote(rs rounds) string {
	switch clean := rs.clean(); {
	case clean == len(rs):
		return fmt.Sprintf("%d rounds, all clean (other tenants took at most %.0f%% of the machine in any window)", len(rs), 100*maxForeign)
	case clean > 0:
		return fmt.Sprintf("%d rounds, %d clean: the medians leave out the others, in which other tenants took more than %.0f%% of the machine in some window",
			len(rs), clean, 100*maxForeign)
	}
	return fmt.Sprintf("%d rounds, **none clean**: other tenants took more than %.0f%% of the machine in every round, "+
		"so these numbers measure the neighbours as much as the contestants", len(rs), 100*maxForeign)
}

// roundList writes every round, in order, each as part says.
func roundList(w *strings.Builder, rs rounds, part func(rd round, o outcome) string) {
	for _, rd := range rs {
		state := "clean"
		if rd.disturbed() {
			state = "disturbed, left out"
		}
		var parts []string
		for _, o := range rd.contestants {
			if p := part(rd, o); p != "" {
				parts = append(parts, p)
			}
		}
		fmt.Fprintf(w, "- round %d (%s, others ≤ %.0f%%): %s.\n", rd.n, state, 100*rd.maxForeign(), strings.Join(parts, "; "))
	}
	w.WriteString("\n")
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

// across is one contestant over the counted rounds of a run. Rates, ratios and the foreground
// are each round's, then the median of the rounds: a burst of a noisy neighbour moves one round,
// not the report. Batch p99 and the longest transaction pool every batch of every round: they
// are promises about each batch, so the worst one counts.
type across struct {
	key, name string
	slow      bool
	rounds    []outcome
	// idle pools the baselines of the same rounds.
	idle []time.Duration
}

// acrossAll regroups rs by contestant, in the order they ran.
func acrossAll(rs rounds) []across {
	if len(rs) == 0 {
		return nil
	}
	var out []across
	for i, first := range rs[0].contestants {
		a := across{key: first.key, name: first.name, slow: first.slow}
		for _, rd := range rs {
			a.rounds = append(a.rounds, rd.contestants[i])
			a.idle = append(a.idle, rd.baseline...)
		}
		out = append(out, a)
	}
	return out
}

// pick is the contestant key of as (against the healthy standby, in the replica run).
func pick(as []across, key string) across { return pickSlow(as, key, false) }

func pickSlow(as []across, key string, slow bool) across {
	for _, a := range as {
		if a.key == key && a.slow == slow {
			return a
		}
	}
	return across{}
}

func (a across) med(f func(o outcome) float64) float64 {
	xs := make([]float64, len(a.rounds))
	for i, o := range a.rounds {
		xs[i] = f(o)
	}
	return median(xs)
}

func (a across) medDur(f func(o outcome) time.Duration) time.Duration {
	return time.Duration(a.med(func(o outcome) float64 { return float64(f(o)) }))
}

// most is the largest f of any round.
func (a across) most(f func(o outcome) float64) float64 {
	m := 0.0
	for _, o := range a.rounds {
		m = max(m, f(o))
	}
	return m
}

// vs is the median over rounds of f(a) over f(b) in the same round.
func (a across) vs(b across, f func(o outcome) float64) float64 {
	xs := make([]float64, len(a.rounds))
	for i, o := range a.rounds {
		xs[i] = f(o) / f(b.rounds[i])
	}
	return median(xs)
}

// ratio is the median over rounds of a's rows/s over b's in the same round.
func (a across) ratio(b across) float64 { return a.vs(b, outcome.rowsPerSec) }

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

// column is one column of a table of contestants.
type column struct {
	head string
	cell func(a across) string
}

// contestantTable writes one row of cols for each of as, after the rows of pre.
func contestantTable(w *strings.Builder, as []across, cols []column, pre ...[]string) {
	heads := make([]string, len(cols))
	for i, c := range cols {
		heads[i] = c.head
	}
	rows := pre
	for _, a := range as {
		row := make([]string, len(cols))
		for i, c := range cols {
			row[i] = c.cell(a)
		}
		rows = append(rows, row)
	}
	table(w, heads, rows)
}

// The columns the runs share.
var (
	colKey  = column{"", func(a across) string { return a.key }}
	colName = column{"contestant", func(a across) string { return a.name }}
	colTime = column{"time>", func(a across) string {
		return fmtDuration(a.medDur(func(o outcome) time.Duration { return o.elapsed }))
	}}
	colRate    = column{"rows/s>", func(a across) string { return fmtRate(a.med(outcome.rowsPerSec)) }}
	colBatches = column{"batches>", func(a across) string {
		return fmt.Sprintf("%.0f", a.med(func(o outcome) float64 { return float64(len(o.batches)) }))
	}}
	colP50 = column{"batch p50>", func(a across) string {
		return fmtDuration(a.medDur(func(o outcome) time.Duration { return percentile(o.batchDurations(), 0.5) }))
	}}
	colP99     = column{"batch p99>", func(a across) string { return fmtDuration(percentile(a.batches(), 0.99)) }}
	colLongest = column{"longest txn>", func(a across) string { return fmtDuration(maxDuration(a.batches())) }}
	colFG      = column{"fg p99 ÷ idle>", func(a across) string { return fmt.Sprintf("%.2f", a.fgRatio()) }}
	colWAL     = column{"WAL>", func(a across) string {
		return fmt.Sprintf("%.0f MB", a.med(func(o outcome) float64 { return float64(o.wal) / 1e6 }))
	}}
)

// colRatio is the rows/s ratio to ref, within each round; empty when ref did not run.
func colRatio(label string, ref across) column {
	return column{"÷ " + label + ">", func(a across) string {
		if len(ref.rounds) == 0 {
			return ""
		}
		return fmt.Sprintf("%.2f", a.ratio(ref))
	}}
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
