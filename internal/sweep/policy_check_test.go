package sweep_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

func TestCheckPolicyRefuses(t *testing.T) {
	t.Parallel()
	pool := userPool(t)
	const p = `p.yaml:4: pass "p" of sweep "s": `
	tests := []struct {
		name string
		pass string
		want []string
	}{
		{"unknown table", passYAML("sesions", "expires_at"),
			[]string{`p.yaml:5: pass "p" of sweep "s": table "sesions" does not exist on the search_path (public): create it, or fix the name`}},
		{"table in another case", passYAML("Sessions", "expires_at"),
			[]string{`table "Sessions" does not exist on the search_path (public); tables of that name: sessions (names are matched exactly as written`}},
		{"table in another schema", passYAML("jobs", "finished_at"),
			[]string{`table "jobs" does not exist on the search_path (public); tables of that name: app.jobs`}},
		{"unknown schema", passYAML("ops.jobs", "finished_at"),
			[]string{`p.yaml:5: pass "p" of sweep "s": table "ops.jobs" does not exist; tables of that name: app.jobs`}},
		{"a view", passYAML("recent_sessions", "expires_at"),
			[]string{`p.yaml:5: pass "p" of sweep "s": table "recent_sessions" is a view, not a table`}},
		{"unknown column", passYAML("notifications", "read_on"),
			[]string{`p.yaml:6: pass "p" of sweep "s": column "read_on" does not exist in table "notifications" (columns: id, account_id, kind, body, created_at, read_at)`}},
		{"text age column", passYAML("notifications", "body"),
			[]string{`p.yaml:6: pass "p" of sweep "s": age column "body" of table "notifications" is text, not a timestamp or date`}},
		{"integer age column", passYAML("sessions", "id"),
			[]string{`p.yaml:6: pass "p" of sweep "s": age column "id" of table "sessions" is bigint, a number: if it holds Unix time, say in what unit with age_unit: seconds, milliseconds or microseconds`}},
		{"age_unit on a timestamptz column", passYAML("sessions", "expires_at", "age_unit: seconds"),
			[]string{`p.yaml:8: pass "p" of sweep "s": age_unit is for an integer or numeric column of Unix time, and age column "expires_at" of table "sessions" is timestamp with time zone: remove age_unit`}},
		{"unknown function", passYAML("accounts", "deletion_requested_at", "mode: per-row", "function: wipe_acount"),
			[]string{`p.yaml:9: pass "p" of sweep "s": function "wipe_acount" does not exist on the search_path: create it, or fix function`}},
		{"function in an unknown schema", passYAML("accounts", "deletion_requested_at", "mode: per-row", "function: ops.wipe_account"),
			[]string{`function "ops.wipe_account" does not exist in schema ops`}},
		{"function taking two arguments", passYAML("accounts", "deletion_requested_at", "mode: per-row", "function: purge_two"),
			[]string{`p.yaml:9: pass "p" of sweep "s": function "purge_two" does not take one argument (found: purge_two(uuid,integer))`}},
		{"function taking another type", passYAML("accounts", "deletion_requested_at", "mode: per-row", "function: purge_int"),
			[]string{`p.yaml:9: pass "p" of sweep "s": the per-row statement does not compile: function purge_int(uuid) does not exist (SQLSTATE 42883)`}},
		{"unknown key column", passYAML("accounts", "deletion_requested_at", "mode: per-row", "function: wipe_account", "key_column: account_id"),
			[]string{`p.yaml:10: pass "p" of sweep "s": key column "account_id" does not exist in table "accounts"`}},
		{"unknown guard table", passYAML("outbox_events", "dispatched_at", "keep_while_referenced_by:", "  - {table: deliveries, column: outbox_event_id}"),
			[]string{`p.yaml:9: pass "p" of sweep "s": keep guard table "deliveries" does not exist on the search_path (public)`}},
		{"unknown guard column", passYAML("outbox_events", "dispatched_at", "keep_while_referenced_by:", "  - table: webhook_deliveries", "    column: event_id"),
			[]string{`p.yaml:10: pass "p" of sweep "s": keep guard column "event_id" does not exist in table "webhook_deliveries" (columns: id, outbox_event_id,`}},
		{"unknown guard reference", passYAML("outbox_events", "dispatched_at", "keep_while_referenced_by:", "  - table: webhook_deliveries", "    column: outbox_event_id", "    references: event_id"),
			[]string{`p.yaml:11: pass "p" of sweep "s": keep guard references column "event_id", which does not exist in table "outbox_events"`}},
		{"guard of another type", passYAML("email_messages", "created_at", "keep_while_referenced_by:", "  - {table: notifications, column: account_id}"),
			[]string{`p.yaml:9: pass "p" of sweep "s": keep guard notifications.account_id = email_messages.id does not compile: operator does not exist: uuid = bigint (SQLSTATE 42883)`}},
		// Conditions that write or change the session, even in a dry run.
		{"condition calling a writing function", passYAML("notifications", "read_at", "where: (SELECT count(*) FROM accounts a WHERE wipe_account(a.id)) >= 0"),
			[]string{`p.yaml:8: pass "p" of sweep "s": the condition calls VOLATILE wipe_account`}},
		{"condition changing the session", passYAML("notifications", "read_at", "where: set_config('default_transaction_read_only', 'on', false) IS NOT NULL"),
			[]string{`p.yaml:8: pass "p" of sweep "s": the condition calls VOLATILE set_config`}},
		{"condition does not compile", passYAML("notifications", "read_at", "where: t.read_at IS NOT NULL AND t.stauts = 'read'"),
			[]string{`p.yaml:8: pass "p" of sweep "s": the condition does not compile: column t.stauts does not exist (SQLSTATE 42703) at "t.stauts = 'read'"`}},
		{"condition with a syntax error", passYAML("notifications", "read_at", "where: t.kind = = 'x'"),
			[]string{`p.yaml:8: pass "p" of sweep "s": the condition does not compile: syntax error at or near "=" (SQLSTATE 42601) at "= 'x'"`}},
		{"condition cut short", passYAML("notifications", "read_at", "where: t.kind ="),
			[]string{`the condition does not compile: syntax error at or near ")" (SQLSTATE 42601) at the end of the condition`}},
		{"condition not a boolean", passYAML("notifications", "read_at", "where: t.kind"),
			[]string{`p.yaml:8: pass "p" of sweep "s": the condition does not compile: argument of WHERE must be type boolean, not type text`}},
		{"condition naming the table", passYAML("notifications", "read_at", "where: notifications.kind = 'x'"),
			[]string{`the condition does not compile: invalid reference to FROM-clause entry for table "notifications"`, `hint: Perhaps you meant to reference the table alias "t".`}},
		{"unindexed", passYAML("sessions_unindexed", "expires_at"),
			[]string{p + `no index serves the batch select, so every batch would read all of table "sessions_unindexed": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON sessions_unindexed (expires_at);`}},
		{"unindexed with a condition", passYAML("inbox", "read_at", "where: t.read_at IS NOT NULL"),
			[]string{p + `no index serves the batch select`, `: CREATE INDEX CONCURRENTLY ON inbox (read_at) WHERE read_at IS NOT NULL;`}},
		{"unindexed in another schema", passYAML("app.jobs", "finished_at", "where: t.state = 'cancelled' OR t.state = 'done'"),
			[]string{`no index serves the batch select, so every batch would read all of table "app.jobs"`, `(a partial index matching more of the condition would be smaller; only its simple parts are shown) CREATE INDEX CONCURRENTLY ON app.jobs (finished_at);`}},
		// The planner reads the partial index whole (a bitmap index scan with no condition): every
		// archived task, however young, on every batch.
		{"a partial index that ignores the age", passYAML("tasks", "updated_at", "where: t.state = 'archived'"),
			[]string{p + `no index serves the batch select`, `: CREATE INDEX CONCURRENTLY ON tasks (updated_at) WHERE state = 'archived';`}},
		// With sequential scans off, the planner reads orders through its primary key, whole, in
		// the anti-join's order: an index scan with no condition, no better than a sequential one.
		{"only the primary key", passYAML("orders", "placed_at", "keep_while_referenced_by:", "  - {table: order_lines, column: order_id}"),
			[]string{p + `no index serves the batch select, so every batch would read all of table "orders"`, `: CREATE INDEX CONCURRENTLY ON orders (placed_at);`}},
		{"unindexed guard", passYAML("app.jobs", "finished_at", "where: t.state IN ('done', 'failed')", "keep_while_referenced_by:", "  - {table: app.job_tags, column: job_id}"),
			[]string{p + `no index serves the keep guard on app.job_tags.job_id, so every batch would read all of table "app.job_tags"`, `: CREATE INDEX CONCURRENTLY ON app.job_tags (job_id);`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			warnings, err := checkYAML(t, pool, policyYAML(tt.pass))
			if err == nil {
				t.Fatalf("accepted (warnings %q):\n%s", warnings, tt.pass)
			}
			var pe *policy.Error
			if !errorsAs(err, &pe) {
				t.Errorf("error %T is no *policy.Error: %v", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain\n  %s\ngot\n  %v", w, err)
				}
			}
		})
	}

	// Specs built in Go skip LoadPolicy; CheckPolicy repeats its guard of the condition's shape
	// before anything reaches the server, and nothing of the condition runs.
	t.Run("a condition that tries to end the statement", func(t *testing.T) {
		for _, where := range []string{"true; DROP TABLE x", "true); DROP TABLE x; SELECT (1"} {
			specs := []policy.Spec{{Name: "s", Passes: []policy.Pass{{Name: "p", Table: "sessions", AgeColumn: "expires_at", Retention: time.Hour, Where: where}}}}
			_, err := check.Specs(ctx, pool, specs)
			if err == nil || !strings.Contains(err.Error(), `pass "p" of sweep "s": where: ';' is refused`) {
				t.Errorf("where %q: err = %v, want the ';' refused", where, err)
			}
			if _, err := policy.Load("p.yaml", []byte(policyYAML(passYAML("sessions", "expires_at", "where: "+where)))); err == nil || !strings.Contains(err.Error(), "';' is refused") {
				t.Errorf("where %q: LoadPolicy err = %v, want the ';' refused", where, err)
			}
			if !tableExists(t, pool, "x") {
				t.Fatalf("where %q: table x is gone", where)
			}
		}
	})
	t.Run("a condition that escapes its parentheses", func(t *testing.T) {
		specs := []policy.Spec{{Name: "s", Passes: []policy.Pass{{Name: "p", Table: "sessions", AgeColumn: "expires_at", Retention: time.Hour, Where: "true) OR (true"}}}}
		_, err := check.Specs(ctx, pool, specs)
		if err == nil || !strings.Contains(err.Error(), "a ')' closes a parenthesis the condition did not open") {
			t.Fatalf("err = %v, want the stray ')' refused", err)
		}
	})
	t.Run("every problem at once", func(t *testing.T) {
		_, err := checkYAML(t, pool, "sweeps:\n  - name: s\n    passes:\n"+
			passYAML("sesions", "expires_at")+
			strings.Replace(passYAML("notifications", "read_on"), "name: p", "name: q", 1)+
			strings.Replace(passYAML("sessions_unindexed", "expires_at"), "name: p", "name: r", 1))
		if err == nil {
			t.Fatal("accepted")
		}
		for _, w := range []string{`p.yaml:5: pass "p"`, `p.yaml:10: pass "q"`, `p.yaml:12: pass "r"`} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error does not contain %q:\n%v", w, err)
			}
		}
	})
}

func errorsAs(err error, target **policy.Error) bool {
	for _, e := range unwrapAll(err) {
		if pe, ok := e.(*policy.Error); ok {
			*target = pe
			return true
		}
	}
	return false
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestCheckPolicyAccepts(t *testing.T) {
	t.Parallel()
	pool := userPool(t)

	t.Run("the bundled policy on the reference schema", func(t *testing.T) {
		warnings, err := check.Policy(ctx, pool, policy.Default())
		if err != nil || len(warnings) > 0 {
			t.Fatalf("warnings %q, err %v", warnings, err)
		}
		if warnings, err := check.Specs(ctx, pool, policy.Catalog()); err != nil || len(warnings) > 0 {
			t.Fatalf("CheckPolicy(Catalog()): warnings %q, err %v", warnings, err)
		}
	})
	t.Run("a user's policy", func(t *testing.T) {
		warnings, err := checkYAML(t, pool, `sweeps:
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
        batch_size: 500
        keep_while_referenced_by:
          - table: app.job_logs
            column: job_id
      - name: stale
        table: app.jobs
        age_column: queued_on
        retention: 90d
        mode: single
        delete_with:
          - table: app.job_logs
            column: job_id
  - name: erasure
    passes:
      - name: requested
        table: public.accounts
        age_column: deletion_requested_at
        where: t.deleted_at IS NULL
        retention: 30d
        mode: per-row
        function: public.wipe_account
`)
		if err != nil || len(warnings) > 0 {
			t.Fatalf("warnings %q, err %v", warnings, err)
		}
	})
	t.Run("an unindexed pass with allow_unindexed", func(t *testing.T) {
		warnings, err := checkYAML(t, pool, policyYAML(passYAML("sessions_unindexed", "expires_at", "allow_unindexed: true")))
		if err != nil {
			t.Fatal(err)
		}
		want := `p.yaml:8: pass "p" of sweep "s": no index serves the batch select, so every batch would read all of table "sessions_unindexed" (allowed by allow_unindexed); the index that would serve it: CREATE INDEX CONCURRENTLY ON sessions_unindexed (expires_at);`
		if len(warnings) != 1 || warnings[0] != want {
			t.Fatalf("warnings = %q, want [%q]", warnings, want)
		}
	})
}

// TestCheckPolicyMissingIndex drops the index of a bundled pass, and checks that the check names
// it and that the statement it suggests is the fix.
func TestCheckPolicyMissingIndex(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	exec(t, pool, "DROP INDEX notifications_read_at")
	pol := policy.Default()
	_, err := check.Policy(ctx, pool, pol)
	want := `catalog.yaml:66: pass "read" of sweep "notifications": no index serves the batch select, so every batch would read all of table "notifications": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON notifications (read_at) WHERE read_at IS NOT NULL;`
	if err == nil || err.Error() != want {
		t.Fatalf("err =\n  %v\nwant\n  %s", err, want)
	}
	fix := err.Error()[strings.Index(err.Error(), "CREATE INDEX"):]
	exec(t, pool, fix)
	if warnings, err := check.Policy(ctx, pool, pol); err != nil || len(warnings) > 0 {
		t.Fatalf("after %s: warnings %q, err %v", fix, warnings, err)
	}
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
