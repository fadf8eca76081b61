package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// partAcross is one contestant over the counted rounds.
type partAcross struct {
	key, name string
	rounds    []partOutcome
}

func (a partAcross) med(f func(o partOutcome) float64) float64 {
	xs := make([]float64, len(a.rounds))
	for i, o := range a.rounds {
		xs[i] = f(o)
	}
	return median(xs)
}

func (a partAcross) medDuration(f func(o partOutcome) time.Duration) time.Duration {
	return time.Duration(a.med(func(o partOutcome) float64 { return float64(f(o)) }))
}

func (a partAcross) inexactRounds() int {
	n := 0
	for _, o := range a.rounds {
		if o.inexact != "" {
			n++
		}
	}
	return n
}

func (a partAcross) worst() time.Duration {
	var m time.Duration
	for _, o := range a.rounds {
		m = max(m, o.elapsed)
	}
	return m
}

// steps splits a contestant's batches into partition drops and row batches.
func (o partOutcome) steps() (drops, rows []time.Duration) {
	for _, b := range o.batches {
		if b.partition != "" {
			drops = append(drops, b.took)
		} else if o.key != "K" {
			rows = append(rows, b.took)
		}
	}
	return drops, rows
}

// batchRate is the rows the contestant's row batches deleted per second of their transactions:
// the batched engine's rate, comparable between the boundary of P and the whole of B. 0 when
// there were none.
func (o partOutcome) batchRate() float64 {
	_, rows := o.steps()
	var sum time.Duration
	for _, d := range rows {
		sum += d
	}
	if sum == 0 || o.boundaryRows == 0 {
		return 0
	}
	return float64(o.boundaryRows) / sum.Seconds()
}

func partAcrossAll(r partitionsResult) []partAcross {
	rounds := r.counted()
	if len(rounds) == 0 {
		return nil
	}
	var out []partAcross
	for i, first := range rounds[0].outcomes {
		a := partAcross{key: first.key, name: first.name}
		for _, rd := range rounds {
			a.rounds = append(a.rounds, rd.outcomes[i])
		}
		out = append(out, a)
	}
	return out
}

func partByKey(as []partAcross, key string) partAcross {
	for _, a := range as {
		if a.key == key {
			return a
		}
	}
	return partAcross{}
}

func renderPartitions(m machine, s settings, r partitionsResult) string {
	var w strings.Builder
	header(&w, "Partitions: retention by dropping whole partitions", m, s, r.elapsed)
	fmt.Fprintf(&w, "Table: `%s` (id, at, payload; primary key (id, at); an index on at), %s rows spread evenly over %d daily partitions (UTC days) ending at %s, "+
		"%d more made empty by pg_partman %s, which manages the set (its retention off in the template)%s; seeded in %s. "+
		"Retention 30 days: %d partitions lie wholly past the cutoff, one straddles it. Every contestant on a fresh copy, no foreground. "+
		"**Exactness**: after each contestant the bench counts what is left against an oracle counted on the template "+
		"(the rows at or after the bound the contestant's rule keeps from the cutoff it applied: the rail's run's reference time, logged by a trigger on its lease, "+
		"or pg_partman's transaction's `now()`, minus 30 days), the oldest row left, and the partitions gone; a difference is reported below in bold, and fails the bench after this report is written.\n\n",
		partTable, fmtCount(r.tpl.rows), partDays, r.tpl.end.Format("2006-01-02"), r.tpl.partitions-partDays, r.partman,
		defaultNote(r.tpl.hasDefault), r.seeded.Round(time.Second), partExpired)
	switch clean := r.clean(); {
	case clean == len(r.rounds):
		fmt.Fprintf(&w, "Rounds: %d, all clean (other tenants took at most %.0f%% of the machine in any window).\n\n", len(r.rounds), 100*maxForeign)
	case clean > 0:
		fmt.Fprintf(&w, "Rounds: %d run, %d clean; the medians leave out the %d in which other tenants took more than %.0f%% of the machine in some window.\n\n",
			len(r.rounds), clean, len(r.rounds)-clean, 100*maxForeign)
	default:
		fmt.Fprintf(&w, "Rounds: %d run, **none clean**: other tenants took more than %.0f%% of the machine in every round.\n\n", len(r.rounds), 100*maxForeign)
	}
	as := partAcrossAll(r)
	w.WriteString("| | contestant | exact | time | worst | answers' time | rows gone | partitions dropped | rows by batches | batches | most rows in a batch | longest drop | longest batch | WAL |\n")
	w.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, a := range as {
		var drops, rows []time.Duration
		for _, o := range a.rounds {
			d, r := o.steps()
			drops, rows = append(drops, d...), append(rows, r...)
		}
		server, longestDrop, longestBatch := "", "", ""
		if a.key != "K" {
			server = fmtDuration(a.medDuration(func(o partOutcome) time.Duration { return o.serverTime }))
			if len(drops) > 0 {
				longestDrop = fmtDuration(maxDuration(drops))
			}
		} else {
			longestDrop = "(one transaction)"
		}
		most := ""
		if len(rows) > 0 {
			longestBatch = fmtDuration(maxDuration(rows))
			var m int64
			for _, o := range a.rounds {
				for _, b := range o.batches {
					if b.partition == "" {
						m = max(m, b.rows)
					}
				}
			}
			most = fmtCount(m)
		}
		exact := "yes"
		if n := a.inexactRounds(); n > 0 {
			exact = fmt.Sprintf("**NO** (%d of %d rounds)", n, len(a.rounds))
		}
		fmt.Fprintf(&w, "| %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %.0f | %s | %s | %s | %.0f MB |\n",
			a.key, a.name, exact, fmtDuration(a.medDuration(func(o partOutcome) time.Duration { return o.elapsed })), fmtDuration(a.worst()), server,
			fmtCount(int64(a.med(func(o partOutcome) float64 { return float64(o.gone) }))),
			a.med(func(o partOutcome) float64 { return float64(o.dropped) }),
			fmtCount(int64(a.med(func(o partOutcome) float64 { return float64(o.boundaryRows) }))),
			a.med(func(o partOutcome) float64 { _, r := o.steps(); return float64(len(r)) }), most,
			longestDrop, longestBatch, a.med(func(o partOutcome) float64 { return float64(o.wal) / 1e6 }))
	}
	w.WriteString("\n")
	w.WriteString("Time is the contestant's window, median over the counted rounds (\"worst\": the longest of them): for the rail, every `sweepcron --only <sweep>` process from start to exit " +
		"(run again while the answer is truncated); for pg_partman, `BEGIN; SELECT now(); SELECT partman.run_maintenance(); COMMIT`. " +
		"The answers' time is the rail's own `durationMs`. Rows gone and partitions dropped are counted on the copy; rows by batches is the answers' `deleted` " +
		"(for P the rows past the cutoff in the partition that straddles it). The longest drop is the runner's per-partition step (detach and drop, its `sweep partition` debug line); " +
		"the longest batch its per-batch line. WAL is the insert position's advance over the window.\n\n")
	w.WriteString("Every round, in order:\n\n")
	for _, rd := range r.rounds {
		state := "clean"
		if rd.disturbed() {
			state = "disturbed, left out"
		}
		var parts []string
		for _, o := range rd.outcomes {
			part := fmt.Sprintf("%s %s (%s rows, %d partitions; cutoff %s)", o.key, fmtDuration(o.elapsed),
				fmtCount(o.gone), o.dropped, o.cutoff.UTC().Format("2006-01-02 15:04:05.000"))
			if o.inexact != "" {
				part += ", **NOT EXACT: " + o.inexact + "**"
			}
			parts = append(parts, part)
		}
		fmt.Fprintf(&w, "- round %d (%s, others ≤ %.0f%%): %s.\n", rd.n, state, 100*rd.maxForeign(), strings.Join(parts, "; "))
	}
	w.WriteString("\n")
	writePartitionTargets(&w, as)
	return w.String()
}

func writePartitionTargets(w *strings.Builder, as []partAcross) {
	p, k, b := partByKey(as, "P"), partByKey(as, "K"), partByKey(as, "B")
	if len(p.rounds) == 0 {
		return
	}
	rows := fmtCount(int64(p.med(func(o partOutcome) float64 { return float64(o.gone) })))
	w.WriteString("| target (issue 17) | measured | |\n|---|--:|---|\n")
	exact := "exact"
	if n := p.inexactRounds(); n > 0 {
		exact = fmt.Sprintf("**not exact** in %d rounds", n)
	}
	fmt.Fprintf(w, "| P: %s rows in %d expired partitions gone, exactly, through the rail in < %s (every round) | %s; worst %s, median %s | %s |\n",
		rows, partExpired, fmtDuration(targetPartitions), exact, fmtDuration(p.worst()),
		fmtDuration(p.medDuration(func(o partOutcome) time.Duration { return o.elapsed })), verdict(p.worst() < targetPartitions && p.inexactRounds() == 0))
	if len(b.rounds) > 0 {
		pr := p.med(func(o partOutcome) float64 { return o.batchRate() })
		br := b.med(func(o partOutcome) float64 { return o.batchRate() })
		measured, v := "no boundary rows", "—"
		switch {
		case pr > 0 && b.inexactRounds() > 0:
			// B's batches on a partitioned table are not what they say (see its row): no yardstick.
			measured = fmt.Sprintf("%s rows/s; B, not exact, is no yardstick", fmtRate(pr))
		case pr > 0 && br > 0:
			measured, v = fmt.Sprintf("%s rows/s against B's %s (%.2f ×)", fmtRate(pr), fmtRate(br), pr/br), verdict(pr*2 >= br)
		}
		// The boundary is one partial partition: a few batches, whose first is BATCH_SIZE rows
		// and grows from there, so "the batched engine's rate" is a comparison within a factor.
		fmt.Fprintf(w, "| P's boundary rows at the batched engine's rate (rows per second of its batch transactions, within 2 × of B's) | %s | %s |\n",
			measured, v)
		ratio := b.med(func(o partOutcome) float64 { return o.elapsed.Seconds() }) / p.med(func(o partOutcome) float64 { return o.elapsed.Seconds() })
		if b.inexactRounds() == 0 {
			fmt.Fprintf(w, "| for comparison: B (the same rows by batched deletes) takes | %.1f × P's time | |\n", ratio)
		} else {
			fmt.Fprintf(w, "| for comparison: B (the same rows by batched deletes) | not exact (its row): no comparison | |\n")
		}
	}
	if len(k.rounds) > 0 {
		ratio := k.med(func(o partOutcome) float64 { return o.elapsed.Seconds() }) /
			partByKey(as, "P′").med(func(o partOutcome) float64 { return o.elapsed.Seconds() })
		fmt.Fprintf(w, "| for comparison: K (pg_partman, whole partitions only) takes | %.2f × P′'s time (the rail, whole partitions only) | |\n", ratio)
	}
	w.WriteString("\n")
}

func defaultNote(has bool) string {
	if !has {
		return ""
	}
	return ": the premade ones ahead of today and a default partition, with which the server refuses `DETACH … CONCURRENTLY`, so the rail detaches plainly under its lock timeout"
}

// partitionsReport writes the report even when a contestant was not exact, and then fails.
func (b *bench) partitionsReport(ctx context.Context) (string, error) {
	res, err := b.partitionsRun(ctx)
	if err != nil {
		return "", err
	}
	res.elapsed = time.Since(b.began)
	out := renderPartitions(b.machine, b.s, res)
	if bad := res.inexact(); len(bad) > 0 {
		return out, fmt.Errorf("the partitions run's exactness check failed (the report says where):\n%s", strings.Join(bad, "\n"))
	}
	return out, nil
}
