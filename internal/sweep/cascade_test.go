package sweep_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
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

func TestCheckPolicyCascades(t *testing.T) {
	t.Parallel()
	pool := cascadePool(t)
	const p = `p.yaml:4: pass "p" of sweep "s": `
	tests := []struct {
		name  string
		extra []string
		// want are the parts of the refusal; none: the policy is accepted.
		want []string
	}{
		{"cascades not named", nil, []string{
			p + `deleting from table "applications" deletes rows of table "access_tokens", which the pass does not name, through the schema's ON DELETE keys: applications → access_tokens (CASCADE) (key access_tokens_application_id_fkey); keep the rows of "applications" that access_tokens references with keep_while_referenced_by: [{table: access_tokens, column: application_id, references: id}], or say that they go too with cascades: [access_tokens]`,
			p + `deleting from table "applications" deletes rows of table "app_sessions", which the pass does not name, through the schema's ON DELETE keys: applications → access_tokens (CASCADE) → app_sessions (CASCADE) (key app_sessions_token_id_fkey); keep the rows of "applications" that access_tokens references with keep_while_referenced_by: [{table: access_tokens, column: application_id, references: id}], or say that they go too with cascades: [access_tokens, app_sessions]`,
			p + `deleting from table "applications" changes rows of table "app_audit", which the pass does not name, through the schema's ON DELETE keys: applications → app_audit (SET NULL) (key app_audit_application_id_fkey)`,
		}},
		{"the second level not named", []string{"cascades: [access_tokens, app_audit]"}, []string{
			`applications → access_tokens (CASCADE) → app_sessions (CASCADE) (key app_sessions_token_id_fkey); keep the rows of "applications" that access_tokens references with keep_while_referenced_by: [{table: access_tokens, column: application_id, references: id}], or say that they go too with cascades: [access_tokens, app_audit, app_sessions]`,
		}},
		{"every cascade named", []string{"cascades: [access_tokens, app_sessions, app_audit]"}, nil},
		{"a keep guard stops the chain", []string{"cascades: [app_audit]", "keep_while_referenced_by:", "  - {table: access_tokens, column: application_id}"}, nil},
		{"a conditional keep guard does not", []string{"cascades: [app_audit]", "keep_while_referenced_by:", "  - {table: access_tokens, column: application_id, where: g.expires_at > now()}"},
			[]string{`deletes rows of table "access_tokens", which the pass does not name`}},
		{"a table no key reaches", []string{"cascades: [access_tokens, app_sessions, app_audit, accounts]"},
			[]string{`p.yaml:8: pass "p" of sweep "s": cascades names table "accounts", which no ON DELETE CASCADE, SET NULL or SET DEFAULT key reaches from table "applications": remove it`}},
		{"a table that does not exist", []string{"cascades: [access_tokens, app_sessions, app_audit, app_sesions]"},
			[]string{`cascades table "app_sesions" does not exist`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := checkYAML(t, pool, policyYAML(passYAML("applications", "last_used_at", tt.extra...)))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain\n  %s\ngot\n  %v", w, err)
				}
			}
		})
	}
}
