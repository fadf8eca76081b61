package sweep_test

import (
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// cascadeSchema is an OAuth provider's tables: deleting an application deletes its access
// tokens, and theirs sessions (a chain two levels deep), and clears its id from the audit trail
// (SET NULL), all by the schema's own keys.
const cascadeSchema = `
CREATE TABLE applications (id bigserial PRIMARY KEY, last_used_at timestamptz NOT NULL);
CREATE INDEX applications_last_used_at ON applications (last_used_at);
CREATE TABLE access_tokens (id bigserial PRIMARY KEY,
    application_id bigint NOT NULL REFERENCES applications (id) ON DELETE CASCADE, expires_at timestamptz NOT NULL);
CREATE INDEX access_tokens_application_id ON access_tokens (application_id);
CREATE TABLE app_sessions (id bigserial PRIMARY KEY, token_id bigint NOT NULL REFERENCES access_tokens (id) ON DELETE CASCADE);
CREATE INDEX app_sessions_token_id ON app_sessions (token_id);
CREATE TABLE app_audit (id bigserial PRIMARY KEY, application_id bigint REFERENCES applications (id) ON DELETE SET NULL, what text);
CREATE INDEX app_audit_application_id ON app_audit (application_id);
`

func cascadePool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := dbtest.Pool(t)
	exec(t, pool, cascadeSchema)
	return pool
}

// seedCascades makes 30 old applications and 20 young ones; each has 3 access tokens, each token
// 2 sessions, and each application 1 audit row. Applications 1 to 5 (old) are also referenced
// by a young grant, which a keep guard in some tests keeps them for.
func seedCascades(t *testing.T, pool *pgxpool.Pool, at time.Time) {
	t.Helper()
	exec(t, pool, `INSERT INTO applications (id, last_used_at)
		SELECT i, $1::timestamptz - CASE WHEN i <= 30 THEN interval '40 days' ELSE interval '1 day' END FROM generate_series(1, 50) AS i`, at)
	exec(t, pool, `INSERT INTO access_tokens (application_id, expires_at) SELECT a, $1::timestamptz FROM generate_series(1, 50) AS a, generate_series(1, 3)`, at)
	exec(t, pool, `INSERT INTO app_sessions (token_id) SELECT id FROM access_tokens, generate_series(1, 2)`)
	exec(t, pool, `INSERT INTO app_audit (application_id, what) SELECT a, 'created' FROM generate_series(1, 50) AS a`)
}

// TestCascadesCounted runs a pass whose deletes cascade two levels deep and clear a SET NULL key,
// on every path and in mode single, and checks that the dry run, the answer, the history and
// the metrics count exactly what each table lost.
func TestCascadesCounted(t *testing.T) {
	t.Parallel()
	type mode struct {
		name string
		tp   *testPath
		yaml string
	}
	modes := []mode{{name: "single", yaml: "mode: single"}}
	for i := range testPaths {
		modes = append(modes, mode{name: testPaths[i].name, tp: &testPaths[i]})
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			pool := cascadePool(t)
			at := dbNow(t, pool)
			seedCascades(t, pool, at)
			extra := []string{"cascades: [access_tokens, app_sessions, app_audit]"}
			if m.yaml != "" {
				extra = append(extra, m.yaml)
			}
			pol, err := policy.Load("p.yaml", []byte(policyYAML(passYAML("applications", "last_used_at", extra...))))
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			met, err := metrics.New(reg, httpapi.MetricLabels(pol.Specs))
			if err != nil {
				t.Fatal(err)
			}
			store := history.New(pool, 30*24*time.Hour)
			// One connection: each batch's transaction follows the last one's on the same
			// session, whose statistics may not be flushed yet, and must not be counted twice.
			pcfg := pool.Config().Copy()
			pcfg.MaxConns = 1
			one, err := pgxpool.NewWithConfig(ctx, pcfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(one.Close)
			cfg := sweep.Config{Pool: one, Specs: pol.Specs, Settings: fixed(settings(), 7), AsOf: fixedAsOf(at), Metrics: met, History: store}
			if m.tp != nil {
				cfg = m.tp.config(cfg, 7)
			}
			r := newRunner(t, cfg)
			want := []wire.CascadeRows{{Table: "access_tokens", Deleted: 90}, {Table: "app_sessions", Deleted: 180}, {Table: "app_audit", Updated: 30}}

			dry, err := r.DryRun(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			if dp := dry.Passes[0]; dp.Eligible == nil || *dp.Eligible != 30 || !slices.Equal(dp.Cascades, want) {
				t.Errorf("dry run: eligible %v, cascades %+v; want 30 and %+v", dp.Eligible, dp.Cascades, want)
			}
			before := map[string]int64{}
			for _, tbl := range []string{"applications", "access_tokens", "app_sessions"} {
				before[tbl] = count(t, pool, "SELECT count(*) FROM "+tbl)
			}
			res := run(t, r, "s")
			if res.Error != nil {
				t.Fatalf("run: %+v", res.Error)
			}
			if res.Deleted != 30 || !slices.Equal(res.Passes[0].Cascades, want) {
				t.Errorf("run: deleted %d, cascades %+v; want 30 and %+v", res.Deleted, res.Passes[0].Cascades, want)
			}
			// What the tables lost is what was counted.
			for tbl, lost := range map[string]int64{"applications": 30, "access_tokens": 90, "app_sessions": 180} {
				if got := before[tbl] - count(t, pool, "SELECT count(*) FROM "+tbl); got != lost {
					t.Errorf("table %s lost %d rows, want %d", tbl, got, lost)
				}
			}
			if n := count(t, pool, "SELECT count(*) FROM app_audit WHERE application_id IS NULL"); n != 30 {
				t.Errorf("%d audit rows cleared, want 30", n)
			}
			runs, err := store.List(ctx, "s", 1)
			if err != nil || len(runs) != 1 || !slices.Equal(runs[0].Passes[0].Cascades, want) {
				t.Errorf("history %+v (%v): want cascades %+v", runs, err, want)
			}
			for tbl, n := range map[string]float64{"applications": 30, "access_tokens": 90, "app_sessions": 180, "app_audit": 0} {
				if got := counterValue(t, reg, "sweeprail_rows_deleted_total", map[string]string{"sweep": "s", "pass": "p", "table": tbl}); got != n {
					t.Errorf("sweeprail_rows_deleted_total{table=%q} = %v, want %v", tbl, got, n)
				}
			}
		})
	}
}

// counterValue is the value of the counter name with exactly labels; the test fails when there
// is none.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
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
			if len(mt.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range mt.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metric
				}
			}
			return mt.GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

// TestDeleteTriggersShown checks that the dry run lists the user triggers that fire on DELETE on
// a swept table, as the policy check warns of them.
func TestDeleteTriggersShown(t *testing.T) {
	t.Parallel()
	pool := cascadePool(t)
	exec(t, pool, `CREATE FUNCTION note_gone() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$;
CREATE TRIGGER note_gone AFTER DELETE ON applications FOR EACH ROW EXECUTE FUNCTION note_gone();
CREATE TRIGGER on_insert AFTER INSERT ON applications FOR EACH ROW EXECUTE FUNCTION note_gone()`)
	yaml := policyYAML(passYAML("applications", "last_used_at", "cascades: [access_tokens, app_sessions, app_audit]"))
	const want = "applications.note_gone (AFTER DELETE, note_gone)"
	pol, err := policy.Load("p.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings()})
	dry, err := r.DryRun(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got := dry.Passes[0].Triggers; len(got) != 1 || got[0] != want {
		t.Errorf("dry run triggers %q, want [%s]", got, want)
	}
}
