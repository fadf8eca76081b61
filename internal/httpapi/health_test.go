package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/migrations"
)

// probeServer serves NewServer over pool with the bundled catalog, for the routes that need no
// signature.
func probeServer(t *testing.T, pool *pgxpool.Pool) *harness {
	t.Helper()
	return probeServerOf(t, pool, policy.Catalog())
}

// probeServerOf serves NewServer over pool with specs.
func probeServerOf(t *testing.T, pool *pgxpool.Pool, specs []policy.Spec) *harness {
	t.Helper()
	// The runner needs a pool even where the server is given none; this one never connects.
	runnerPool := pool
	if runnerPool == nil {
		runnerPool = newPool(t, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	}
	runner, err := sweep.NewRunner(sweep.Config{Pool: runnerPool, Specs: specs, Settings: defaultOptions().settings, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.NewServer(httpapi.Deps{Runner: runner, Pool: pool}))
	t.Cleanup(srv.Close)
	return &harness{t: t, url: srv.URL}
}

func newPool(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := dbpool.NewPool(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// poolWith returns a pool on a fresh database of the kind u gives, after running sql on it.
func poolWith(t *testing.T, u, sql string) *pgxpool.Pool {
	t.Helper()
	pool := newPool(t, u)
	if _, err := pool.Exec(ctx, sql); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	return pool
}

// jobsPolicy is a user's policy over one table of theirs and a guard table, served on a database
// that holds no demo schema.
var jobsPolicy = []policy.Spec{{Name: "jobs", Passes: []policy.Pass{{
	Name: "done", Table: "queue.Jobs", AgeColumn: "finished_at", Retention: 24 * time.Hour,
	Guards: []policy.Guard{{Table: "job_deps", Columns: []string{"job_id"}, References: []string{"id"}}},
}}}}

const jobsSchema = `CREATE SCHEMA queue; CREATE TABLE queue."Jobs" (id bigint PRIMARY KEY, finished_at timestamptz);
CREATE TABLE job_deps (job_id bigint)`

func TestProbes(t *testing.T) {
	t.Parallel()
	migrated := dbtest.URL(t)
	down := "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"
	cases := []struct {
		name   string
		pool   *pgxpool.Pool
		specs  []policy.Spec // nil: the bundled catalog
		path   string
		status int
		// want is the error code of a failure, or a part of a success's body.
		want string
		// message is a part of a failure's message.
		message string
	}{
		{name: "healthz", pool: newPool(t, migrated), path: "/healthz", status: 200, want: `{"status":"ok"}`},
		{name: "healthz does not need the database", pool: newPool(t, down), path: "/healthz", status: 200, want: `{"status":"ok"}`},
		{name: "readyz on a migrated database", pool: newPool(t, migrated), path: "/readyz", status: 200, want: fmt.Sprintf(`{"status":"ready","migration":%d}`, latestSweeprail(t))},
		{name: "readyz on an empty database", pool: newPool(t, dbtest.EmptyURL(t)), path: "/readyz", status: 503, want: "migrations_pending",
			message: "no table sweeprail.goose_db_version): run api migrate up"},
		{name: "readyz with only the demo schema", pool: poolWith(t, dbtest.URL(t), `DROP SCHEMA sweeprail CASCADE`), path: "/readyz", status: 503,
			want: "migrations_pending", message: "run api migrate up"},
		{name: "readyz on a database one migration behind",
			pool: poolWith(t, dbtest.URL(t), `DELETE FROM sweeprail.goose_db_version WHERE version_id = (SELECT max(version_id) FROM sweeprail.goose_db_version)`),
			path: "/readyz", status: 503, want: "migrations_pending", message: "run api migrate up"},
		{name: "readyz without the lease table", pool: poolWith(t, dbtest.URL(t), `DROP TABLE sweeprail.sweep_lock`), path: "/readyz", status: 503,
			want: "migrations_pending", message: "sweeprail.sweep_lock"},
		// The demo schema's migrations are not sweeprail's business on a database of the operator's.
		{name: "readyz on a user's database without the demo schema", pool: poolWith(t, dbtest.SweeprailURL(t), jobsSchema), specs: jobsPolicy,
			path: "/readyz", status: 200, want: `"status":"ready"`},
		{name: "readyz when a table of the policy is missing", pool: poolWith(t, dbtest.SweeprailURL(t), `CREATE TABLE job_deps (job_id bigint)`), specs: jobsPolicy,
			path: "/readyz", status: 503, want: "policy_tables_missing", message: "do not exist: queue.Jobs"},
		{name: "readyz when a guard table of the policy is missing", pool: poolWith(t, dbtest.SweeprailURL(t), jobsSchema+`; DROP TABLE job_deps`), specs: jobsPolicy,
			path: "/readyz", status: 503, want: "policy_tables_missing", message: "do not exist: job_deps"},
		{name: "readyz with the bundled catalog and no demo schema", pool: newPool(t, dbtest.SweeprailURL(t)), path: "/readyz", status: 503,
			want: "policy_tables_missing", message: "accounts, audit_log, consent_records"},
		{name: "readyz with the database down", pool: newPool(t, down), path: "/readyz", status: 503, want: "database_unreachable"},
		{name: "readyz without a pool", path: "/readyz", status: 503, want: "database_unreachable"},
		{name: "unknown path", path: "/nope", status: 404, want: "not_found"},
		{name: "wrong method", path: "/healthz?method=POST", status: 405, want: "method_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			specs := tc.specs
			if specs == nil {
				specs = policy.Catalog()
			}
			h := probeServerOf(t, tc.pool, specs)
			method, path := http.MethodGet, tc.path
			if p, ok := strings.CutSuffix(path, "?method=POST"); ok {
				method, path = http.MethodPost, p
			}
			a := h.send(method, path, "", nil)
			if a.status != tc.status {
				t.Fatalf("HTTP %d, want %d: %s", a.status, tc.status, a.body)
			}
			if tc.status >= 400 {
				code, message := envelope(t, a)
				if code != tc.want {
					t.Errorf("error %q, want %q", code, tc.want)
				}
				if !strings.Contains(message, tc.message) {
					t.Errorf("message %q, want it to say %q", message, tc.message)
				}
				return
			}
			if !strings.Contains(string(a.body), tc.want) {
				t.Errorf("body %s, want it to hold %s", a.body, tc.want)
			}
		})
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	h := probeServer(t, nil)
	cases := []struct {
		name, sent string
		kept       bool
	}{
		{"none: a fresh one", "", false},
		{"a proxy's id is kept", "req-123.abc:XYZ_9", true},
		{"junk is replaced", "bad id\twith spaces", false},
		{"too long is replaced", strings.Repeat("a", 129), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.sent != "" {
				hdr["X-Request-Id"] = tc.sent
			}
			a := h.send(http.MethodGet, "/healthz", "", hdr)
			got := a.header.Get("X-Request-Id")
			switch {
			case got == "":
				t.Error("no X-Request-Id on the answer")
			case tc.kept && got != tc.sent:
				t.Errorf("X-Request-Id = %q, want the caller's %q", got, tc.sent)
			case !tc.kept && got == tc.sent:
				t.Errorf("X-Request-Id %q kept, want a fresh one", got)
			}
		})
	}
}

// TestMetricsRoute: /metrics serves the Gatherer's exposition, unauthenticated.
func TestMetricsRoute(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.send(http.MethodGet, "/metrics", "", nil)
	if a.status != http.StatusOK {
		t.Fatalf("HTTP %d: %s", a.status, a.body)
	}
	for _, line := range []string{
		`sweeprail_auth_failures_total{reason="bad_signature"} 0`,
		`sweeprail_runs_total{outcome="exhausted",sweep="notifications"} 0`,
	} {
		if !strings.Contains(string(a.body), line+"\n") {
			t.Errorf("exposition lacks %s", line)
		}
	}
}

// latestSweeprail is the newest migration of sweeprail's own set, which /readyz reports.
func latestSweeprail(t *testing.T) int64 {
	t.Helper()
	v, err := migrations.Sweeprail.Latest()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
