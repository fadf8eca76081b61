package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// lagGauges are each pass's retention lag and the time it was measured: the lag changes only
// at a run's end, so its age says whether it still describes the table.
type lagGauges struct {
	seconds, measured *prometheus.GaugeVec
}

func newLagGauges() lagGauges {
	return lagGauges{
		seconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sweeprail_retention_lag_seconds",
			Help: "How far past its cutoff the oldest row each pass would delete was at the end of its last run on this process, in seconds; 0 when none was left (and before the first run, see the measured time).",
		}, []string{"sweep", "pass"}),
		measured: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sweeprail_retention_lag_measured_timestamp_seconds",
			Help: "Unix time sweeprail_retention_lag_seconds was measured at, by sweep and pass; 0 until the first run on this process.",
		}, []string{"sweep", "pass"}),
	}
}

// zero exports the pass's series at zero.
func (g lagGauges) zero(sweep, pass string) {
	g.seconds.WithLabelValues(sweep, pass)
	g.measured.WithLabelValues(sweep, pass)
}

// RetentionLag records a pass's retention lag, in seconds, as measured at at.
func (m *Metrics) RetentionLag(sweep, pass string, seconds float64, at time.Time) {
	if m == nil {
		return
	}
	m.lag.seconds.WithLabelValues(sweep, pass).Set(seconds)
	m.lag.measured.WithLabelValues(sweep, pass).Set(float64(at.UnixNano()) / 1e9)
}
