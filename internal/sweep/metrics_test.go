package sweep_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
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
