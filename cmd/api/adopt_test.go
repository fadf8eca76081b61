package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
)

// policyDoc is the documentation whose "Your own database" section the adoption test follows.
const policyDoc = "../../docs/POLICY.md"

// docBlock returns the fenced code block of docs/POLICY.md in language lang whose first line
// starts with first: the test runs what the documentation tells a user to run.
func docBlock(t *testing.T, lang, first string) string {
	t.Helper()
	b, err := os.ReadFile(policyDoc)
	if err != nil {
		t.Fatal(err)
	}
	rest := string(b)
	for {
		_, after, ok := strings.Cut(rest, "```"+lang+"\n")
		if !ok {
			t.Fatalf("%s has no ```%s block starting with %q", policyDoc, lang, first)
		}
		block, next, _ := strings.Cut(after, "```")
		if strings.HasPrefix(block, first) {
			return block
		}
		rest = next
	}
}

// sqlStatements splits a documented SQL block into its statements, one per ";" at the end of a
// line, so that CREATE INDEX CONCURRENTLY runs outside a transaction as the user would run it.
func sqlStatements(block string) []string {
	var out []string
	for _, s := range strings.SplitAfter(block, ";\n") {
		var lines []string
		for _, l := range strings.Split(s, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			out = append(out, strings.Join(lines, "\n"))
		}
	}
	return out
}

// catalogObjects lists the schemas, relations, types and functions of a database outside
// PostgreSQL's own schemas, each as "kind schema.name".
func catalogObjects(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	var objs []string
	err := pool.QueryRow(context.Background(), `
WITH ns AS (SELECT oid, nspname FROM pg_namespace WHERE nspname <> 'information_schema' AND nspname NOT LIKE 'pg\_%')
SELECT array_agg(o ORDER BY o) FROM (
    SELECT 'schema ' || nspname FROM ns
    UNION ALL SELECT 'relation ' || nspname || '.' || relname FROM pg_class JOIN ns ON ns.oid = relnamespace
    UNION ALL SELECT 'type ' || nspname || '.' || typname FROM pg_type JOIN ns ON ns.oid = typnamespace
    UNION ALL SELECT 'function ' || nspname || '.' || proname FROM pg_proc JOIN ns ON ns.oid = pronamespace
) x(o)`).Scan(&objs)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// adoption is a third-party schema and the jobs seeded into it.
type adoption struct {
	name string
	// schema is the project's own table definitions (testdata), policy the documented policy's
	// first line, and grants the first line of the documented SQL that the project's table needs.
	schema, policy, grants string
	// table is the job table, sweep the policy's route.
	table, sweep string
	passes       int
	// seed adds jobs of every state at several ages; eligible selects the ids the policy must
	// delete, written apart from the policy (the oracle).
	seed, eligible string
}

var adoptions = []adoption{
	{
		name: "River", schema: "testdata/river.sql", policy: "# river.yaml", grants: "-- river.sql",
		table: "river_job", sweep: "river-jobs", passes: 3,
		// Every state, finalized at four ages when the state is final (River's check constraint).
		seed: `INSERT INTO river_job (state, kind, args, created_at, scheduled_at, finalized_at)
SELECT s::river_job_state, 'email.send', '{"to": "a@example.com"}', now() - a - interval '1 minute', now() - a - interval '1 minute',
       CASE WHEN s IN ('cancelled', 'completed', 'discarded') THEN now() - a END
  FROM unnest(enum_range(NULL::river_job_state)::text[]) s,
       unnest(ARRAY[interval '10 minutes', interval '2 hours', interval '3 days', interval '10 days']) a,
       generate_series(1, 25)`,
		eligible: `SELECT id FROM river_job
 WHERE (state IN ('completed', 'cancelled') AND finalized_at < now() - interval '24 hours')
    OR (state = 'discarded' AND finalized_at < now() - interval '7 days')`,
	},
	{
		name: "Oban", schema: "testdata/oban.sql", policy: "# oban.yaml", grants: "-- oban.sql",
		table: "oban_jobs", sweep: "oban-jobs", passes: 3,
		// Oban writes UTC into timestamp columns; each final state sets its own *_at.
		seed: `INSERT INTO oban_jobs (state, queue, worker, args, inserted_at, scheduled_at, attempted_at, completed_at, cancelled_at, discarded_at, attempt)
SELECT s::oban_job_state, 'mailers', 'MyApp.Mailer', '{"id": 1}',
       timezone('UTC', now()) - a - interval '10 minutes', timezone('UTC', now()) - a - interval '5 minutes',
       timezone('UTC', now()) - a - interval '1 minute',
       CASE WHEN s = 'completed' THEN timezone('UTC', now()) - a END,
       CASE WHEN s = 'cancelled' THEN timezone('UTC', now()) - a END,
       CASE WHEN s = 'discarded' THEN timezone('UTC', now()) - a END,
       1
  FROM unnest(enum_range(NULL::oban_job_state)::text[]) s,
       unnest(ARRAY[interval '10 minutes', interval '2 hours', interval '3 days', interval '10 days']) a,
       generate_series(1, 25)`,
		eligible: `SELECT id FROM oban_jobs
 WHERE (state = 'completed' AND scheduled_at < timezone('UTC', now()) - interval '1 hour')
    OR (state = 'cancelled' AND cancelled_at < timezone('UTC', now()) - interval '7 days')
    OR (state = 'discarded' AND discarded_at < timezone('UTC', now()) - interval '7 days')`,
	},
}

// TestAdoption follows docs/POLICY.md, "Your own database", on a database that holds only a
// third-party schema (River's or Oban's job table as their own migrations create it, no demo
// tables): the policy is refused, naming api migrate up, until sweeprail's schema is installed;
// api migrate up adds that schema and nothing else; the documented grants, index and policy pass
// the check as the API's own role; serve boots with them, /readyz passes, and a signed run
// deletes exactly the rows an independent query calls eligible, as the dry run counted.
func TestAdoption(t *testing.T) {
	ctx := context.Background()
	for _, a := range adoptions {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			// Roles are the cluster's: a name of this test's own, dropped after the database.
			role := "sweeprail_api_" + randomHex(t)
			server, err := dbpool.NewPool(ctx, dbtest.ServerURL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				defer server.Close()
				if _, err := server.Exec(context.Background(), "DROP ROLE IF EXISTS "+role); err != nil {
					t.Errorf("drop role %s: %v", role, err)
				}
			})
			u := dbtest.EmptyURL(t)
			admin, err := dbpool.NewPool(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(admin.Close)
			exec := func(sql string) {
				t.Helper()
				if _, err := admin.Exec(ctx, sql); err != nil {
					t.Fatalf("%v\n%s", err, sql)
				}
			}
			ddl, err := os.ReadFile(a.schema)
			if err != nil {
				t.Fatal(err)
			}
			exec(string(ddl))
			exec(a.seed)
			exec("ANALYZE")
			policy := filepath.Join(t.TempDir(), "sweeps.yaml")
			if err := os.WriteFile(policy, []byte(docBlock(t, "yaml", a.policy)), 0o600); err != nil {
				t.Fatal(err)
			}
			env := func(u string) map[string]string {
				return map[string]string{"DATABASE_URL": u, "INTERNAL_SIGNING_KEY": serveKey, "SWEEP_POLICY_FILE": policy, "LISTEN_ADDR": "127.0.0.1:0"}
			}

			t.Run("before api migrate up: check and boot refused, naming it", func(t *testing.T) {
				var out, errOut bytes.Buffer
				err := run(ctx, []string{"api", "policy", "check", policy}, env(u), &out, &errOut)
				if err == nil || !strings.Contains(errOut.String(), "sweeprail's own schema is not installed (no table sweeprail.goose_db_version): run api migrate up") {
					t.Fatalf("policy check: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
				}
				bootCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				var stdout, stderr syncBuffer
				err = serve(bootCtx, nil, env(u), &stdout, &stderr)
				if err == nil || !strings.Contains(err.Error(), "run api migrate up") || strings.Contains(stdout.String(), "listening") {
					t.Fatalf("serve: %v, want a refusal naming api migrate up before listening\n%s", err, stdout.String())
				}
			})

			t.Run("api migrate up adds schema sweeprail and nothing else", func(t *testing.T) {
				before := catalogObjects(t, admin)
				var out bytes.Buffer
				if err := run(ctx, []string{"api", "migrate", "up"}, map[string]string{"DATABASE_URL": u}, &out, &out); err != nil {
					t.Fatalf("migrate up: %v\n%s", err, out.String())
				}
				after := catalogObjects(t, admin)
				var added []string
				for _, o := range after {
					if !slices.Contains(before, o) {
						added = append(added, o)
					}
				}
				for _, o := range before {
					if !slices.Contains(after, o) {
						t.Errorf("migrate up removed %s", o)
					}
				}
				if !slices.Contains(added, "schema sweeprail") || !slices.Contains(added, "relation sweeprail.sweep_lock") {
					t.Errorf("migrate up added %v, want schema sweeprail and its lease table", added)
				}
				for _, o := range added {
					if o != "schema sweeprail" && !strings.Contains(o, " sweeprail.") {
						t.Errorf("migrate up added %s, outside schema sweeprail", o)
					}
				}
			})

			// The documented grants and the project's index and grant, as its owner runs them.
			for _, block := range []string{docBlock(t, "sql", "-- grants.sql"), docBlock(t, "sql", a.grants)} {
				for _, stmt := range sqlStatements(strings.ReplaceAll(block, "sweeprail_api", role)) {
					exec(stmt)
				}
			}
			asAPI := withUser(t, u, role, "change-me")

			t.Run("api policy check as the API's role", func(t *testing.T) {
				var out, errOut bytes.Buffer
				if err := run(ctx, []string{"api", "policy", "check", policy}, env(asAPI), &out, &errOut); err != nil {
					t.Fatalf("policy check: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
				}
				if !strings.Contains(out.String(), "OK: 1 sweeps, 3 passes") || strings.Contains(out.String(), "warning") {
					t.Fatalf("policy check printed:\n%s", out.String())
				}
			})

			s := startServe(t, env(asAPI))
			if status, body := get(t, s.url+"/readyz"); status != http.StatusOK || !strings.Contains(string(body), `"status":"ready","migration":`) {
				t.Fatalf("/readyz: HTTP %d %s", status, body)
			}

			ids := func(sql string) []int64 {
				t.Helper()
				var out []int64
				if err := admin.QueryRow(ctx, "SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM ("+sql+") x").Scan(&out); err != nil {
					t.Fatalf("%v\n%s", err, sql)
				}
				return out
			}
			all := ids("SELECT id FROM " + a.table)
			eligible := ids(a.eligible)
			if len(eligible) == 0 || len(eligible) == len(all) {
				t.Fatalf("%d eligible of %d: the seed must hold both kinds", len(eligible), len(all))
			}
			route := s.url + "/internal/sweep-" + a.sweep

			t.Run("the dry run counts them, each pass index-backed", func(t *testing.T) {
				status, body := do(t, signedRequest(t, http.MethodPost, route, `{"dryRun":true}`))
				var dry struct {
					Passes []struct {
						Pass     string `json:"pass"`
						Eligible *int64 `json:"eligible"`
						Indexed  bool   `json:"indexed"`
					} `json:"passes"`
				}
				if status != http.StatusOK || json.Unmarshal(body, &dry) != nil || len(dry.Passes) != a.passes {
					t.Fatalf("dry run: HTTP %d %s", status, body)
				}
				var sum int64
				for _, p := range dry.Passes {
					if p.Eligible == nil || !p.Indexed {
						t.Errorf("pass %s: eligible %v, indexed %v", p.Pass, p.Eligible, p.Indexed)
						continue
					}
					sum += *p.Eligible
				}
				if sum != int64(len(eligible)) {
					t.Errorf("dry run counts %d, the oracle %d", sum, len(eligible))
				}
			})

			t.Run("a signed run deletes exactly the eligible jobs", func(t *testing.T) {
				status, body := do(t, signedRequest(t, http.MethodPost, route, `{}`))
				var res struct {
					Deleted    int64  `json:"deleted"`
					StopReason string `json:"stopReason"`
				}
				if status != http.StatusOK || json.Unmarshal(body, &res) != nil {
					t.Fatalf("run: HTTP %d %s", status, body)
				}
				if res.Deleted != int64(len(eligible)) || res.StopReason != "exhausted" {
					t.Errorf("run deleted %d (%s), the oracle says %d: %s", res.Deleted, res.StopReason, len(eligible), body)
				}
				kept := slices.DeleteFunc(slices.Clone(all), func(id int64) bool { return slices.Contains(eligible, id) })
				if left := ids("SELECT id FROM " + a.table); !slices.Equal(left, kept) {
					t.Errorf("%d jobs left, want exactly the %d not eligible", len(left), len(kept))
				}
				if left := ids(a.eligible); len(left) != 0 {
					t.Errorf("%d eligible jobs left", len(left))
				}
			})
		})
	}
}

func withUser(t *testing.T, u, user, password string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p.User = url.UserPassword(user, password)
	return p.String()
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
