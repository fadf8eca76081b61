package sweep_test

import (
	"strings"
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// directionSchema has a one-to-one parent (each member has at most one profile, which goes with
// it) beside the reference schema's many-to-one accounts (many notifications share one).
const directionSchema = `
CREATE TABLE profiles (id bigserial PRIMARY KEY, bio text);
CREATE TABLE members (id bigserial PRIMARY KEY, profile_id bigint UNIQUE REFERENCES profiles (id), left_at timestamptz);
CREATE INDEX members_left_at ON members (left_at);
CREATE INDEX profiles_id_lookup ON profiles (id);
CREATE TABLE sweeprail.notes (id bigserial PRIMARY KEY, notification_id bigint);
`

// TestDeleteWithDirection checks that a delete_with entry must follow a foreign key: a child
// referencing the swept table, or a parent the swept row references one-to-one, which then
// goes with it; many-to-one, the same table, a sibling and sweeprail's own schema are refused.
func TestDeleteWithDirection(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	exec(t, pool, directionSchema)
	const p = `p.yaml:9: pass "p" of sweep "s": `
	tests := []struct {
		name, table, age, entry string
		extra                   []string
		want                    string
	}{
		{"a parent many-to-one", "notifications", "read_at", "{table: accounts, column: id, references: account_id}", []string{"cascades: [refresh_tokens, idempotency_records, email_messages, consent_records]"},
			p + `delete_with accounts.id = notifications.account_id goes the other way: notifications.account_id references accounts.id, which makes accounts the parent, and nothing makes notifications.account_id unique, so other rows of "notifications" may reference the same parent`},
		{"the same table", "notifications", "read_at", "{table: notifications, column: id}", nil,
			p + `delete_with notifications.id = notifications.id names the swept table itself`},
		{"a sibling", "notifications", "read_at", "{table: refresh_tokens, column: account_id, references: account_id}", nil,
			p + `delete_with refresh_tokens.account_id = notifications.account_id is no child of "notifications": no foreign key of refresh_tokens (account_id) references notifications (account_id), nor the other way`},
		{"sweeprail's own schema", "notifications", "read_at", "{table: sweeprail.notes, column: notification_id}", nil,
			p + `delete_with sweeprail.notes.notification_id = notifications.id names a table of schema sweeprail, sweeprail's own`},
		{"a parent one-to-one", "members", "left_at", "{table: profiles, column: id, references: profile_id}", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			extra := append([]string{"delete_with:", "  - " + tt.entry}, tt.extra...)
			_, err := checkYAML(t, pool, policyYAML(passYAML(tt.table, tt.age, extra...)))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v\nwant %s", err, tt.want)
			}
		})
	}

	t.Run("the one-to-one parent goes with its row", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, directionSchema)
		at := dbNow(t, pool)
		exec(t, pool, `INSERT INTO profiles (id, bio) SELECT i, 'bio' FROM generate_series(1, 20) AS i`)
		exec(t, pool, `INSERT INTO members (profile_id, left_at)
			SELECT i, $1::timestamptz - CASE WHEN i <= 12 THEN interval '40 days' ELSE interval '1 day' END FROM generate_series(1, 20) AS i`, at)
		pol, err := policy.Load("p.yaml", []byte(policyYAML(passYAML("members", "left_at", "delete_with:", "  - {table: profiles, column: id, references: profile_id}"))))
		if err != nil {
			t.Fatal(err)
		}
		r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: fixed(settings(), 5), AsOf: fixedAsOf(at)})
		res := run(t, r, "s")
		if res.Error != nil || res.Deleted != 12 || len(res.Passes[0].Children) != 1 || res.Passes[0].Children[0].Rows != 12 {
			t.Fatalf("run %+v (error %+v): want 12 members and their 12 profiles", res, res.Error)
		}
		if n := count(t, pool, `SELECT count(*) FROM profiles p WHERE NOT EXISTS (SELECT 1 FROM members m WHERE m.profile_id = p.id)`); n != 0 {
			t.Errorf("%d profiles left without their member", n)
		}
		if n := count(t, pool, `SELECT count(*) FROM profiles`); n != 8 {
			t.Errorf("%d profiles left, want the 8 of members kept", n)
		}
	})
}
