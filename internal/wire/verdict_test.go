package wire

import (
	"testing"
	"time"
)

var judgeNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// run is one finished run of pass "p", ago before judgeNow, stopping for stop with lag seconds
// (nil: unknown); noLag leaves the pass without a recorded lag.
func run(ago time.Duration, stop StopReason, lag *float64) HistoryRun {
	at := judgeNow.Add(-ago)
	end := at.Add(time.Second)
	l := &Lag{Seconds: lag, MeasuredAt: end, Source: LagRead}
	return HistoryRun{StartedAt: at, FinishedAt: &end, StopReason: &stop, Truncated: stop.Truncates(),
		Passes: []HistoryPass{{Pass: "p", StopReason: stop, Lag: l}}}
}

func secs(f float64) *float64 { return &f }

func TestJudge(t *testing.T) {
	t.Parallel()
	const h = time.Hour
	skipped := HistoryRun{StartedAt: judgeNow.Add(-time.Minute), Skipped: true, StopReason: ptr(StopLeaseHeld)}
	failed := run(h, StopBatchError, secs(0))
	failed.Error = &ErrorInfo{Code: "57014"}
	unfinished := HistoryRun{StartedAt: judgeNow.Add(-time.Minute)}
	cases := []struct {
		name     string
		runs     []HistoryRun
		expected time.Duration
		want     Verdict
		catchUp  bool
	}{
		{"drained table is bounded", []HistoryRun{run(h, StopExhausted, secs(0)), run(2*h, StopExhausted, secs(0))}, 0, VerdictBounded, false},
		{"lag within one interval is bounded", []HistoryRun{run(h, StopBudget, secs(1800)), run(2*h, StopBudget, secs(3000))}, 0, VerdictBounded, false},
		{"shrinking backlog is draining", []HistoryRun{run(h, StopBudget, secs(50*3600)), run(2*h, StopBudget, secs(80*3600))}, 0, VerdictDraining, true},
		{"drained after draining is bounded", []HistoryRun{run(h, StopExhausted, secs(0)), run(2*h, StopBudget, secs(50*3600)), run(3*h, StopBudget, secs(80*3600))}, 0, VerdictBounded, false},
		{"growing backlog is behind", []HistoryRun{run(h, StopBudget, secs(90*3600)), run(2*h, StopBudget, secs(80*3600))}, 0, VerdictBehind, false},
		{"one overdue run has no trend and is behind", []HistoryRun{run(h, StopBudget, secs(90*3600))}, h, VerdictBehind, false},
		{"unknown lag with rows left is behind", []HistoryRun{run(h, StopBudget, nil), run(2*h, StopBudget, nil)}, 0, VerdictBehind, false},
		{"unknown lag of a drained pass is bounded", []HistoryRun{run(h, StopExhausted, nil)}, h, VerdictBounded, false},
		{"no run for three intervals is stale", []HistoryRun{run(10*h, StopExhausted, secs(0)), run(11*h, StopExhausted, secs(0))}, 0, VerdictStale, false},
		{"configured interval makes one old run stale", []HistoryRun{run(4*h, StopExhausted, secs(0))}, h, VerdictStale, false},
		{"configured interval keeps a slow schedule fresh", []HistoryRun{run(10*h, StopExhausted, secs(0)), run(11*h, StopExhausted, secs(0))}, 24 * h, VerdictBounded, false},
		{"no run at all is stale", nil, 0, VerdictStale, false},
		{"only lease-held answers are stale", []HistoryRun{skipped}, h, VerdictStale, false},
		{"lease-held answers are passed over", []HistoryRun{skipped, run(h, StopBudget, secs(50*3600)), run(2*h, StopBudget, secs(80*3600))}, 0, VerdictDraining, true},
		{"newest run failed is failing", []HistoryRun{failed, run(2*h, StopExhausted, secs(0))}, 0, VerdictFailing, false},
		{"newest run refused by a changed schema is failing", []HistoryRun{run(h, StopSchemaChanged, secs(0)), run(2*h, StopExhausted, secs(0))}, 0, VerdictFailing, false},
		{"an unfinished run is judged by the finished ones", []HistoryRun{unfinished, run(h, StopExhausted, secs(0))}, h, VerdictBounded, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Judge(tc.runs, judgeNow, tc.expected)
			if got.Verdict != tc.want {
				t.Fatalf("verdict %s (%s), want %s", got.Verdict, got.Reason, tc.want)
			}
			if (got.CatchUpAt != nil) != tc.catchUp {
				t.Errorf("catch-up estimate %v, want one: %v", got.CatchUpAt, tc.catchUp)
			}
		})
	}
}

func TestJudgeCatchUp(t *testing.T) {
	t.Parallel()
	// 30h of lag gone in an hour, 50h left, 1h allowed: 49 more hours of draining.
	got := Judge([]HistoryRun{run(time.Hour, StopBudget, secs(50*3600)), run(2*time.Hour, StopBudget, secs(80*3600))}, judgeNow, time.Hour)
	want := judgeNow.Add(-time.Hour + time.Second).Add(49 * time.Hour / 30)
	if got.CatchUpAt == nil || !got.CatchUpAt.Equal(want) {
		t.Fatalf("catch-up at %v, want %v", got.CatchUpAt, want)
	}
	if got.LagSeconds == nil || *got.LagSeconds != 50*3600 {
		t.Errorf("lag %v, want %d", got.LagSeconds, 50*3600)
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   []Verdict
		want string
	}{
		{"all bounded", []Verdict{VerdictBounded, VerdictBounded}, "2 of 2 sweeps bounded"},
		{"one sweep", []Verdict{VerdictBounded}, "1 of 1 sweep bounded"},
		{"mixed", []Verdict{VerdictStale, VerdictBounded, VerdictDraining}, "1 of 3 sweeps bounded; 1 draining, 1 stale"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Summary(tc.in); got != tc.want {
				t.Errorf("Summary = %q, want %q", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
