package check_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/policy"
)

// TestPolicyAccepts checks that the bundled policy and a user's policy over several schemas,
// modes, guards and children pass with no warning.
func TestPolicyAccepts(t *testing.T) {
	t.Parallel()
	pool := fixturePool(t, checkSchema)
	t.Run("the bundled policy on the reference schema", func(t *testing.T) {
		t.Parallel()
		if warnings, err := check.Policy(ctx, pool, policy.Default()); err != nil || len(warnings) > 0 {
			t.Fatalf("Policy(Default()): warnings %q, err %v", warnings, err)
		}
		if warnings, err := check.Specs(ctx, pool, policy.Catalog()); err != nil || len(warnings) > 0 {
			t.Fatalf("Specs(Catalog()): warnings %q, err %v", warnings, err)
		}
	})
	t.Run("a user's policy", func(t *testing.T) {
		t.Parallel()
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
}

// TestPolicyStatic checks that specs built in Go, which skip policy.Load, meet its guards of a
// condition's shape before anything of it reaches the server.
func TestPolicyStatic(t *testing.T) {
	t.Parallel()
	pool := fixturePool(t, checkSchema)
	const semicolon = `pass "p" of sweep "s": where: ';' is refused: a condition cannot end our statement and start another`
	const paren = `pass "p" of sweep "s": where: a ')' closes a parenthesis the condition did not open: the condition is wrapped in parentheses and ANDed with the age test, and escaping them (true) OR (true) would widen the delete to every row`
	for _, tt := range []struct {
		name, where string
		want        []string
	}{
		{"a condition that ends the statement", "true; DROP TABLE x", []string{semicolon}},
		{"a condition that ends its parentheses and the statement", "true); DROP TABLE x; SELECT (1", []string{paren, semicolon}},
		{"a condition that escapes its parentheses", "true) OR (true", []string{paren}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			specs := []policy.Spec{{Name: "s", Passes: []policy.Pass{{Name: "p", Table: "sessions", AgeColumn: "expires_at", Retention: time.Hour, Where: tt.where}}}}
			_, err := check.Specs(ctx, pool, specs)
			sameLines(t, "refusals", refusals(err), tt.want)
		})
	}
	t.Cleanup(func() { // after the subtests
		var ok bool
		if err := pool.QueryRow(ctx, "SELECT to_regclass('x') IS NOT NULL").Scan(&ok); err != nil || !ok {
			t.Errorf("table x is gone (%v)", err)
		}
	})
}

// sizeRE matches the estimated size an index suggestion starts with once its table is analyzed.
var sizeRE = regexp.MustCompile(`\(about [0-9]+ [a-zA-Z]+ by the planner's statistics\) `)

// TestPolicyIndexFix checks that the index a refusal suggests is the fix: created, the policy
// passes.
func TestPolicyIndexFix(t *testing.T) {
	t.Parallel()
	t.Run("a bundled pass's index dropped", func(t *testing.T) {
		t.Parallel()
		pool := fixturePool(t, "DROP INDEX notifications_read_at")
		_, err := check.Policy(ctx, pool, policy.Default())
		sameLines(t, "refusals", refusals(err), []string{
			`catalog.yaml:66: pass "read" of sweep "notifications": no index serves the batch select, so every batch would read all of table "notifications": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON notifications (read_at) WHERE read_at IS NOT NULL;`,
		})
		fixed(t, pool, err, func() error { _, err := check.Policy(ctx, pool, policy.Default()); return err })
	})
	t.Run("one index partial on what two passes share", func(t *testing.T) {
		t.Parallel()
		pool := fixturePool(t, checkSchema)
		yaml := refusalCase{}
		for _, c := range refusalCases {
			if c.name == "one age index partial on what two passes share" {
				yaml = c
			}
		}
		_, err := checkYAML(t, pool, yaml.yaml)
		sameLines(t, "refusals", refusals(err), yaml.want)
		fixed(t, pool, err, func() error { _, err := checkYAML(t, pool, yaml.yaml); return err })
	})
	t.Run("every keep guard's lookup", func(t *testing.T) {
		t.Parallel()
		pool := fixturePool(t, `
CREATE TABLE ops (id bigint PRIMARY KEY, expires_at timestamptz NOT NULL);
CREATE INDEX ops_expires_at ON ops (expires_at);
CREATE TABLE attempts (op_id bigint NOT NULL, state text NOT NULL, expires_at timestamptz NOT NULL);
CREATE INDEX attempts_op_id ON attempts (op_id);
CREATE TABLE jobs (op_id bigint, state text NOT NULL);
CREATE TABLE notices (op_id bigint NOT NULL, state text NOT NULL);
CREATE INDEX notices_op_id ON notices (op_id);`)
		const yaml = `sweeps:
  - name: ops
    passes:
      - name: expired
        table: ops
        age_column: expires_at
        expiry: true
        retention: 30d
        keep_while_referenced_by:
          - table: attempts
            column: op_id
            where: g.state IN ('reserved', 'authorized') OR g.expires_at >= :cutoff
          - table: jobs
            column: op_id
            where: g.state = 'runnable'
          - table: notices
            column: op_id
            where: g.state = 'pending'
`
		want := []string{`p.yaml:4: pass "expired" of sweep "ops": no index serves the keep guard on jobs.op_id where g.state = 'runnable', so every batch would read all of table "jobs": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON jobs (op_id) WHERE state = 'runnable';`}
		refused := func(why string) error {
			t.Helper()
			_, err := checkYAML(t, pool, yaml)
			// Once the table is analyzed, the suggestion also gives its estimated size.
			var got []string
			for _, r := range refusals(err) {
				got = append(got, sizeRE.ReplaceAllString(r, ""))
			}
			sameLines(t, why, got, want)
			return err
		}
		refused("no index")
		exec(t, pool, `CREATE INDEX jobs_done ON jobs (op_id) WHERE state = 'done'`)
		refused("a partial index the where does not imply")
		exec(t, pool, `CREATE INDEX jobs_state_op_id ON jobs (state, op_id)`)
		refused("an index on the guard column second")
		exec(t, pool, `ANALYZE jobs`)
		err := refused("the same after ANALYZE")
		fixed(t, pool, err, func() error { _, err := checkYAML(t, pool, yaml); return err })

		// A plain index on the guard column serves any where.
		exec(t, pool, `DROP INDEX attempts_op_id`)
		_, err = checkYAML(t, pool, yaml)
		sameLines(t, "without the attempts index", refusals(err), []string{
			`p.yaml:4: pass "expired" of sweep "ops": no index serves the keep guard on attempts.op_id where g.state IN ('reserved', 'authorized') OR g.expires_at >= :cutoff, so every batch would read all of table "attempts": create the index, or set allow_unindexed: true for a table that stays small: (a partial index matching more of the condition would be smaller; only its simple parts are shown) CREATE INDEX CONCURRENTLY ON attempts (op_id);`,
		})
	})
}

// fixed runs the first CREATE INDEX CONCURRENTLY that refused suggests, and fails t unless check, run
// again, refuses nothing.
func fixed(t *testing.T, pool *pgxpool.Pool, refused error, check func() error) {
	t.Helper()
	if refused == nil {
		t.Fatal("nothing refused, nothing to fix")
	}
	msg := refused.Error()
	fix := msg[strings.Index(msg, "CREATE INDEX CONCURRENTLY"):]
	fix = fix[:strings.Index(fix, ";")+1]
	exec(t, pool, fix)
	if err := check(); err != nil {
		t.Fatalf("after %s: %v", fix, err)
	}
}

// TestIndexAdviceStatistics makes a suggestion partial where the planner's statistics say the
// column is mostly NULL, and gives each suggestion's estimated size once the table is analyzed.
func TestIndexAdviceStatistics(t *testing.T) {
	t.Parallel()
	// 70% of the rows were never read: their read_at is NULL.
	pool := fixturePool(t, `CREATE TABLE inbox_items (id bigserial PRIMARY KEY, read_at timestamptz, sent_at timestamptz NOT NULL);
INSERT INTO inbox_items (read_at, sent_at) SELECT CASE WHEN i % 10 < 3 THEN now() - i * interval '1 minute' END, now() FROM generate_series(1, 20000) i;
ANALYZE inbox_items`)
	advice := func(column string) string {
		_, err := check.Specs(ctx, pool, []policy.Spec{{Name: "inbox", Passes: []policy.Pass{{Name: "p", Table: "inbox_items", AgeColumn: column, Retention: 30 * 24 * time.Hour}}}})
		if err == nil {
			t.Fatal("accepted a pass no index serves")
		}
		return err.Error()
	}
	partial, full := advice("read_at"), advice("sent_at")
	for _, tt := range []struct{ got, want string }{
		{partial, `pass "p" of sweep "inbox": no index serves the batch select, so every batch would read all of table "inbox_items": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON inbox_items (read_at) WHERE read_at IS NOT NULL;`},
		{full, `pass "p" of sweep "inbox": no index serves the batch select, so every batch would read all of table "inbox_items": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON inbox_items (sent_at);`},
	} {
		if !sizeRE.MatchString(tt.got) || sizeRE.ReplaceAllString(tt.got, "") != tt.want {
			t.Errorf("advice\n  %s\nwant, sized,\n  %s", tt.got, tt.want)
		}
	}
	// The sizes follow the rows indexed: the partial index is about 30% of the full one.
	size := func(s string) string { return sizeRE.FindString(s) }
	if size(partial) == size(full) {
		t.Errorf("partial %s, full %s: want the partial index smaller", size(partial), size(full))
	}
}
