package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sweeprail/sweeprail/internal/metrics"
)

func labels() metrics.Labels {
	return metrics.Labels{
		Sweeps: []metrics.Sweep{
			{Name: "notifications", Passes: []string{"read", "erase"}, Tables: map[string][]string{"read": {"notifications", "deliveries", "read_marks"}},
				Cascades: map[string][]string{"read": {"read_marks"}}, PerRow: map[string]string{"erase": "accounts"}},
			{Name: "audit-log", Passes: []string{"operational", "compliance"}, Archiving: []string{"operational"},
				Tables: map[string][]string{"operational": {"audit_log"}, "compliance": {"audit_log"}}},
		},
		Outcomes:    []string{"exhausted", "batch-error", "skipped"},
		AuthReasons: []string{"bad_signature", "replayed"},
	}
}

func TestNew(t *testing.T) {
	t.Run("every combination at zero from boot", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		if _, err := metrics.New(reg, labels()); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{
			"sweeprail_rows_deleted_total":             5, // three passes' tables, one with a child and a cascade
			"sweeprail_rows_updated_total":             1, // the one pass's cascade, none of the others
			"sweeprail_rows_processed_total":           1, // the one per-row pass, none of the others
			"sweeprail_rows_archived_total":            1, // the one pass that archives
			"sweeprail_runs_total":                     6, // two sweeps x three outcomes
			"sweeprail_run_duration_seconds":           2,
			"sweeprail_batch_duration_seconds":         2,
			"sweeprail_last_success_timestamp_seconds": 2,
			"sweeprail_auth_failures_total":            2,
			"sweeprail_throttled_seconds_total":        6, // two sweeps x three causes
			"sweeprail_reproofs_total":                 8, // four passes x proven and refused
		}
		for name, n := range want {
			if got := testutil.CollectAndCount(reg, name); got != n {
				t.Errorf("%s: %d series, want %d", name, got, n)
			}
		}
		expected := `
# HELP sweeprail_runs_total Sweep runs, by sweep and outcome (a stop reason, or skipped when the lease was held).
# TYPE sweeprail_runs_total counter
sweeprail_runs_total{outcome="batch-error",sweep="audit-log"} 0
sweeprail_runs_total{outcome="batch-error",sweep="notifications"} 0
sweeprail_runs_total{outcome="exhausted",sweep="audit-log"} 0
sweeprail_runs_total{outcome="exhausted",sweep="notifications"} 0
sweeprail_runs_total{outcome="skipped",sweep="audit-log"} 0
sweeprail_runs_total{outcome="skipped",sweep="notifications"} 0
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "sweeprail_runs_total"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("records", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		m, err := metrics.New(reg, labels())
		if err != nil {
			t.Fatal(err)
		}
		end := time.Unix(1_800_000_000, 0)
		m.RowsDeleted("notifications", "read", "notifications", 12)
		m.RowsDeleted("notifications", "read", "deliveries", 30)
		m.RowsDeleted("audit-log", "operational", "audit_log", 7)
		m.RowsUpdated("notifications", "read", "read_marks", 4)
		m.RowsArchived("audit-log", "operational", 7)
		m.RowsProcessed("notifications", "erase", "accounts", 3)
		m.Run("notifications", "exhausted", time.Second, true, end)
		m.Run("audit-log", "batch-error", time.Second, false, end)
		m.AuthFailure("replayed")
		m.Throttled("notifications", "replica-lag", 1500*time.Millisecond)
		m.Throttled("notifications", "wal-rate", 250*time.Millisecond)
		m.Throttled("notifications", "active-sessions", 0)
		m.Throttled("notifications", "replica-lag", -time.Second)
		expected := `
# HELP sweeprail_last_success_timestamp_seconds Unix time of the last run that took its lease and ended without batch-error or schema-changed; 0 until the first.
# TYPE sweeprail_last_success_timestamp_seconds gauge
sweeprail_last_success_timestamp_seconds{sweep="audit-log"} 0
sweeprail_last_success_timestamp_seconds{sweep="notifications"} 1.8e+09
# HELP sweeprail_rows_deleted_total Rows deleted by sweeps, by sweep, pass and table: the pass's own, its delete_with children's and those its cascades deleted.
# TYPE sweeprail_rows_deleted_total counter
sweeprail_rows_deleted_total{pass="compliance",sweep="audit-log",table="audit_log"} 0
sweeprail_rows_deleted_total{pass="operational",sweep="audit-log",table="audit_log"} 7
sweeprail_rows_deleted_total{pass="read",sweep="notifications",table="deliveries"} 30
sweeprail_rows_deleted_total{pass="read",sweep="notifications",table="notifications"} 12
sweeprail_rows_deleted_total{pass="read",sweep="notifications",table="read_marks"} 0
# HELP sweeprail_rows_updated_total Rows the schema's ON DELETE SET NULL and SET DEFAULT keys changed as sweeps deleted the rows they reference, by sweep, pass and the changed table (one of the pass's cascades).
# TYPE sweeprail_rows_updated_total counter
sweeprail_rows_updated_total{pass="read",sweep="notifications",table="read_marks"} 4
# HELP sweeprail_rows_processed_total Keys per-row passes handed to their function that did the work (the calls that did not answer false), by sweep, pass and the pass's table; not counted as rows deleted.
# TYPE sweeprail_rows_processed_total counter
sweeprail_rows_processed_total{pass="erase",sweep="notifications",table="accounts"} 3
# HELP sweeprail_rows_archived_total Rows moved to an archive table by sweeps (archive_to), by sweep and pass; each was also counted as deleted.
# TYPE sweeprail_rows_archived_total counter
sweeprail_rows_archived_total{pass="operational",sweep="audit-log"} 7
# HELP sweeprail_auth_failures_total Requests to /internal/* refused by the signature check, by reason.
# TYPE sweeprail_auth_failures_total counter
sweeprail_auth_failures_total{reason="bad_signature"} 0
sweeprail_auth_failures_total{reason="replayed"} 1
# HELP sweeprail_throttled_seconds_total Time sweep runs spent waiting between batches on their budgets, by cause: replica-lag, wal-rate, active-sessions.
# TYPE sweeprail_throttled_seconds_total counter
sweeprail_throttled_seconds_total{cause="active-sessions",sweep="audit-log"} 0
sweeprail_throttled_seconds_total{cause="active-sessions",sweep="notifications"} 0
sweeprail_throttled_seconds_total{cause="replica-lag",sweep="audit-log"} 0
sweeprail_throttled_seconds_total{cause="replica-lag",sweep="notifications"} 1.5
sweeprail_throttled_seconds_total{cause="wal-rate",sweep="audit-log"} 0
sweeprail_throttled_seconds_total{cause="wal-rate",sweep="notifications"} 0.25
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(expected),
			"sweeprail_last_success_timestamp_seconds", "sweeprail_rows_deleted_total", "sweeprail_rows_updated_total", "sweeprail_rows_processed_total", "sweeprail_rows_archived_total",
			"sweeprail_auth_failures_total",
			"sweeprail_throttled_seconds_total"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("nil records nothing and does not panic", func(t *testing.T) {
		var m *metrics.Metrics
		m.RowsDeleted("a", "b", "c", 1)
		m.RowsUpdated("a", "b", "c", 1)
		m.RowsArchived("a", "b", 1)
		m.RowsProcessed("a", "b", "c", 1)
		m.Batch("a", time.Second)
		m.Run("a", "exhausted", time.Second, true, time.Now())
		m.AuthFailure("x")
		m.Throttled("a", "replica-lag", time.Second)
	})
}
