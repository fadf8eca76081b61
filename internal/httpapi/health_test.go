package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// probeServer serves NewServer over pool, for the routes that need no signature.
func probeServer(t *testing.T, pool *pgxpool.Pool) *harness {
	t.Helper()
	// The runner needs a pool even where the server is given none; this one never connects.
	runnerPool := pool
	if runnerPool == nil {
		runnerPool = newPool(t, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	}
	runner, err := sweep.NewRunner(sweep.Config{Pool: runnerPool, Specs: sweep.Catalog(), Settings: defaultOptions().settings, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.NewServer(httpapi.Deps{Runner: runner, Pool: pool}))
	t.Cleanup(srv.Close)
	return &harness{t: t, url: srv.URL}
}

func newPool(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestProbes(t *testing.T) {
	t.Parallel()
	migrated := dbtest.URL(t)
	behind := dbtest.URL(t)
	behindPool := newPool(t, behind)
	if _, err := behindPool.Exec(ctx, `DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		pool   *pgxpool.Pool
		path   string
		status int
		// want is the error code of a failure, or a part of a success's body.
		want string
	}{
		{"healthz", newPool(t, migrated), "/healthz", 200, `{"status":"ok"}`},
		{"healthz does not need the database", newPool(t, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"), "/healthz", 200, `{"status":"ok"}`},
		{"readyz on a migrated database", newPool(t, migrated), "/readyz", 200, `"status":"ready"`},
		{"readyz on an empty database", newPool(t, dbtest.EmptyURL(t)), "/readyz", 503, "migrations_pending"},
		{"readyz on a database one migration behind", behindPool, "/readyz", 503, "migrations_pending"},
		{"readyz with the database down", newPool(t, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"), "/readyz", 503, "database_unreachable"},
		{"readyz without a pool", nil, "/readyz", 503, "database_unreachable"},
		{"unknown path", nil, "/nope", 404, "not_found"},
		{"wrong method", nil, "/healthz?method=POST", 405, "method_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := probeServer(t, tc.pool)
			method, path := http.MethodGet, tc.path
			if p, ok := strings.CutSuffix(path, "?method=POST"); ok {
				method, path = http.MethodPost, p
			}
			a := h.send(method, path, "", nil)
			if a.status != tc.status {
				t.Fatalf("HTTP %d, want %d: %s", a.status, tc.status, a.body)
			}
			if tc.status >= 400 {
				if code, _ := envelope(t, a); code != tc.want {
					t.Errorf("error %q, want %q", code, tc.want)
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
