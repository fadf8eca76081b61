package sweep_test

import (
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

// TestDeleteWithDirection runs a delete_with entry that names a parent the swept row references
// one-to-one: the parent goes with its row, and no other.
func TestDeleteWithDirection(t *testing.T) {
	t.Parallel()
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
