package sweep_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// userSchema adds, next to the reference schema, tables such as a team adopting sweeprail has.
const userSchema = `
CREATE TABLE sessions (id bigserial PRIMARY KEY, user_name text NOT NULL, expires_at timestamptz NOT NULL);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
CREATE TABLE sessions_unindexed (id bigserial PRIMARY KEY, expires_at timestamptz NOT NULL);
CREATE TABLE inbox (id bigserial PRIMARY KEY, body text, read_at timestamptz);
CREATE SCHEMA app;
CREATE TABLE app.jobs (id bigserial PRIMARY KEY, state text NOT NULL, finished_at timestamptz, queued_on date NOT NULL DEFAULT current_date);
CREATE INDEX jobs_finished_at_done ON app.jobs (finished_at) WHERE state IN ('done', 'failed');
CREATE INDEX jobs_queued_on ON app.jobs (queued_on);
CREATE TABLE app.job_logs (id bigserial PRIMARY KEY, job_id bigint NOT NULL REFERENCES app.jobs (id), line text);
CREATE INDEX job_logs_job_id ON app.job_logs (job_id);
CREATE TABLE app.job_tags (job_id bigint NOT NULL, tag text);
CREATE TABLE tasks (id bigserial PRIMARY KEY, state text NOT NULL, updated_at timestamptz NOT NULL);
CREATE INDEX tasks_archived ON tasks (id) WHERE state = 'archived';
CREATE TABLE orders (id bigserial PRIMARY KEY, placed_at timestamptz NOT NULL);
CREATE TABLE order_lines (id bigserial PRIMARY KEY, order_id bigint NOT NULL REFERENCES orders (id));
CREATE INDEX order_lines_order_id ON order_lines (order_id);
CREATE VIEW recent_sessions AS SELECT * FROM sessions;
CREATE TABLE x (id int);
CREATE FUNCTION purge_two(a uuid, b int) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION purge_int(a int) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
`

// policy wraps one pass (its keys indented for a pass) into a one-sweep policy; the pass starts
// on line 4, its keys on lines 4 to 7 in the order name, table, age_column, retention.
func policyYAML(pass string) string {
	return "sweeps:\n  - name: s\n    passes:\n" + pass
}

func passYAML(table, ageColumn string, extra ...string) string {
	s := "      - name: p\n        table: " + table + "\n        age_column: " + ageColumn + "\n        retention: 30d\n"
	for _, e := range extra {
		s += "        " + e + "\n"
	}
	return s
}

func userPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := dbtest.Pool(t)
	exec(t, pool, userSchema)
	return pool
}

func checkYAML(t *testing.T, pool *pgxpool.Pool, yaml string) ([]string, error) {
	t.Helper()
	pol, err := policy.Load("p.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("load: %v\n%s", err, yaml)
	}
	return check.Policy(ctx, pool, pol)
}

func tableExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestPolicyEndToEnd: a table of the user's, a policy file written here, a Runner built from what
// LoadPolicyFile returns; a run deletes exactly the eligible rows.
func TestPolicyEndToEnd(t *testing.T) {
	t.Parallel()
	pool := userPool(t)
	at := dbNow(t, pool)
	exec(t, pool, `
INSERT INTO sessions (user_name, expires_at) VALUES
 ('del:expired-2d',     $1::timestamptz - interval '2 days'),
 ('del:expired-1d-1s',  $1::timestamptz - interval '1 day' - interval '1 second'),
 ('keep:boundary',      $1::timestamptz - interval '1 day'),
 ('keep:expired-1h',    $1::timestamptz - interval '1 hour'),
 ('keep:live',          $1::timestamptz + interval '7 days')`, at)
	exec(t, pool, `
WITH j AS (
  INSERT INTO app.jobs (state, finished_at) VALUES
   ('done',    $1::timestamptz - interval '8 days'),
   ('failed',  $1::timestamptz - interval '30 days'),
   ('done',    $1::timestamptz - interval '9 days'),
   ('done',    $1::timestamptz - interval '1 day'),
   ('running', NULL),
   ('queued',  $1::timestamptz - interval '60 days')
  RETURNING id, state, finished_at)
INSERT INTO app.job_logs (job_id, line)
SELECT id, 'log' FROM j WHERE state = 'done' AND finished_at = $1::timestamptz - interval '9 days'`, at)

	path := filepath.Join(t.TempDir(), "sweeps.yaml")
	if err := os.WriteFile(path, []byte(`sweeps:
  - name: expired-sessions
    passes:
      - name: expired
        table: sessions
        age_column: expires_at
        retention: 1d
  - name: finished-jobs
    passes:
      - name: finished
        table: app.jobs
        age_column: finished_at
        where: t.state IN ('done', 'failed')
        retention: 7d
        keep_while_referenced_by:
          - {table: app.job_logs, column: job_id}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if warnings, err := check.Policy(ctx, pool, pol); err != nil || len(warnings) > 0 {
		t.Fatalf("check: warnings %q, err %v", warnings, err)
	}
	r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings(), AsOf: fixedAsOf(at)})

	sessions := func() []string {
		rows, err := pool.Query(ctx, "SELECT user_name FROM sessions ORDER BY user_name")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	res := run(t, r, "expired-sessions")
	if got, want := sessions(), []string{"keep:boundary", "keep:expired-1h", "keep:live"}; !slices.Equal(got, want) {
		t.Errorf("sessions left = %v, want %v", got, want)
	}
	if res.Deleted != 2 || res.StopReason != wire.StopExhausted || res.Error != nil {
		t.Errorf("sessions run: deleted %d, stop %s, error %+v; want 2, exhausted", res.Deleted, res.StopReason, res.Error)
	}

	res = run(t, r, "finished-jobs")
	// Gone: done 8d and failed 30d. Kept: done 9d (a log references it), done 1d, running, queued.
	if n := count(t, pool, "SELECT count(*) FROM app.jobs"); n != 4 || res.Deleted != 2 || res.Error != nil {
		t.Errorf("jobs left %d after deleting %d (error %+v); want 4 left, 2 deleted", n, res.Deleted, res.Error)
	}
	if n := count(t, pool, "SELECT count(*) FROM app.jobs WHERE state = 'done' AND finished_at < $1::timestamptz - interval '7 days'", at); n != 1 {
		t.Errorf("%d referenced old jobs left, want the 1 with a log", n)
	}
}

// docBlock is one fenced block of docs/POLICY.md.
type docBlock struct{ lang, text string }

// policyDoc returns the fenced blocks of docs/POLICY.md's section titled section.
func policyDoc(t *testing.T, section string) []docBlock {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "POLICY.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "\n## "+section+"\n")
	if start < 0 {
		t.Fatalf("docs/POLICY.md has no section %q", section)
	}
	doc = doc[start+1:]
	if end := strings.Index(doc[3:], "\n## "); end >= 0 {
		doc = doc[:end+3]
	}
	var blocks []docBlock
	for {
		open := strings.Index(doc, "```")
		if open < 0 {
			return blocks
		}
		nl := strings.Index(doc[open:], "\n") + open
		end := strings.Index(doc[nl:], "\n```") + nl
		blocks = append(blocks, docBlock{lang: doc[open+3 : nl], text: doc[nl+1 : end+1]})
		doc = doc[end+4:]
	}
}

// runDocSQL runs a sql block of the docs: CREATE INDEX CONCURRENTLY lines alone (they cannot run
// in the implicit transaction of a multi-statement string), after the rest; withIndexes false
// leaves them out.
func runDocSQL(t *testing.T, pool *pgxpool.Pool, sql string, withIndexes bool) {
	t.Helper()
	var rest, indexes []string
	for _, line := range strings.Split(sql, "\n") {
		if strings.HasPrefix(line, "CREATE INDEX CONCURRENTLY") {
			indexes = append(indexes, line)
		} else {
			rest = append(rest, line)
		}
	}
	exec(t, pool, strings.Join(rest, "\n"))
	if withIndexes {
		for _, ix := range indexes {
			exec(t, pool, ix)
		}
	}
}

// TestPolicyDocs keeps docs/POLICY.md true: its worked examples pass the check on their own
// schema, and the outputs it shows for missing indexes are what the check prints.
func TestPolicyDocs(t *testing.T) {
	t.Parallel()
	examples := policyDoc(t, "Three worked examples")
	var sqls, policies []string
	for _, b := range examples {
		switch b.lang {
		case "sql":
			sqls = append(sqls, b.text)
		case "yaml":
			policies = append(policies, b.text)
		}
	}
	if len(sqls) != 3 || len(policies) != 3 {
		t.Fatalf("%d sql and %d yaml blocks in the worked examples, want 3 each", len(sqls), len(policies))
	}
	t.Run("the worked examples pass", func(t *testing.T) {
		pool := dbtest.Pool(t)
		for _, sql := range sqls {
			runDocSQL(t, pool, sql, true)
		}
		for i, p := range policies {
			if warnings, err := checkYAML(t, pool, p); err != nil || len(warnings) > 0 {
				t.Errorf("example %d: warnings %q, err %v", i+1, warnings, err)
			}
		}
	})

	var outputs []string
	for _, b := range policyDoc(t, "Checking a policy") {
		if b.lang == "text" {
			outputs = append(outputs, b.text)
		}
	}
	if len(outputs) != 2 {
		t.Fatalf("%d text blocks in Checking a policy, want 2 (the missing index, the warning)", len(outputs))
	}
	t.Run("the missing-index output", func(t *testing.T) {
		pool := dbtest.Pool(t)
		runDocSQL(t, pool, sqls[1], false)
		pol, err := policy.Load("sweeps.yaml", []byte(policies[1]))
		if err != nil {
			t.Fatal(err)
		}
		_, err = check.Policy(ctx, pool, pol)
		lines := strings.Split(strings.TrimSpace(outputs[0]), "\n")
		want := strings.Join(lines[1:len(lines)-1], "\n") // without the command and the exit line
		if err == nil || err.Error() != want {
			t.Fatalf("the check says\n%v\nthe docs say\n%s", err, want)
		}
	})
	t.Run("the allow_unindexed warning", func(t *testing.T) {
		pool := dbtest.Pool(t)
		runDocSQL(t, pool, sqls[0], false)
		pol, err := policy.Load("sweeps.yaml", []byte(policies[0]+"        allow_unindexed: true\n"))
		if err != nil {
			t.Fatal(err)
		}
		warnings, err := check.Policy(ctx, pool, pol)
		want := strings.TrimPrefix(strings.TrimSpace(outputs[1]), "warning: ")
		if err != nil || len(warnings) != 1 || warnings[0] != want {
			t.Fatalf("the check says %q, %v\nthe docs say %q", warnings, err, want)
		}
	})
}
