package status

import (
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestRunViewCounts: a row that stands for several answers (lease-held ones, or runs that found
// nothing to do) says how many; a row of one run does not.
func TestRunViewCounts(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 9, 15, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		skipped  bool
		stop     wire.StopReason
		requests int64
		want     string
	}{
		{"idle runs", false, wire.StopExhausted, 300, "exhausted ×300"},
		{"lease-held answers", true, wire.StopLeaseHeld, 12, "lease-held ×12"},
		{"one run", false, wire.StopExhausted, 1, "exhausted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := wire.HistoryRun{RunID: "r", Sweep: "notifications", StartedAt: at, FinishedAt: &at, StopReason: &c.stop,
				Skipped: c.skipped, Requests: c.requests, Passes: []wire.HistoryPass{}}
			if got := newRunView(r, at, nil).StopReason; got != c.want {
				t.Errorf("stop reason shown %q, want %q", got, c.want)
			}
		})
	}
}
