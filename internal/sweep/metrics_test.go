package sweep_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/trace"
	"github.com/sweeprail/sweeprail/internal/wire"
)

func TestRunMetrics(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	at := dbNow(t, pool)
	seedNotifications(t, pool, at, 1500, 5)
	reg := prometheus.NewRegistry()
	var sweeps []metrics.Sweep
	for _, s := range policy.Catalog() {
		ms := metrics.Sweep{Name: s.Name}
		for _, p := range s.Passes {
			ms.Passes = append(ms.Passes, p.Name)
		}
		sweeps = append(sweeps, ms)
	}
	m, err := metrics.New(reg, metrics.Labels{Sweeps: sweeps, Outcomes: wire.Outcomes()})
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: fixed(settings(), 1000), Metrics: m, AsOf: fixedAsOf(at)})
	run(t, r, "notifications")
	exec(t, pool, `INSERT INTO sweeprail.sweep_lock VALUES ('notifications', gen_random_uuid(), now(), now() + interval '1 hour')`)
	run(t, r, "notifications")

	gather := func(name string, labels map[string]string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		metric:
			for _, mt := range mf.GetMetric() {
				for _, lp := range mt.GetLabel() {
					if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
						continue metric
					}
				}
				if mt.GetCounter() != nil {
					return mt.GetCounter().GetValue()
				}
				if mt.GetHistogram() != nil {
					return float64(mt.GetHistogram().GetSampleCount())
				}
				return mt.GetGauge().GetValue()
			}
		}
		t.Fatalf("no %s%v", name, labels)
		return 0
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sweeprail_rows_deleted_total", map[string]string{"sweep": "notifications", "pass": "read"}, 1500},
		{"sweeprail_runs_total", map[string]string{"sweep": "notifications", "outcome": "exhausted"}, 1},
		{"sweeprail_runs_total", map[string]string{"sweep": "notifications", "outcome": "skipped"}, 1},
		{"sweeprail_runs_total", map[string]string{"sweep": "outbox", "outcome": "exhausted"}, 0},
		{"sweeprail_batch_duration_seconds", map[string]string{"sweep": "notifications"}, 2},
		{"sweeprail_run_duration_seconds", map[string]string{"sweep": "notifications"}, 2},
	}
	for _, c := range checks {
		if got := gather(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if ts := gather("sweeprail_last_success_timestamp_seconds", map[string]string{"sweep": "notifications"}); ts == 0 {
		t.Error("last success not set after a successful run")
	}
	if n := testutil.CollectAndCount(reg, "sweeprail_runs_total"); n != len(sweeps)*len(wire.Outcomes()) {
		t.Errorf("%d runs_total series, want every sweep x outcome", n)
	}
}

// TestPerRowCounts checks that a per-row pass's keys are counted as processed, in the answer,
// the metrics and the spans alike, and never as rows deleted: its function, not the rail,
// decides what happens to the rows.
func TestPerRowCounts(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	at := dbNow(t, pool)
	const n = 4
	seedErasure(t, pool, at, n)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, httpapi.MetricLabels(policy.Catalog()))
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(ctx) })
	r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), Metrics: m,
		AsOf: fixedAsOf(at), Tracing: trace.Wrap(tp)})
	res := run(t, r, "account-erasure")
	if res.Processed != n || res.Deleted != 0 {
		t.Fatalf("answer: processed %d, deleted %d; want %d, 0", res.Processed, res.Deleted, n)
	}

	t.Run("metrics", func(t *testing.T) {
		processed := `
# HELP sweeprail_rows_processed_total Keys per-row passes handed to their function that did the work (the calls that did not answer false), by sweep, pass and the pass's table; not counted as rows deleted.
# TYPE sweeprail_rows_processed_total counter
sweeprail_rows_processed_total{pass="requested",sweep="account-erasure",table="accounts"} 4
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(processed), "sweeprail_rows_processed_total"); err != nil {
			t.Error(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "sweeprail_rows_deleted_total" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				for _, lp := range mt.GetLabel() {
					if lp.GetName() == "sweep" && lp.GetValue() == "account-erasure" {
						t.Errorf("sweeprail_rows_deleted_total has a per-row series %v = %v", mt.GetLabel(), mt.GetCounter().GetValue())
					}
				}
			}
		}
	})

	t.Run("spans", func(t *testing.T) {
		sums := map[string][2]int64{} // span name: rows, processed
		for _, s := range rec.Ended() {
			var rows, processed int64
			for _, kv := range s.Attributes() {
				switch kv.Key {
				case trace.AttrRows:
					rows = kv.Value.AsInt64()
				case trace.AttrProcessed:
					processed = kv.Value.AsInt64()
				}
			}
			c := sums[s.Name()]
			sums[s.Name()] = [2]int64{c[0] + rows, c[1] + processed}
		}
		for _, name := range []string{trace.SpanRun, trace.SpanPass, trace.SpanBatch} {
			if got := sums[name]; got != [2]int64{0, n} {
				t.Errorf("%s spans: rows %d, processed %d; want 0, %d", name, got[0], got[1], n)
			}
		}
	})
}
