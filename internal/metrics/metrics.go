// Package metrics owns sweeprail's Prometheus collectors. Every label combination that can occur
// is created at zero when the collectors are built, so an alert on increase() sees the first
// failure instead of a series that appears already at one.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Sweep names one sweep and its passes, the label values to export at zero.
type Sweep struct {
	Name   string
	Passes []string
	// Archiving are the passes that archive their rows (archive_to): sweeprail_rows_archived_total
	// is exported at zero for these alone.
	Archiving []string
	// Tables are, per pass, the tables it deletes from: its own, its delete_with children's and
	// its cascades', each a table label of sweeprail_rows_deleted_total exported at zero.
	Tables map[string][]string
	// Cascades are, per pass, the tables of its cascades: each a table label of
	// sweeprail_rows_updated_total exported at zero.
	Cascades map[string][]string
	// PerRow are the per-row passes and each one's table: sweeprail_rows_processed_total is
	// exported at zero for these alone. What their function did to the rows is its own affair,
	// so they have no Tables: their keys are processed, not rows deleted.
	PerRow map[string]string
}

// Labels are every label value that can occur.
type Labels struct {
	Sweeps []Sweep
	// Outcomes are the values of sweeprail_runs_total's outcome label.
	Outcomes []string
	// AuthReasons are the values of sweeprail_auth_failures_total's reason label.
	AuthReasons []string
}

// Metrics holds the collectors. A nil *Metrics records nothing, so tests that do not look at
// metrics need not build one.
type Metrics struct {
	rowsDeleted   *prometheus.CounterVec
	rowsUpdated   *prometheus.CounterVec
	rowsProcessed *prometheus.CounterVec
	rowsArchived  *prometheus.CounterVec
	partsDropped  *prometheus.CounterVec
	runs          *prometheus.CounterVec
	runDuration   *prometheus.HistogramVec
	batchDuration *prometheus.HistogramVec
	lastSuccess   *prometheus.GaugeVec
	authFailures  *prometheus.CounterVec
	throttled     *prometheus.CounterVec
	unsigned      prometheus.Counter
	historyFails  *prometheus.CounterVec
	reproofs      *prometheus.CounterVec
	lag           lagGauges
}

// New builds the collectors, registers them on reg and exports every combination of labels at zero.
func New(reg prometheus.Registerer, labels Labels) (*Metrics, error) {
	m := &Metrics{
		rowsDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sweeprail_rows_deleted_total",
			Help: "Rows deleted by sweeps, by sweep, pass and table: the pass's own, its delete_with children's and those its cascades deleted.",
		}, []string{"sweep", "pass", "table"}),
		rowsUpdated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sweeprail_rows_updated_total",
			Help: "Rows the schema's ON DELETE SET NULL and SET DEFAULT keys changed as sweeps deleted the rows they reference, by sweep, pass and the changed table (one of the pass's cascades).",
		}, []string{"sweep", "pass", "table"}),
		rowsProcessed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sweeprail_rows_processed_total",
			Help: "Keys per-row passes handed to their function that did the work (the calls that did not answer false), by sweep, pass and the pass's table; not counted as rows deleted.",
		}, []string{"sweep", "pass", "table"}),
		rowsArchived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sweeprail_rows_archived_total",
			Help: "Rows moved to an archive table by sweeps (archive_to), by sweep and pass; each was also counted as deleted.",
		}, []string{"sweep", "pass"}),
		partsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sweeprail_partitions_dropped_total",
			Help: "Partitions dropped (or detached, with keep_detached) by partitions-mode passes, by sweep and pass.",
		}, []string{"sweep", "pass"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sweeprail_runs_total",
			Help: "Sweep runs, by sweep and outcome (a stop reason, or skipped when the lease was held).",
		}, []string{"sweep", "outcome"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sweeprail_run_duration_seconds",
			Help:    "Duration of sweep runs, lease included.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 90, 120},
		}, []string{"sweep"}),
		batchDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sweeprail_batch_duration_seconds",
			Help:    "Duration of one batch transaction.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{"sweep"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sweeprail_last_success_timestamp_seconds",
			Help: "Unix time of the last run that took its lease and ended without batch-error or schema-changed; 0 until the first.",
		}, []string{"sweep"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sweeprail_auth_failures_total",
			Help: "Requests to /internal/* refused by the signature check, by reason.",
		}, []string{"reason"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sweeprail_throttled_seconds_total",
			Help: "Time sweep runs spent waiting between batches on their budgets, by cause: replica-lag, wal-rate, active-sessions.",
		}, []string{"sweep", "cause"}),
		unsigned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sweeprail_unsigned_requests_total",
			Help: "Requests answered without a valid signature (probes, scrapes, refusals), which start no trace span.",
		}),
		historyFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sweeprail_history_write_failures_total",
			Help: "Runs whose end could not be written to the run history (sweeprail.run), by sweep.",
		}, []string{"sweep"}),
		reproofs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sweeprail_reproofs_total",
			Help: "Passes whose schema changed since their proof and were checked again before their first batch, by sweep, pass and outcome: proven (the run went on) or refused (schema-changed, nothing deleted).",
		}, []string{"sweep", "pass", "outcome"}),
	}
	m.lag = newLagGauges()
	for _, c := range []prometheus.Collector{m.rowsDeleted, m.rowsUpdated, m.rowsProcessed, m.rowsArchived, m.partsDropped, m.runs, m.runDuration, m.batchDuration, m.lastSuccess, m.authFailures, m.throttled, m.unsigned, m.historyFails, m.reproofs, m.lag.seconds, m.lag.measured} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.zero(labels)
	return m, nil
}

// zero exports every label combination of labels at zero, so an alert on increase() sees the
// first event.
func (m *Metrics) zero(labels Labels) {
	for _, s := range labels.Sweeps {
		for _, p := range s.Passes {
			for _, t := range s.Tables[p] {
				m.rowsDeleted.WithLabelValues(s.Name, p, t)
			}
			for _, t := range s.Cascades[p] {
				m.rowsUpdated.WithLabelValues(s.Name, p, t)
			}
			m.partsDropped.WithLabelValues(s.Name, p)
			m.reproofs.WithLabelValues(s.Name, p, ReproofProven)
			m.reproofs.WithLabelValues(s.Name, p, ReproofRefused)
			m.lag.zero(s.Name, p)
		}
		for p, t := range s.PerRow {
			m.rowsProcessed.WithLabelValues(s.Name, p, t)
		}
		for _, p := range s.Archiving {
			m.rowsArchived.WithLabelValues(s.Name, p)
		}
		for _, o := range labels.Outcomes {
			m.runs.WithLabelValues(s.Name, o)
		}
		m.runDuration.WithLabelValues(s.Name)
		m.batchDuration.WithLabelValues(s.Name)
		m.lastSuccess.WithLabelValues(s.Name)
		for _, c := range throttleCauses {
			m.throttled.WithLabelValues(s.Name, c)
		}
		m.historyFails.WithLabelValues(s.Name)
	}
	for _, r := range labels.AuthReasons {
		m.authFailures.WithLabelValues(r)
	}
}

// RowsDeleted adds n to the rows a pass deleted from table.
func (m *Metrics) RowsDeleted(sweep, pass, table string, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.rowsDeleted.WithLabelValues(sweep, pass, table).Add(float64(n))
}

// RowsUpdated adds n to the rows of table a pass's deletes changed through SET NULL and SET
// DEFAULT keys.
func (m *Metrics) RowsUpdated(sweep, pass, table string, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.rowsUpdated.WithLabelValues(sweep, pass, table).Add(float64(n))
}

// RowsProcessed adds n to the keys a per-row pass handed to its function, on the pass's table.
func (m *Metrics) RowsProcessed(sweep, pass, table string, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.rowsProcessed.WithLabelValues(sweep, pass, table).Add(float64(n))
}

// RowsArchived adds n to a pass's archived rows.
func (m *Metrics) RowsArchived(sweep, pass string, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.rowsArchived.WithLabelValues(sweep, pass).Add(float64(n))
}

// PartitionsDropped adds n to a pass's dropped (or detached) partitions.
func (m *Metrics) PartitionsDropped(sweep, pass string, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.partsDropped.WithLabelValues(sweep, pass).Add(float64(n))
}

// The outcomes of sweeprail_reproofs_total.
const (
	ReproofProven  = "proven"
	ReproofRefused = "refused"
)

// Reproof counts one pass checked again because its schema changed: refused when the check
// refused it (the pass stopped with schema-changed), proven otherwise.
func (m *Metrics) Reproof(sweep, pass string, refused bool) {
	if m == nil {
		return
	}
	outcome := ReproofProven
	if refused {
		outcome = ReproofRefused
	}
	m.reproofs.WithLabelValues(sweep, pass, outcome).Inc()
}

// Batch records one batch transaction's duration.
func (m *Metrics) Batch(sweep string, d time.Duration) {
	if m == nil {
		return
	}
	m.batchDuration.WithLabelValues(sweep).Observe(d.Seconds())
}

// Run records one finished run: its outcome, its duration and, when it succeeded (it ran and no
// batch failed), its time of success.
func (m *Metrics) Run(sweep, outcome string, d time.Duration, succeeded bool, end time.Time) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(sweep, outcome).Inc()
	m.runDuration.WithLabelValues(sweep).Observe(d.Seconds())
	if succeeded {
		m.lastSuccess.WithLabelValues(sweep).Set(float64(end.UnixNano()) / 1e9)
	}
}

// throttleCauses are the values of the throttled metric's cause label (package pace's Causes;
// metrics imports none of the engine).
var throttleCauses = []string{"replica-lag", "wal-rate", "active-sessions"}

// Throttled adds d, time a run of sweep waited on cause, to its throttled seconds.
func (m *Metrics) Throttled(sweep, cause string, d time.Duration) {
	if m == nil || d <= 0 {
		return
	}
	m.throttled.WithLabelValues(sweep, cause).Add(d.Seconds())
}

// UnsignedRequest counts one request answered without a valid signature.
func (m *Metrics) UnsignedRequest() {
	if m == nil {
		return
	}
	m.unsigned.Inc()
}

// HistoryFailure counts one run of sweep whose end the run history could not record.
func (m *Metrics) HistoryFailure(sweep string) {
	if m == nil {
		return
	}
	m.historyFails.WithLabelValues(sweep).Inc()
}

// AuthFailure counts one request refused by the signature check.
func (m *Metrics) AuthFailure(reason string) {
	if m == nil {
		return
	}
	m.authFailures.WithLabelValues(reason).Inc()
}
