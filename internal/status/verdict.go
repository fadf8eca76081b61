package status

import (
	"fmt"
	"time"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// verdictView is a sweep's retention verdict as the page shows it.
type verdictView struct {
	Verdict string
	// Lag says the largest lag of its passes ("" when none is known or none is left), CatchUp when the
	// draining is estimated to end ("" unless draining).
	Lag, CatchUp, Reason string
}

// judge sets each sweep's verdict on p, and the summary line that opens the page, from each
// sweep's runs (newest first) as of now; expected is SWEEP_EXPECTED_INTERVAL (0: inferred).
func judge(p *page, runs map[string][]wire.HistoryRun, now time.Time, expected time.Duration) {
	verdicts := make([]wire.Verdict, 0, len(p.Sweeps))
	for i := range p.Sweeps {
		v := wire.Judge(runs[p.Sweeps[i].Name], now, expected)
		verdicts = append(verdicts, v.Verdict)
		view := verdictView{Verdict: string(v.Verdict), Reason: v.Reason}
		if v.LagSeconds != nil && *v.LagSeconds > 0 {
			view.Lag = "oldest eligible row " + formatLag(*v.LagSeconds) + " past its cutoff"
		}
		if v.CatchUpAt != nil {
			view.CatchUp = fmt.Sprintf("%s (in %s)", v.CatchUpAt.UTC().Format("2006-01-02 15:04Z"), formatLag(v.CatchUpAt.Sub(now).Seconds()))
		}
		p.Sweeps[i].Verdict = view
	}
	p.Summary = wire.Summary(verdicts)
	p.AllBounded = len(verdicts) > 0
	for _, v := range verdicts {
		p.AllBounded = p.AllBounded && v == wire.VerdictBounded
	}
}

// formatLag writes seconds as the largest two units: "0s", "42s", "3m10s", "5h20m", "12d4h".
func formatLag(seconds float64) string {
	d := time.Duration(max(seconds, 0) * float64(time.Second)).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%02dh", int(d.Hours()/24), int(d.Hours())%24)
	}
}
