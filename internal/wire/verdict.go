package wire

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Verdict answers, for one sweep, whether its tables are kept to their retention.
type Verdict string

// The verdicts, from best to worst as Summary orders them.
const (
	// VerdictBounded: no pass's oldest eligible row is overdue by more than one interval.
	VerdictBounded Verdict = "bounded"
	// VerdictDraining: a pass is overdue, and its lag shrank since the run before.
	VerdictDraining Verdict = "draining"
	// VerdictBehind: a pass is overdue and its lag did not shrink (or is not known).
	VerdictBehind Verdict = "behind"
	// VerdictStale: no run for more than StaleIntervals expected intervals, or none at all.
	VerdictStale Verdict = "stale"
	// VerdictFailing: the newest finished run failed (batch-error).
	VerdictFailing Verdict = "failing"
)

// verdictOrder is every verdict, best first.
var verdictOrder = []Verdict{VerdictBounded, VerdictDraining, VerdictBehind, VerdictStale, VerdictFailing}

// StaleIntervals is how many expected intervals may pass without a run before a sweep is stale.
const StaleIntervals = 3

// The sources of a verdict's interval.
const (
	IntervalConfigured = "configured"
	IntervalInferred   = "history"
)

// SweepVerdict is a sweep's verdict and what it was judged from.
type SweepVerdict struct {
	Verdict Verdict `json:"verdict"`
	// Reason says why, in a line.
	Reason string `json:"reason"`
	// LagSeconds is the largest known lag of the sweep's passes, as of MeasuredAt; nil when
	// no pass's lag is known.
	LagSeconds *float64   `json:"lagSeconds"`
	MeasuredAt *time.Time `json:"measuredAt"`
	// IntervalSeconds is the schedule interval judged by (nil: unknown, fewer than two runs),
	// and IntervalSource where it came from: IntervalConfigured or IntervalInferred.
	IntervalSeconds *int64 `json:"intervalSeconds"`
	IntervalSource  string `json:"intervalSource,omitempty"`
	// LastRunAt is the start of the newest run that took its lease; nil when none did.
	LastRunAt *time.Time `json:"lastRunAt"`
	// CatchUpAt estimates, while draining, when the slowest pass is back within one interval,
	// at the rate its lag shrank between its two newest measurements.
	CatchUpAt *time.Time `json:"catchUpAt,omitempty"`
	// Passes are the verdict of each pass the newest finished run measured.
	Passes []PassVerdict `json:"passes"`
}

// PassVerdict is one pass's part of a sweep's verdict: bounded, draining or behind.
type PassVerdict struct {
	Pass       string     `json:"pass"`
	Verdict    Verdict    `json:"verdict"`
	LagSeconds *float64   `json:"lagSeconds"`
	MeasuredAt *time.Time `json:"measuredAt"`
	CatchUpAt  *time.Time `json:"catchUpAt,omitempty"`
}

// Judge is the verdict of one sweep from its runs, newest first, as of now. expected is the
// schedule interval (SWEEP_EXPECTED_INTERVAL); 0 infers it as the median gap between the runs.
func Judge(runs []HistoryRun, now time.Time, expected time.Duration) SweepVerdict {
	var ran, finished []HistoryRun
	for _, r := range runs {
		if r.Skipped {
			continue // a lease-held answer ran nothing, and tells nothing of the tables
		}
		ran = append(ran, r)
		if r.StopReason != nil {
			finished = append(finished, r)
		}
	}
	v := SweepVerdict{Passes: []PassVerdict{}}
	interval := expected
	v.IntervalSource = IntervalConfigured
	if interval <= 0 {
		interval, v.IntervalSource = inferInterval(ran), IntervalInferred
	}
	if interval > 0 {
		s := int64(interval / time.Second)
		v.IntervalSeconds = &s
	} else {
		v.IntervalSource = ""
	}
	if len(ran) == 0 {
		v.Verdict, v.Reason = VerdictStale, "no run in the history"
		return v
	}
	last := ran[0].StartedAt
	v.LastRunAt = &last
	if interval > 0 && now.Sub(last) > StaleIntervals*interval {
		v.Verdict = VerdictStale
		v.Reason = fmt.Sprintf("no run for %s (expected every %s)", roundDuration(now.Sub(last)), roundDuration(interval))
		return v
	}
	if len(finished) == 0 {
		v.Verdict, v.Reason = VerdictStale, "no run finished"
		return v
	}
	if newest := finished[0]; newest.StopReason.Fails() {
		v.Verdict, v.Reason = VerdictFailing, "the newest run failed"
		if newest.Error != nil {
			v.Reason += ": " + newest.Error.Code
		}
		return v
	}
	judgePasses(&v, finished, interval)
	return v
}

// judgePasses sets v's pass verdicts and the sweep's worst of them from the finished runs.
func judgePasses(v *SweepVerdict, finished []HistoryRun, interval time.Duration) {
	threshold := interval.Seconds()
	v.Verdict, v.Reason = VerdictBounded, "nothing overdue"
	var overdue []string
	for _, hp := range finished[0].Passes {
		pv := judgePass(hp.Pass, finished, threshold)
		v.Passes = append(v.Passes, pv)
		if pv.LagSeconds != nil && (v.LagSeconds == nil || *pv.LagSeconds > *v.LagSeconds) {
			v.LagSeconds, v.MeasuredAt = pv.LagSeconds, pv.MeasuredAt
		}
		if pv.Verdict != VerdictBounded {
			overdue = append(overdue, pv.Pass)
		}
		if worse(pv.Verdict, v.Verdict) {
			v.Verdict = pv.Verdict
		}
		if pv.CatchUpAt != nil && (v.CatchUpAt == nil || pv.CatchUpAt.After(*v.CatchUpAt)) {
			v.CatchUpAt = pv.CatchUpAt
		}
	}
	switch v.Verdict {
	case VerdictBounded:
		if v.LagSeconds != nil && *v.LagSeconds > 0 {
			v.Reason = "overdue by less than one interval"
		}
	case VerdictDraining:
		v.Reason = "overdue and shrinking: " + strings.Join(overdue, ", ")
	case VerdictBehind:
		v.Reason = "overdue and not shrinking: " + strings.Join(overdue, ", ")
		v.CatchUpAt = nil
	}
}

// judgePass is pass name's verdict: its newest lag against threshold seconds, and the lag the
// run before measured.
func judgePass(name string, finished []HistoryRun, threshold float64) PassVerdict {
	pv := PassVerdict{Pass: name, Verdict: VerdictBounded}
	var lags []*Lag
	var stops []StopReason
	for _, r := range finished {
		for _, hp := range r.Passes {
			if hp.Pass == name && hp.Lag != nil {
				lags, stops = append(lags, hp.Lag), append(stops, hp.StopReason)
			}
		}
	}
	if len(lags) == 0 {
		return pv // recorded before the history kept lags: nothing to judge by
	}
	at := lags[0].MeasuredAt
	pv.MeasuredAt = &at
	if lags[0].Seconds == nil {
		// No index to read it from, and the run stopped with rows left: overdue by how much
		// nobody knows without a scan.
		if stops[0].Truncates() || stops[0] == StopBatchError {
			pv.Verdict = VerdictBehind
		}
		return pv
	}
	lag := *lags[0].Seconds
	pv.LagSeconds = &lag
	if lag <= threshold {
		return pv
	}
	pv.Verdict = VerdictBehind
	if len(lags) < 2 || lags[1].Seconds == nil || *lags[1].Seconds <= lag {
		return pv
	}
	pv.Verdict = VerdictDraining
	if took := lags[0].MeasuredAt.Sub(lags[1].MeasuredAt).Seconds(); took > 0 {
		rate := (*lags[1].Seconds - lag) / took
		eta := lags[0].MeasuredAt.Add(time.Duration((lag - threshold) / rate * float64(time.Second)))
		pv.CatchUpAt = &eta
	}
	return pv
}

// worse reports whether a is a worse verdict than b.
func worse(a, b Verdict) bool { return slices.Index(verdictOrder, a) > slices.Index(verdictOrder, b) }

// inferInterval is the median gap between consecutive runs (newest first); 0 for fewer than two.
func inferInterval(ran []HistoryRun) time.Duration {
	var gaps []time.Duration
	for i := 0; i+1 < len(ran); i++ {
		if g := ran[i].StartedAt.Sub(ran[i+1].StartedAt); g > 0 {
			gaps = append(gaps, g)
		}
	}
	if len(gaps) == 0 {
		return 0
	}
	slices.Sort(gaps)
	return gaps[len(gaps)/2]
}

// Summary is the one line that opens the status page: "9 of 9 sweeps bounded", then how many
// have each other verdict ("7 of 9 sweeps bounded; 1 draining, 1 stale").
func Summary(verdicts []Verdict) string {
	count := map[Verdict]int{}
	for _, v := range verdicts {
		count[v]++
	}
	noun := "sweeps"
	if len(verdicts) == 1 {
		noun = "sweep"
	}
	line := fmt.Sprintf("%d of %d %s bounded", count[VerdictBounded], len(verdicts), noun)
	var rest []string
	for _, v := range verdictOrder[1:] {
		if count[v] > 0 {
			rest = append(rest, fmt.Sprintf("%d %s", count[v], v))
		}
	}
	if len(rest) > 0 {
		line += "; " + strings.Join(rest, ", ")
	}
	return line
}

// roundDuration is d to the second at most, for a reason line.
func roundDuration(d time.Duration) time.Duration { return d.Round(time.Second) }
