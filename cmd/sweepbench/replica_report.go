package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The targets of issue 20.
const (
	// targetThrottleNoise is how close the throttled rail's rate must stay to the unthrottled
	// one's with a healthy standby: "within noise".
	targetThrottleNoise = 0.9
)

// lagAcross is one contestant against one state of the standby, over the counted rounds.
type lagAcross struct {
	key, name string
	slow      bool
	rounds    []lagOutcome
}

func (a lagAcross) med(f func(o lagOutcome) float64) float64 {
	xs := make([]float64, len(a.rounds))
	for i, o := range a.rounds {
		xs[i] = f(o)
	}
	return median(xs)
}

func (a lagAcross) medDuration(f func(o lagOutcome) time.Duration) time.Duration {
	return time.Duration(a.med(func(o lagOutcome) float64 { return float64(f(o)) }))
}

// worstReplay is the largest peak replay lag of any counted round: the promise is about every
// drain, so the worst one counts.
func (a lagAcross) worstReplay() time.Duration {
	var m time.Duration
	for _, o := range a.rounds {
		m = max(m, o.peak.Replay)
	}
	return m
}

func (a lagAcross) worstBytes() int64 {
	var m int64
	for _, o := range a.rounds {
		m = max(m, o.peak.Bytes)
	}
	return m
}

// ratio is the median over rounds of a's rows/s over b's in the same round.
func (a lagAcross) ratio(b lagAcross) float64 {
	xs := make([]float64, len(a.rounds))
	for i, o := range a.rounds {
		xs[i] = o.rowsPerSec() / b.rounds[i].rowsPerSec()
	}
	return median(xs)
}

// spread is the largest rows/s of the rounds over the smallest: the run's own noise.
func (a lagAcross) spread() float64 {
	var rates []float64
	for _, o := range a.rounds {
		rates = append(rates, o.rowsPerSec())
	}
	if len(rates) == 0 || slices.Min(rates) == 0 {
		return 0
	}
	return slices.Max(rates) / slices.Min(rates)
}

// overLimit checks the throttled promise for one round: the peak replay lag is within the limit
// plus that round's longest batch plus one pause of the duty cycle (the standby, paused, falls
// further behind on WAL it already has, whatever the primary does; see dutyCycle).
func overLimit(o lagOutcome) (bound time.Duration, ok bool) {
	bound = lagLimit + maxDuration(o.batchDurations()) + lagDutyPaused
	return bound, o.peak.Replay <= bound
}

func lagAcrossAll(r replicaResult) []lagAcross {
	rounds := r.counted()
	if len(rounds) == 0 {
		return nil
	}
	var out []lagAcross
	for i, first := range rounds[0].outcomes {
		a := lagAcross{key: first.key, name: first.name, slow: first.slow}
		for _, rd := range rounds {
			a.rounds = append(a.rounds, rd.outcomes[i])
		}
		out = append(out, a)
	}
	return out
}

func lagByKey(as []lagAcross, key string, slow bool) lagAcross {
	for _, a := range as {
		if a.key == key && a.slow == slow {
			return a
		}
	}
	return lagAcross{}
}

func renderReplica(m machine, s settings, r replicaResult) string {
	var w strings.Builder
	header(&w, "Replica lag: a streaming standby behind each drain", m, s, r.elapsed)
	fmt.Fprintf(&w, "Table: %s notifications rows, %s eligible, as in the side-by-side run; every contestant on a fresh copy, no foreground. "+
		"Standby: PostgreSQL %s on loopback, made by `pg_basebackup -R`, the primary's fsync and shared_buffers, `wal_receiver_status_interval=%s`. "+
		"**Healthy**: it replays as fast as it can. **Slow**: its replay is paused %s of every %s (`pg_wal_replay_pause()` / `_resume()`), "+
		"a busy standby that replays at a tenth of its speed. Before each window the standby has replayed everything; "+
		"the lag is watched on the primary (`pg_stat_replication`, every %s) from the start of the window until the standby has replayed all of it.\n\n",
		fmtCount(int64(r.rows)), fmtCount(r.eligible), r.standbyPG, standbyStatusInterval, lagDutyPaused, lagDutyPeriod, lagSample)
	switch clean := r.clean(); {
	case clean == len(r.rounds):
		fmt.Fprintf(&w, "Rounds: %d, all clean (other tenants took at most %.0f%% of the machine in any window).\n\n", len(r.rounds), 100*maxForeign)
	case clean > 0:
		fmt.Fprintf(&w, "Rounds: %d run, %d clean; the medians leave out the %d in which other tenants took more than %.0f%% of the machine in some window.\n\n",
			len(r.rounds), clean, len(r.rounds)-clean, 100*maxForeign)
	default:
		fmt.Fprintf(&w, "Rounds: %d run, **none clean**: other tenants took more than %.0f%% of the machine in every round.\n\n", len(r.rounds), 100*maxForeign)
	}
	as := lagAcrossAll(r)
	w.WriteString("| standby | | contestant | time | rows/s | ÷ C | peak behind | worst | peak replay lag | worst | caught up after | throttled | sweepcron runs | longest txn | WAL |\n")
	w.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, a := range as {
		c := lagByKey(as, "C", a.slow)
		state := "healthy"
		if a.slow {
			state = "slow"
		}
		runs, throttled := "", ""
		if a.key != "A" {
			runs = fmt.Sprintf("%.0f", a.med(func(o lagOutcome) float64 { return float64(o.runs) }))
			throttled = fmtDuration(a.medDuration(func(o lagOutcome) time.Duration { return o.throttled }))
		}
		var longest []time.Duration
		for _, o := range a.rounds {
			longest = append(longest, o.batchDurations()...)
		}
		fmt.Fprintf(&w, "| %s | %s | %s | %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %.0f MB |\n",
			state, a.key, a.name,
			fmtDuration(a.medDuration(func(o lagOutcome) time.Duration { return o.elapsed })),
			fmtRate(a.med(func(o lagOutcome) float64 { return o.rowsPerSec() })), a.ratio(c),
			fmtBytes(int64(a.med(func(o lagOutcome) float64 { return float64(o.peak.Bytes) }))), fmtBytes(a.worstBytes()),
			fmtDuration(a.medDuration(func(o lagOutcome) time.Duration { return o.peak.Replay })), fmtDuration(a.worstReplay()),
			fmtDuration(a.medDuration(func(o lagOutcome) time.Duration { return o.caughtUp })),
			throttled, runs, fmtDuration(maxDuration(longest)),
			a.med(func(o lagOutcome) float64 { return float64(o.wal) / 1e6 }))
	}
	w.WriteString("\n")
	w.WriteString("Time, rows/s, its ratio to C (taken within each round, against the same standby), peaks, catch-up, throttled time, runs and WAL are medians over the counted rounds; " +
		"\"worst\" is the largest peak of any counted round; the longest transaction pools every batch of them. " +
		"\"Peak behind\" is the most WAL the standby had left to replay (`pg_current_wal_lsn() - replay_lsn`); \"peak replay lag\" the largest `replay_lag` while it had WAL left to replay " +
		"(internal/replica's Watch: a caught-up standby's stale `replay_lag` does not count). \"Caught up after\" runs from the end of the window until the primary saw the standby replay all of it, " +
		"which it learns within the status interval. Throttled is the answers' `throttledMs`.\n\n")
	w.WriteString("Every round, in order:\n\n")
	for _, rd := range r.rounds {
		state := "clean"
		if rd.disturbed() {
			state = "disturbed, left out"
		}
		var parts []string
		for _, o := range rd.outcomes {
			s := "healthy"
			if o.slow {
				s = "slow"
			}
			part := fmt.Sprintf("%s/%s %s, %s / %s behind, caught up %s after", s, o.key, fmtDuration(o.elapsed),
				fmtBytes(o.peak.Bytes), fmtDuration(o.peak.Replay), fmtDuration(o.caughtUp))
			if o.key != "A" {
				part += fmt.Sprintf(", throttled %s in %d run(s)", fmtDuration(o.throttled), o.runs)
			}
			parts = append(parts, part)
		}
		fmt.Fprintf(&w, "- round %d (%s, others ≤ %.0f%%): %s.\n", rd.n, state, 100*rd.maxForeign(), strings.Join(parts, "; "))
	}
	w.WriteString("\n")
	writeLagTargets(&w, as)
	return w.String()
}

func writeLagTargets(w *strings.Builder, as []lagAcross) {
	t, c, a := lagByKey(as, "T", true), lagByKey(as, "C", true), lagByKey(as, "A", true)
	th, ch := lagByKey(as, "T", false), lagByKey(as, "C", false)
	if len(t.rounds) == 0 || len(th.rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "| target (issue 20) | measured | |\n|---|--:|---|\n")
	// The throttled promise, round by round.
	within := func(x lagAcross) (string, bool) {
		okAll := true
		var bounds []string
		for _, o := range x.rounds {
			bound, ok := overLimit(o)
			okAll = okAll && ok
			rel := "≤"
			if !ok {
				rel = ">"
			}
			bounds = append(bounds, fmt.Sprintf("%s %s %s", fmtDuration(o.peak.Replay), rel, fmtDuration(bound)))
		}
		return strings.Join(bounds, "; "), okAll
	}
	measured, ok := within(t)
	fmt.Fprintf(w, "| slow standby, T (`MAX_REPLICA_LAG=%s`): peak replay lag ≤ %s + the round's longest batch + one %s pause, every round | %s | %s |\n",
		lagLimit, fmtDuration(lagLimit), fmtDuration(lagDutyPaused), measured, verdict(ok))
	if tb := lagByKey(as, "TB", true); len(tb.rounds) > 0 {
		measured, ok := within(tb)
		fmt.Fprintf(w, "| for comparison, slow standby, TB (`MAX_REPLICA_LAG_BYTES=%d` too): the same bound | %s | %s |\n",
			lagLimitBytes, measured, verdict(ok))
	}
	for _, x := range []lagAcross{a, c} {
		fmt.Fprintf(w, "| slow standby, %s (%s): falls behind past %s, as far as the slowdown allows | peak %s / %s behind, caught up %s after | %s |\n",
			x.key, x.name, fmtDuration(lagLimit), fmtDuration(x.medDuration(func(o lagOutcome) time.Duration { return o.peak.Replay })),
			fmtBytes(int64(x.med(func(o lagOutcome) float64 { return float64(o.peak.Bytes) }))),
			fmtDuration(x.medDuration(func(o lagOutcome) time.Duration { return o.caughtUp })),
			verdict(x.medDuration(func(o lagOutcome) time.Duration { return o.peak.Replay }) > lagLimit))
	}
	r := th.ratio(ch)
	fmt.Fprintf(w, "| healthy standby: throttled rows/s ≥ %.1f × unthrottled (within noise; C's own rounds spread %.2f ×) | %.2f × | %s |\n",
		targetThrottleNoise, ch.spread(), r, verdict(r >= targetThrottleNoise))
	w.WriteString("\n")
}

func (b *bench) replicaReport(ctx context.Context) (string, error) {
	res, err := b.replicaRun(ctx)
	if err != nil {
		return "", err
	}
	res.elapsed = time.Since(b.began)
	return renderReplica(b.machine, b.s, res), nil
}
