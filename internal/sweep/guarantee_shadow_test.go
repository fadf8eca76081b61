package sweep_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// shadowSchema is a swept table of 60 old rows, the even ones held by shadow_holds. Each test
// adds what a careless table owner, or an attacker with a trigger, would make a pass's session
// see from its second batch on.
const shadowSchema = `
CREATE TABLE shadow_parents (id bigint PRIMARY KEY, at timestamptz NOT NULL);
CREATE INDEX ON shadow_parents (at);
CREATE TABLE shadow_holds (parent_id bigint NOT NULL);
CREATE INDEX ON shadow_holds (parent_id);
INSERT INTO shadow_parents SELECT g, now() - interval '2 days' - g * interval '1 minute' FROM generate_series(1, 60) g;
INSERT INTO shadow_holds SELECT g FROM generate_series(2, 60, 2) g`

// TestShadowedNames: a temporary table the pass's own session creates mid-pass (an AFTER DELETE
// FOR EACH STATEMENT trigger, run as the least-privilege role, which has PUBLIC's TEMP) never
// stands in for a table the check proved: a keep guard's, the swept table, or one a where
// condition names. Each batch names the tables schema-qualified and puts pg_temp last on its
// search_path; the run deletes what the dry run counted, and every held row stays.
func TestShadowedNames(t *testing.T) {
	t.Parallel()
	guard := []policy.Guard{{Table: "shadow_holds", Columns: []string{"parent_id"}, References: []string{"id"}}}
	for _, tc := range []struct {
		name string
		// shadow is what the trigger creates.
		shadow string
		guards []policy.Guard
		where  string
		// eligible is the rows the dry run counts and the run deletes; kept the old rows left.
		eligible, kept int64
	}{
		{"a temporary table shadowing a keep guard's table", "shadow_holds (parent_id bigint)", guard, "", 30, 30},
		{"a temporary table shadowing the swept table", "shadow_parents (id bigint, at timestamptz)", nil, "", 60, 0},
		{"a where condition naming a table a temporary one shadows", "shadow_holds (parent_id bigint)", nil,
			"NOT EXISTS (SELECT 1 FROM shadow_holds h WHERE h.parent_id = t.id)", 30, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			specs := []policy.Spec{{Name: "shadow", Passes: []policy.Pass{{
				Name: "old", Table: "shadow_parents", AgeColumn: "at", Retention: 24 * time.Hour,
				Guards: tc.guards, Where: tc.where, AllowUnindexed: tc.where != "",
			}}}}
			admin, pool, role := leastPrivilege(t, specs, shadowSchema+`;
CREATE FUNCTION shadow_mid_pass() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	CREATE TEMP TABLE IF NOT EXISTS `+tc.shadow+`;
	RETURN NULL;
END $$;
CREATE TRIGGER shadow_mid_pass AFTER DELETE ON shadow_parents FOR EACH STATEMENT EXECUTE FUNCTION shadow_mid_pass()`)
			if tc.where != "" { // what `api grants` cannot know of: a table the condition reads
				exec(t, admin, `GRANT SELECT ON shadow_holds TO `+role)
			}
			names := checkedNames(t, pool, specs)
			// Batches of 10 on the index path: the first batch's trigger makes the temporary
			// table, which every later batch of the pass's session would meet.
			r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Names: names, Settings: fixed(settings(), 10), AccessPath: sweep.PathIndex})
			dry, err := r.DryRun(ctx, "shadow")
			if err != nil {
				t.Fatal(err)
			}
			if e := dry.Passes[0].Eligible; e == nil || *e != tc.eligible {
				t.Fatalf("dry run counted %v, want %d", e, tc.eligible)
			}
			res := run(t, r, "shadow")
			if res.StopReason != wire.StopExhausted || res.Deleted != tc.eligible || res.BatchCount < 3 {
				t.Errorf("run: %s, deleted %d in %d batches (error %+v); want exhausted, the dry run's %d, in 3 or more",
					res.StopReason, res.Deleted, res.BatchCount, res.Error, tc.eligible)
			}
			if n := count(t, admin, `SELECT count(*) FROM shadow_parents`); n != tc.kept {
				t.Errorf("%d rows left, want the %d held ones", n, tc.kept)
			}
			if n := count(t, admin, `SELECT count(*) FROM shadow_holds h WHERE NOT EXISTS (SELECT 1 FROM shadow_parents p WHERE p.id = h.parent_id)`); tc.kept > 0 && n != 0 {
				t.Errorf("%d held rows deleted", n)
			}
		})
	}
}

// TestNamesProvedAtCheck: a table created after the check, in a schema earlier on the
// search_path ("$user", ahead of public), with the name of a keep guard's table, never stands
// in for it: statements name the table the check resolved, schema-qualified.
func TestNamesProvedAtCheck(t *testing.T) {
	t.Parallel()
	specs := []policy.Spec{{Name: "shadow", Passes: []policy.Pass{{
		Name: "old", Table: "shadow_parents", AgeColumn: "at", Retention: 24 * time.Hour,
		Guards: []policy.Guard{{Table: "shadow_holds", Columns: []string{"parent_id"}, References: []string{"id"}}},
	}}}}
	admin, pool, role := leastPrivilege(t, specs, shadowSchema)
	names := checkedNames(t, pool, specs)
	if want := "public.shadow_holds"; names["shadow_holds"] != want {
		t.Fatalf("the check resolved shadow_holds to %q, want %q", names["shadow_holds"], want)
	}
	exec(t, admin, fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.shadow_holds (parent_id bigint);
		GRANT USAGE ON SCHEMA %[1]s TO %[1]s; GRANT SELECT ON %[1]s.shadow_holds TO %[1]s`, role))
	r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Names: names, Settings: fixed(settings(), 10)})
	res := run(t, r, "shadow")
	if res.StopReason != wire.StopExhausted || res.Deleted != 30 {
		t.Errorf("run: %s, deleted %d (error %+v); want exhausted, the 30 unheld rows", res.StopReason, res.Deleted, res.Error)
	}
	if n := count(t, admin, `SELECT count(*) FROM shadow_parents`); n != 30 {
		t.Errorf("%d rows left, want the 30 held ones", n)
	}
}

// leastPrivilege makes a fresh database with schema, and a role holding exactly what `api
// grants` prints for specs: the admin's pool, a pool connected as that role, and its name.
func leastPrivilege(t *testing.T, specs []policy.Spec, schema string) (admin, pool *pgxpool.Pool, role string) {
	t.Helper()
	u := dbtest.URL(t)
	admin = freshPool(t, u)
	role = fmt.Sprintf("sweeper_%d", time.Now().UnixNano())
	exec(t, admin, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		exec(t, admin, `DROP OWNED BY `+role)
		exec(t, admin, `DROP SCHEMA IF EXISTS `+role+` CASCADE`)
		exec(t, admin, `DROP ROLE `+role)
	})
	exec(t, admin, schema)
	exec(t, admin, `GRANT USAGE ON SCHEMA sweeprail TO `+role)
	exec(t, admin, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA sweeprail TO `+role)
	for _, g := range statement.Grants(specs, role) {
		exec(t, admin, g)
	}
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p.User = url.User(role)
	pool, err = dbpool.NewPool(ctx, p.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return admin, pool, role
}

// checkedNames runs the policy check on specs, as the role, and answers the tables it proved.
func checkedNames(t *testing.T, pool *pgxpool.Pool, specs []policy.Spec) statement.Names {
	t.Helper()
	pol := &policy.Policy{Specs: specs}
	if _, err := check.Policy(ctx, pool, pol); err != nil {
		t.Fatalf("check: %v", err)
	}
	names, err := check.Names(ctx, pool, pol)
	if err != nil {
		t.Fatal(err)
	}
	return names
}
