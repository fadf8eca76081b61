package main

import (
	"fmt"
	"strings"
	"time"
)

// steps splits a contestant's batches into partition drops and row batches (pg_partman's one
// transaction is neither).
func (o outcome) steps() (drops, rows []batch) {
	for _, b := range o.batches {
		if b.partition != "" {
			drops = append(drops, b)
		} else if o.key != "K" {
			rows = append(rows, b)
		}
	}
	return drops, rows
}

// longest is the longest of bs, or "" for none.
func longest(bs []batch) string {
	if len(bs) == 0 {
		return ""
	}
	var m time.Duration
	for _, b := range bs {
		m = max(m, b.took)
	}
	return fmtDuration(m)
}

// batchRate is the rows the contestant's row batches deleted per second of their transactions:
// the batched engine's rate. 0 when there were none.
func (o outcome) batchRate() float64 {
	_, rows := o.steps()
	var sum time.Duration
	for _, b := range rows {
		sum += b.took
	}
	if sum == 0 || o.deleted == 0 {
		return 0
	}
	return float64(o.deleted) / sum.Seconds()
}

func (b *bench) renderPartitions(r partitionsResult) string {
	var w strings.Builder
	b.header(&w, "Partitions: retention by dropping whole partitions")
	note := ""
	if r.tpl.hasDefault {
		note = ", a default partition among them (the server then refuses `DETACH … CONCURRENTLY`: the rail detaches plainly, under its lock timeout)"
	}
	fmt.Fprintf(&w, "Table: `%s`, %s rows over %d daily partitions ending at %s, %d more made by pg_partman %s%s; seeded in %s. "+
		"Retention 30 days: %d partitions lie wholly past the cutoff, one straddles it. %s.\n\n",
		partTable, fmtCount(r.tpl.rows), partDays, r.tpl.end.Format("2006-01-02"), r.tpl.partitions-partDays, r.partman, note,
		r.seeded.Round(time.Second), partExpired, roundsNote(r.rounds))
	as := acrossAll(r.rounds.counted())
	pooled := func(x across) (drops, rows []batch) {
		for _, o := range x.rounds {
			d, r := o.steps()
			drops, rows = append(drops, d...), append(rows, r...)
		}
		return drops, rows
	}
	count := func(f func(o outcome) float64) func(x across) string {
		return func(x across) string { return fmtCount(int64(x.med(f))) }
	}
	elapsed := func(o outcome) float64 { return o.elapsed.Seconds() }
	contestantTable(&w, as, []column{colKey, colName,
		{"exact", func(x across) string {
			if n := inexactRounds(x); n > 0 {
				return fmt.Sprintf("**NO** (%d of %d rounds)", n, len(x.rounds))
			}
			return "yes"
		}},
		colTime, {"worst>", func(x across) string { return fmtDuration(time.Duration(x.most(elapsed) * float64(time.Second))) }},
		{"answers' time>", func(x across) string {
			if x.key == "K" {
				return ""
			}
			return fmtDuration(x.medDur(func(o outcome) time.Duration { return o.serverTime }))
		}},
		{"rows gone>", count(func(o outcome) float64 { return float64(o.gone) })},
		{"partitions dropped>", func(x across) string {
			return fmt.Sprintf("%.0f", x.med(func(o outcome) float64 { return float64(o.dropped) }))
		}},
		{"rows by batches>", count(func(o outcome) float64 { return float64(o.deleted) })},
		{"batches>", func(x across) string {
			return fmt.Sprintf("%.0f", x.med(func(o outcome) float64 { _, r := o.steps(); return float64(len(r)) }))
		}},
		{"most rows in a batch>", func(x across) string {
			_, rows := pooled(x)
			if len(rows) == 0 {
				return ""
			}
			var m int64
			for _, b := range rows {
				m = max(m, b.rows)
			}
			return fmtCount(m)
		}},
		{"longest drop>", func(x across) string {
			if x.key == "K" {
				return "(one transaction)"
			}
			drops, _ := pooled(x)
			return longest(drops)
		}},
		{"longest batch>", func(x across) string { _, rows := pooled(x); return longest(rows) }},
		colWAL})
	w.WriteString("Every round, in order:\n\n")
	roundList(&w, r.rounds, func(_ round, o outcome) string {
		part := fmt.Sprintf("%s %s (%s rows, %d partitions; cutoff %s)", o.key, fmtDuration(o.elapsed),
			fmtCount(o.gone), o.dropped, o.cutoff.UTC().Format("2006-01-02 15:04:05.000"))
		if o.inexact != "" {
			part += ", **NOT EXACT: " + o.inexact + "**"
		}
		return part
	})
	p, k, p2 := pick(as, "P"), pick(as, "K"), pick(as, "P′")
	if len(p.rounds) == 0 {
		return w.String()
	}
	exact := "exact"
	if n := inexactRounds(p); n > 0 {
		exact = fmt.Sprintf("**not exact** in %d rounds", n)
	}
	worst := time.Duration(p.most(elapsed) * float64(time.Second))
	rows := [][]string{
		{fmt.Sprintf("P: %s rows in %d expired partitions gone, exactly, through the rail in < %s (every round)",
			fmtCount(int64(p.med(func(o outcome) float64 { return float64(o.gone) }))), partExpired, fmtDuration(targetPartitions)),
			fmt.Sprintf("%s; worst %s, median %s", exact, fmtDuration(worst), fmtDuration(p.medDur(func(o outcome) time.Duration { return o.elapsed }))),
			verdict(worst < targetPartitions && inexactRounds(p) == 0)},
		{"for comparison: P's boundary rows, per second of its batch transactions", fmtRate(p.med(outcome.batchRate)), ""},
	}
	if len(k.rounds) > 0 && len(p2.rounds) > 0 {
		rows = append(rows, []string{"for comparison: K (pg_partman, whole partitions only) takes",
			fmt.Sprintf("%.2f × P′'s time (the rail, whole partitions only)", k.med(elapsed)/p2.med(elapsed)), ""})
	}
	table(&w, []string{"target", "measured>", ""}, rows)
	return w.String()
}

func inexactRounds(x across) int {
	n := 0
	for _, o := range x.rounds {
		if o.inexact != "" {
			n++
		}
	}
	return n
}
