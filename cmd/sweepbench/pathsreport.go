package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

func renderPaths(m machine, s settings, r pathsResult) string {
	var w strings.Builder
	header(&w, "Access paths: each path on each table", m, s, r.elapsed)
	fmt.Fprintf(&w, "Every contestant on a fresh copy of its table, with the foreground (%d workers × %.0f ops/s on notifications) around it; "+
		"the idle baseline is taken once a round. C is the rail end to end, choosing its path; heap and index are the engine in-process "+
		"with the API's default settings and that path forced (no HTTP, no process starts). A row's path is what the answers named. "+
		"Lock retries are the batches that met a held row lock and ran again skipping it (the answers' `lockRetries`, median of rounds; "+
		"max in brackets).\n\n", fgWorkers, float64(time.Second)/float64(fgPeriod))

	type verdictRow struct{ target, table, measured, verdict string }
	var verdicts []verdictRow
	for _, t := range r.tables {
		sr := r.of(t.key)
		fmt.Fprintf(&w, "**%s**: %s rows, %s eligible (%.1f%%)", t.title, fmtCount(int64(t.rows)), fmtCount(t.eligible), 100*float64(t.eligible)/float64(t.rows))
		if t.held > 0 {
			fmt.Fprintf(&w, ", %d of them locked through each contestant (so %s to delete)", t.held, fmtCount(t.eligible-int64(t.held)))
		}
		switch clean := sr.clean(); {
		case clean == len(sr.rounds):
			fmt.Fprintf(&w, "; %d rounds, all clean.\n\n", len(sr.rounds))
		case clean > 0:
			fmt.Fprintf(&w, "; %d rounds, %d clean (the medians leave the others out).\n\n", len(sr.rounds), clean)
		default:
			fmt.Fprintf(&w, "; %d rounds, **none clean**: the numbers measure the neighbours as much as the contestants.\n\n", len(sr.rounds))
		}
		as := contestantsAcross(sr)
		a, a2, c := acrossByKey(as, "A"), acrossByKey(as, "A′"), acrossByKey(as, "C")
		w.WriteString("| | contestant | path | time | rows/s | ÷ A | ÷ A′ | ÷ C | batches | batch p50 | batch p99 | longest txn | lock retries | fg p99 ÷ idle | WAL |\n")
		w.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, x := range as {
			ds := x.batches()
			ratio := func(y across) string {
				if len(y.rounds) == 0 {
					return ""
				}
				return fmt.Sprintf("%.2f", x.ratio(y))
			}
			path, retries := "", ""
			if x.key != "A" && x.key != "A′" {
				path = x.rounds[len(x.rounds)-1].path
				maxRetries := 0
				for _, o := range x.rounds {
					maxRetries = max(maxRetries, o.lockRetries)
				}
				retries = fmt.Sprintf("%.0f (%d)", x.med(func(o outcome, _ int) float64 { return float64(o.lockRetries) }), maxRetries)
			}
			fmt.Fprintf(&w, "| %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %.2f | %.0f MB |\n",
				x.key, x.name, path, fmtDuration(time.Duration(x.med(func(o outcome, _ int) float64 { return float64(o.elapsed) }))),
				fmtRate(x.med(func(o outcome, _ int) float64 { return o.rowsPerSec() })), ratio(a), ratio(a2), ratio(c),
				x.med(func(o outcome, _ int) float64 { return float64(len(o.batches)) }),
				fmtDuration(time.Duration(x.med(func(o outcome, _ int) float64 { return float64(percentile(o.batchDurations(), 0.5)) }))),
				fmtDuration(percentile(ds, 0.99)), fmtDuration(maxDuration(ds)), retries, x.fgRatio(),
				x.med(func(o outcome, _ int) float64 { return float64(o.wal) / 1e6 }))
		}
		w.WriteString("\n")
		for _, rd := range sr.rounds {
			state := "clean"
			if rd.disturbed() {
				state = "disturbed, left out"
			}
			var parts []string
			rc, _ := byKey(rd.contestants, "C")
			for _, o := range rd.contestants {
				p := fmt.Sprintf("%s %s", o.key, fmtDuration(o.elapsed))
				if o.key != "C" && rc.elapsed > 0 {
					p += fmt.Sprintf(" (C ÷ it %.2f)", rc.rowsPerSec()/o.rowsPerSec())
				}
				parts = append(parts, p)
			}
			fmt.Fprintf(&w, "- round %d (%s, others ≤ %.0f%%): %s; C's foreground p99 %.2f × idle.\n", rd.n, state, 100*rd.maxForeign(),
				strings.Join(parts, ", "), float64(percentile(rc.fg, 0.99))/float64(percentile(rd.baseline, 0.99)))
		}
		w.WriteString("\n")

		if len(c.rounds) == 0 {
			continue
		}
		switch t.key {
		case "dense":
			v := c.ratio(a2)
			verdicts = append(verdicts, verdictRow{fmt.Sprintf("C rows/s ≥ %.1f × A′'s", targetDenseVsBound), t.key, fmt.Sprintf("%.2f ×", v), verdict(v >= targetDenseVsBound)})
		case "sparse":
			v := c.ratio(a)
			verdicts = append(verdicts, verdictRow{fmt.Sprintf("C rows/s ≥ %.1f × A's", targetSparseVsTyped), t.key, fmt.Sprintf("%.2f ×", v), verdict(v >= targetSparseVsTyped)})
		}
		ds := c.batches()
		verdicts = append(verdicts,
			verdictRow{fmt.Sprintf("C batch p99 ≤ %s", fmtDuration(targetP99Batch)), t.key, fmtDuration(percentile(ds, 0.99)), verdict(percentile(ds, 0.99) <= targetP99Batch)},
			verdictRow{fmt.Sprintf("C longest batch ≤ %s", fmtDuration(targetMaxBatch)), t.key, fmtDuration(maxDuration(ds)), verdict(maxDuration(ds) <= targetMaxBatch)},
			verdictRow{fmt.Sprintf("C foreground p99 ≤ %.1f × idle", targetPathsFG), t.key, fmt.Sprintf("%.2f ×", c.fgRatio()), verdict(c.fgRatio() <= targetPathsFG)})
		if t.held > 0 {
			for _, x := range []across{c, acrossByKey(as, "heap"), acrossByKey(as, "index")} {
				worst := 0
				for _, o := range x.rounds {
					worst = max(worst, o.lockRetries)
				}
				// Every contestant deleted exactly the unheld eligible rows, or the run failed
				// before this report: a batch-error stops the bench.
				verdicts = append(verdicts, verdictRow{fmt.Sprintf("%s: each held row lock costs at most one retried batch, never a batch-error", x.key),
					t.key, fmt.Sprintf("%d retries for %d held rows, 0 batch-errors", worst, t.held), verdict(worst <= t.held)})
			}
		}
	}
	w.WriteString("| target (issue 16), median of rounds | table | measured | |\n|---|---|--:|---|\n")
	for _, v := range verdicts {
		fmt.Fprintf(&w, "| %s | %s | %s | %s |\n", v.target, v.table, v.measured, v.verdict)
	}
	w.WriteString("\n")
	return w.String()
}

func (b *bench) pathsReport(ctx context.Context) (string, error) {
	res, err := b.pathsRun(ctx)
	if err != nil {
		return "", err
	}
	return renderPaths(b.machine, b.s, res), nil
}
