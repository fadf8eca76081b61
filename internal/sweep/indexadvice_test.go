package sweep_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
)

// adviceSchema has partial indexes whose predicates a pass's own conditions imply: a keep guard's
// equality implies its column is not NULL, and a pass's where implies itself.
const adviceSchema = `
CREATE TABLE applications (id bigserial PRIMARY KEY, state text NOT NULL, retired_at timestamptz);
CREATE INDEX applications_retired ON applications (retired_at) WHERE state = 'retired';
CREATE TABLE tokens (id bigserial PRIMARY KEY, created_by_application_id bigint);
CREATE INDEX tokens_app ON tokens (created_by_application_id) WHERE created_by_application_id IS NOT NULL;
CREATE TABLE grants (id bigserial PRIMARY KEY, application_id bigint);
CREATE INDEX grants_app ON grants (application_id) WHERE application_id > 100;
`

// TestIndexAdvice accepts an index whose partial predicate the pass's or the guard's own
// condition implies, and refuses one whose predicate nothing implies.
func TestIndexAdvice(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	exec(t, pool, adviceSchema)
	pass := func(guard string) []policy.Spec {
		p := policy.Pass{Name: "retired", Table: "applications", AgeColumn: "retired_at", Retention: 30 * 24 * time.Hour,
			Where: "t.state = 'retired'"}
		if guard != "" {
			p.Guards = []policy.Guard{{Table: guard, Column: map[string]string{"tokens": "created_by_application_id", "grants": "application_id"}[guard]}}
		}
		return []policy.Spec{{Name: "applications", Passes: []policy.Pass{p}}}
	}
	tests := []struct {
		name, guard, refused string
	}{
		{"a partial age index the where implies", "", ""},
		{"a partial guard index the equality implies (IS NOT NULL)", "tokens", ""},
		{"a partial guard index nothing implies", "grants", `no index serves the keep guard on grants.application_id`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := check.Specs(ctx, pool, pass(tt.guard))
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Fatalf("check: %v; want %q", err, tt.refused)
			}
		})
	}
}

// TestIndexAdviceFewest suggests one index, once, for two passes of a table that no index serves,
// where each pass alone would get an index partial on its own where.
func TestIndexAdviceFewest(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	exec(t, pool, `CREATE TABLE audit_rows (id bigserial PRIMARY KEY, bucket text NOT NULL, occurred_at timestamptz NOT NULL)`)
	pass := func(name, bucket string) policy.Pass {
		return policy.Pass{Name: name, Table: "audit_rows", AgeColumn: "occurred_at", Retention: 30 * 24 * time.Hour, Where: "t.bucket = '" + bucket + "'"}
	}
	_, err := check.Specs(ctx, pool, []policy.Spec{{Name: "audit", Passes: []policy.Pass{pass("operational", "operational"), pass("debug", "debug")}}})
	if err == nil {
		t.Fatal("accepted two passes no index serves")
	}
	msg := err.Error()
	if n := strings.Count(msg, "CREATE INDEX"); n != 1 || !strings.Contains(msg, "CREATE INDEX CONCURRENTLY ON audit_rows (occurred_at);") ||
		!strings.Contains(msg, `pass "debug" of sweep "audit": no index serves the batch select, so every batch would read all of table "audit_rows": the index suggested for pass "operational" of sweep "audit" serves this pass too`) {
		t.Fatalf("advice:\n%s\nwant one full index on occurred_at, suggested once for both passes", msg)
	}

	// Alone, a pass gets the index partial on its where, as before.
	_, err = check.Specs(ctx, pool, []policy.Spec{{Name: "audit", Passes: []policy.Pass{pass("debug", "debug")}}})
	if err == nil || !strings.Contains(err.Error(), "CREATE INDEX CONCURRENTLY ON audit_rows (occurred_at) WHERE bucket = 'debug';") {
		t.Fatalf("advice for one pass: %v", err)
	}
}

// TestIndexAdviceStatistics makes a suggestion partial where the planner's statistics say the
// column is mostly NULL, and gives each suggestion's estimated size once the table is analyzed.
func TestIndexAdviceStatistics(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	// 70% of the rows were never read: their read_at is NULL.
	exec(t, pool, `CREATE TABLE inbox_items (id bigserial PRIMARY KEY, read_at timestamptz, sent_at timestamptz NOT NULL);
INSERT INTO inbox_items (read_at, sent_at) SELECT CASE WHEN i % 10 < 3 THEN now() - i * interval '1 minute' END, now() FROM generate_series(1, 20000) i;
ANALYZE inbox_items`)
	advice := func(column string) string {
		_, err := check.Specs(ctx, pool, []policy.Spec{{Name: "inbox", Passes: []policy.Pass{{Name: "p", Table: "inbox_items", AgeColumn: column, Retention: 30 * 24 * time.Hour}}}})
		if err == nil {
			t.Fatal("accepted a pass no index serves")
		}
		return err.Error()
	}
	if got := advice("read_at"); !strings.Contains(got, "(about ") || !strings.HasSuffix(got, "CREATE INDEX CONCURRENTLY ON inbox_items (read_at) WHERE read_at IS NOT NULL;") {
		t.Errorf("mostly NULL: %s\nwant a sized index of the non-NULL rows", got)
	}
	if got := advice("sent_at"); !strings.Contains(got, "(about ") || !strings.HasSuffix(got, "CREATE INDEX CONCURRENTLY ON inbox_items (sent_at);") {
		t.Errorf("never NULL: %s\nwant a sized full index", got)
	}
	// The sizes follow the rows indexed: the partial index is about 30% of the full one.
	size := func(s string) string { return s[strings.Index(s, "(about ")+7 : strings.Index(s, " by the planner")] }
	t.Logf("partial %s, full %s", size(advice("read_at")), size(advice("sent_at")))
}

// TestIndexAdviceShared suggests one index for two refused passes of a table that share a
// condition, partial on that condition alone (neither pass's own bucket), and checks that the
// index suggested serves both passes once it exists.
func TestIndexAdviceShared(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, second string
	}{
		// The shared condition stands first in one where and last in the other.
		{"reordered", "t.bucket = 'debug' AND t.state = 'closed'"},
		// Spelt apart only where PostgreSQL reads it the same.
		{"spelt apart", "t.bucket = 'debug' AND T.State='closed'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			exec(t, pool, `CREATE TABLE case_notes (id bigserial PRIMARY KEY, state text NOT NULL, bucket text NOT NULL, noted_at timestamptz NOT NULL)`)
			pass := func(name, where string) policy.Pass {
				return policy.Pass{Name: name, Table: "case_notes", AgeColumn: "noted_at", Retention: 30 * 24 * time.Hour, Where: where}
			}
			specs := []policy.Spec{{Name: "cases", Passes: []policy.Pass{
				pass("operational", "t.state = 'closed' AND t.bucket = 'operational'"),
				pass("debug", tt.second),
			}}}
			_, err := check.Specs(ctx, pool, specs)
			if err == nil {
				t.Fatal("accepted two passes no index serves")
			}
			msg := err.Error()
			const want = "CREATE INDEX CONCURRENTLY ON case_notes (noted_at) WHERE state = 'closed';"
			if n := strings.Count(msg, "CREATE INDEX"); n != 1 || !strings.Contains(msg, want) {
				t.Fatalf("advice:\n%s\nwant one suggestion, %s", msg, want)
			}
			if !strings.Contains(msg, `pass "debug" of sweep "cases": no index serves the batch select, so every batch would read all of table "case_notes": the index suggested for pass "operational" of sweep "cases" serves this pass too`) {
				t.Fatalf("advice:\n%s\nwant pass debug to name the index suggested for pass operational", msg)
			}
			exec(t, pool, strings.TrimSuffix(want, ";"))
			if _, err := check.Specs(ctx, pool, specs); err != nil {
				t.Fatalf("the suggested index does not serve both passes: %v", err)
			}
		})
	}
}
