package status

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// lagRun is run with its pass's lag, measured at its end.
func lagRun(sweep string, minutes int, stop wire.StopReason, lag float64) wire.HistoryRun {
	r := run(sweep, "p", minutes, 10, 8192, stop)
	r.Passes[0].Lag = &wire.Lag{Seconds: &lag, MeasuredAt: *r.FinishedAt, Source: wire.LagRead}
	return r
}

// TestPageVerdicts checks the summary line and each sweep's verdict, lag and catch-up estimate.
func TestPageVerdicts(t *testing.T) {
	t.Parallel()
	specs := []policy.Spec{spec("kept", pass("p", "a")), spec("draining", pass("p", "b")), spec("idle", pass("p", "c"))}
	runs := map[string][]wire.HistoryRun{
		"kept":     {lagRun("kept", 10, wire.StopExhausted, 0), lagRun("kept", 70, wire.StopExhausted, 0)},
		"draining": {lagRun("draining", 10, wire.StopBudget, 5*3600), lagRun("draining", 70, wire.StopBudget, 8*3600)},
		"idle":     {lagRun("idle", 600, wire.StopExhausted, 0)},
	}
	cases := []struct {
		name     string
		expected time.Duration
		want     []string
	}{
		{"interval inferred", 0, []string{`2 of 3 sweeps bounded; 1 draining`, `badge verdict draining`,
			`oldest eligible row 5h00m past its cutoff`, `catches up about`, `nothing overdue`}},
		{"interval configured", 2 * time.Hour, []string{`1 of 3 sweeps bounded; 1 draining, 1 stale`, `no run for 10h0m0s (expected every 2h0m0s)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := NewHandler(Deps{Specs: specs, History: fixedHistory{runs: runs}, Now: func() time.Time { return now },
				ExpectedInterval: tc.expected})
			res, body := get(t, h, http.MethodGet, Route)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
		})
	}
}
