package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

const e2eKey = "e2e-signing-key-0123456789abcdef0123456789"

// realAPI serves the real httpapi over a fresh migrated database, with the real runner and
// verifier. Its budget is 2s and its write timeout 10s.
func realAPI(t *testing.T) (*pgxpool.Pool, *httptest.Server) {
	t.Helper()
	pool := dbtest.Pool(t)
	settings := sweep.Settings{
		Deadline: 2 * time.Second, StatementTimeout: 8 * time.Second, LockTimeout: 2 * time.Second,
		CountTimeout: 5 * time.Second, BatchSize: 100, MinBatchSize: 100, MaxBatchSize: 100,
		BatchTarget: 100 * time.Millisecond, MaxBatches: 1000,
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	runs := history.New(pool, history.DefaultRetention)
	runner, err := sweep.NewRunner(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings, Logger: logger, History: runs})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.NewServer(httpapi.Deps{
		Logger: logger, Runner: runner, History: runs, Pool: pool,
		Verifier: signing.NewVerifier([][]byte{[]byte(e2eKey)}, time.Minute, time.Now, 10000),
		Bounds:   httpapi.Bounds{ServerWriteTimeout: 10 * time.Second, SignatureMaxAge: time.Minute, ShutdownGrace: 15 * time.Second},
	}))
	t.Cleanup(srv.Close)
	return pool, srv
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
}

// TestEndToEnd runs sweepcron against the real API and database with three routes set up to go
// wrong in three different ways; every route is called and reported with its own category.
func TestEndToEnd(t *testing.T) {
	pool, srv := realAPI(t)
	// outbox: an eligible event referenced from a table its keep guard does not know → batch-error.
	mustExec(t, pool, `CREATE TABLE invoices (id bigint PRIMARY KEY, outbox_event_id bigint NOT NULL REFERENCES outbox_events (id))`)
	mustExec(t, pool, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, dispatched_at)
		VALUES ('order', 'o1', 'order.paid', now() - interval '30 days')`)
	mustExec(t, pool, `INSERT INTO invoices SELECT 1, id FROM outbox_events`)
	// notifications: its lease held by another run → skipped.
	mustExec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'e2e@example.com')`)
	mustExec(t, pool, `INSERT INTO notifications (account_id, kind, read_at)
		SELECT '00000000-0000-0000-0000-000000000001', 'mention', now() - interval '60 days' FROM generate_series(1, 10)`)
	mustExec(t, pool, `INSERT INTO sweeprail.sweep_lock VALUES ('notifications', gen_random_uuid(), now(), now() + interval '1 hour')`)
	// audit-log: a backlog whose first batch outlasts the 2s budget (each delete sleeps 30ms, a
	// batch is 100 rows) → budget, truncated. A lower bound on time, so it does not flake.
	mustExec(t, pool, `INSERT INTO audit_log (action, retention_bucket, occurred_at)
		SELECT 'LOGIN', 'operational', now() - interval '100 days' FROM generate_series(1, 150)`)
	mustExec(t, pool, `CREATE FUNCTION slow_delete() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(0.03); RETURN OLD; END $$`)
	mustExec(t, pool, `CREATE TRIGGER slow_delete BEFORE DELETE ON audit_log FOR EACH ROW EXECUTE FUNCTION slow_delete()`)

	env := map[string]string{"API_URL": srv.URL, "INTERNAL_SIGNING_KEY": e2eKey, "INTERNAL_FETCH_TIMEOUT": "30s"}
	code, stdout, stderr, err := runCron(t, t.Context(), env, "--json")
	if code != exitFailed {
		t.Fatalf("exit = %d (%v), want %d\nstdout: %s\nstderr: %s", code, err, exitFailed, stdout, stderr)
	}
	var report struct {
		Routes []struct {
			Sweep    string `json:"sweep"`
			Category string `json:"category"`
		} `json:"routes"`
	}
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	got := map[string]string{}
	for _, r := range report.Routes {
		got[r.Sweep] = r.Category
	}
	want := map[string]string{
		"outbox": "batch-error", "notifications": "skipped", "audit-log": "truncated",
		"email-messages": "ok", "webhook-deliveries": "ok", "consents": "ok",
		"refresh-tokens": "ok", "idempotency-records": "ok", "account-erasure": "ok",
	}
	for name, cat := range want {
		if got[name] != cat {
			t.Errorf("%s: category %q, want %q", name, got[name], cat)
		}
	}
	if len(got) != len(policy.Catalog()) {
		t.Errorf("%d routes reported, want every one of the catalog's %d:\n%s", len(got), len(policy.Catalog()), stdout)
	}

	t.Run("history prints the runs the API recorded", func(t *testing.T) {
		code, stdout, stderr, err := runCron(t, t.Context(), env, "history", "--sweep", "outbox")
		if code != 0 {
			t.Fatalf("history: exit %d (%v)\n%s", code, err, stderr)
		}
		table, verdicts, _ := strings.Cut(stdout, "\n\n")
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(lines) != 3 || !strings.Contains(lines[1], "outbox") || !strings.Contains(lines[1], "batch-error") ||
			!strings.Contains(lines[2], "error 23503") {
			t.Fatalf("history --sweep outbox:\n%s", stdout)
		}
		// The retention verdicts follow, as GET /internal/sweeps judges them.
		if !strings.Contains(verdicts, "retention: ") || !strings.Contains(verdicts, "outbox  failing") {
			t.Fatalf("history --sweep outbox: verdicts:\n%s", verdicts)
		}
		code, stdout, _, _ = runCron(t, t.Context(), env, "history", "--limit", "100")
		if code != 0 || strings.Count(stdout, "\n") < len(policy.Catalog())+1 || !strings.Contains(stdout, "lease-held") {
			t.Fatalf("history: every route of the tick, the skipped one included:\n%s", stdout)
		}
	})

	t.Run("fetch timeout not above the write timeout", func(t *testing.T) {
		for _, fetch := range []string{"10s", "5s"} {
			env := map[string]string{"API_URL": srv.URL, "INTERNAL_SIGNING_KEY": e2eKey, "INTERNAL_FETCH_TIMEOUT": fetch}
			code, _, stderr, err := runCron(t, t.Context(), env)
			if code != exitConfig || !strings.Contains(err.Error(), "INTERNAL_FETCH_TIMEOUT="+fetch) {
				t.Fatalf("fetch %s: exit %d (%v), want %d naming the value\n%s", fetch, code, err, exitConfig, stderr)
			}
		}
	})
}

// TestCronRecipe follows the hand-signing recipe of docs/CRON.md literally in a shell, against the
// real API, and expects a 200 dry-run answer: the documentation is tested, not trusted.
func TestCronRecipe(t *testing.T) {
	for _, tool := range []string{"bash", "openssl", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing under CI=true", tool)
			}
			t.Skipf("%s is missing", tool)
		}
	}
	doc, err := os.ReadFile("../../docs/CRON.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)## Signing a request by hand.*?```sh\n(.*?)```").FindSubmatch(doc)
	if blocks == nil {
		t.Fatal("docs/CRON.md has no ```sh block under \"Signing a request by hand\"")
	}
	recipe := string(blocks[1])
	_, srv := realAPI(t)
	// Only the two placeholders change; every other line runs as written.
	for old, new := range map[string]string{
		"KEY='your INTERNAL_SIGNING_KEY'": "KEY='" + e2eKey + "'",
		"API=http://127.0.0.1:8080":       "API=" + srv.URL,
	} {
		if !strings.Contains(recipe, old) {
			t.Fatalf("recipe lost its placeholder line %q", old)
		}
		recipe = strings.Replace(recipe, old, new, 1)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", recipe+"\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("recipe failed: %v\n%s", err, out)
	}
	var answer struct {
		Sweep  string `json:"sweep"`
		DryRun bool   `json:"dryRun"`
		Passes []struct {
			Eligible *int64 `json:"eligible"`
		} `json:"passes"`
	}
	if err := json.Unmarshal(out, &answer); err != nil || answer.Sweep != "notifications" || !answer.DryRun || len(answer.Passes) != 1 {
		t.Fatalf("recipe's answer is not the dry run of notifications (%v):\n%s", err, out)
	}
}
