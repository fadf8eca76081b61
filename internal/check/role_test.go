package check_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/partition"
)

// TestPolicyRefusesRole checks the refusals that depend on what the API's role may do: each row
// checks its policy as a role of its own, made by its grants.
func TestPolicyRefusesRole(t *testing.T) {
	t.Parallel()
	const owned = `CREATE TABLE owned (id bigint, at timestamptz NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE owned_all PARTITION OF owned DEFAULT`
	tests := []struct {
		name, prefix string
		// grants make the role, @ROLE@ its name.
		grants, yaml string
		// want and warnings are the check's answer, @ROLE@ the role.
		want, warnings []string
	}{
		{"an archive the role may not insert into", "archiver",
			`GRANT USAGE ON SCHEMA archive TO @ROLE@; GRANT SELECT, UPDATE, DELETE ON audit_log TO @ROLE@;
GRANT SELECT ON archive.audit_log TO @ROLE@; GRANT INSERT (id, action) ON archive.audit_log TO @ROLE@`,
			pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.audit_log"),
			[]string{`p.yaml:9: pass "p" of sweep "s": the API's role "@ROLE@" may not insert into archive_to table "archive.audit_log" (columns actor_account_id, retention_bucket, details, occurred_at): GRANT INSERT ON archive.audit_log TO @ROLE@;`}, nil},
		{"an archive the role may not read", "archiver",
			`GRANT USAGE ON SCHEMA archive TO @ROLE@; GRANT SELECT, UPDATE, DELETE ON audit_log TO @ROLE@;
GRANT INSERT ON archive.audit_log TO @ROLE@`,
			pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.audit_log"),
			[]string{`p.yaml:9: pass "p" of sweep "s": the API's role "@ROLE@" may not read archive_to table "archive.audit_log", which each batch reads its rows back from to prove they arrived as they left: GRANT SELECT ON archive.audit_log TO @ROLE@;`}, nil},
		{"an archive the role may insert into", "archiver",
			`GRANT USAGE ON SCHEMA archive TO @ROLE@; GRANT SELECT, UPDATE, DELETE ON audit_log TO @ROLE@;
GRANT SELECT, INSERT ON archive.audit_log TO @ROLE@`,
			pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.audit_log"), nil, nil},
		{"partitions dropped through the drop function, the partitions not granted", "dropper",
			`GRANT SELECT, UPDATE, DELETE ON ranged TO @ROLE@; ` + partition.DefinerSQL("ranged", "@ROLE@", month),
			pass("ranged", "at", "mode: partitions"),
			[]string{`p.yaml:4: pass "p" of sweep "s": mode partitions: the boundary's batches delete from the partition holding the cutoff itself, and the API's role lacks SELECT, UPDATE, DELETE on 1 partitions of "ranged" (public.ranged_all): grant them on each partition as it is created (GRANT SELECT, UPDATE, DELETE ON public.ranged_all TO <role>; pg_partman: inherit_privileges), or set boundary: keep`},
			[]string{`p.yaml:8: pass "p" of sweep "s": mode partitions drops the expired partitions of "ranged" through its drop function public.sweeprail_drop_ranged, as the table's owner: a plain DETACH under the lock timeout, never CONCURRENTLY`}},
		{"archive_schema without owning the table", "dropper",
			`GRANT SELECT, UPDATE, DELETE ON ranged TO @ROLE@; ` + partition.DefinerSQL("ranged", "@ROLE@", month),
			pass("ranged", "at", "mode: partitions", "boundary: keep", "archive_schema: archive"),
			[]string{`p.yaml:10: pass "p" of sweep "s": mode partitions: archive_schema moves each partition with ALTER TABLE … SET SCHEMA, which needs the owner of table "ranged"; the drop function public.sweeprail_drop_ranged only drops: make the API's role a member of the table's owner, or drop instead of archiving`}, nil},
		{"a drop function granted with a shorter retention than the pass's", "dropper",
			`GRANT SELECT, UPDATE, DELETE ON ranged TO @ROLE@; ` + partition.DefinerSQL("ranged", "@ROLE@", partition.Window{Retention: 7 * day, TimeZone: "UTC"}),
			pass("ranged", "at", "mode: partitions", "boundary: keep"),
			[]string{`p.yaml:7: pass "p" of sweep "s": mode partitions: the drop function public.sweeprail_drop_ranged was granted with a retention of 7d, shorter than the pass's 30d: run api grants again and have the table's owner apply its drop function, so that it follows the policy`},
			[]string{`p.yaml:8: pass "p" of sweep "s": mode partitions drops the expired partitions of "ranged" through its drop function public.sweeprail_drop_ranged, as the table's owner: a plain DETACH under the lock timeout, never CONCURRENTLY`}},
		{"a drop function granted with a longer retention than the pass's", "dropper",
			`GRANT SELECT, UPDATE, DELETE ON ranged TO @ROLE@; ` + partition.DefinerSQL("ranged", "@ROLE@", partition.Window{Retention: 90 * day, TimeZone: "UTC"}),
			pass("ranged", "at", "mode: partitions", "boundary: keep"), nil,
			[]string{`p.yaml:8: pass "p" of sweep "s": mode partitions drops the expired partitions of "ranged" through its drop function public.sweeprail_drop_ranged, as the table's owner: a plain DETACH under the lock timeout, never CONCURRENTLY`,
				`p.yaml:7: pass "p" of sweep "s": mode partitions: the drop function public.sweeprail_drop_ranged was granted with a retention of 90d, longer than the pass's 30d (it refuses the partitions between): run api grants again and have the table's owner apply its drop function, so that it follows the policy`}},
		{"an archive_schema the owner may not create in", "owner",
			`ALTER TABLE owned OWNER TO @ROLE@; ALTER TABLE owned_all OWNER TO @ROLE@`,
			pass("owned", "at", "mode: partitions", "boundary: keep", "archive_schema: archive"),
			[]string{`p.yaml:10: pass "p" of sweep "s": the API's role may not create tables in archive_schema "archive", which moving a partition there needs: GRANT CREATE ON SCHEMA "archive" TO <role>;`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A database of its own: the grants of several cases replace the same drop function,
			// which concurrent CREATE OR REPLACEs in one database fail on (tuple concurrently updated).
			pool := fixturePool(t, checkSchema, owned)
			as, role := asRole(t, pool, tt.prefix, tt.grants)
			warnings, err := checkYAML(t, as, tt.yaml)
			sameLines(t, "refusals", refusals(err), withRole(tt.want, role))
			sameLines(t, "warnings", warnings, withRole(tt.warnings, role))
		})
	}

	// A where condition is resolved in a temporary view, which needs the TEMPORARY privilege on
	// the database; PUBLIC has it unless revoked.
	t.Run("a condition whose functions cannot be read", func(t *testing.T) {
		t.Parallel()
		pool := fixturePool(t)
		var db string
		if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
			t.Fatal(err)
		}
		exec(t, pool, fmt.Sprintf(`REVOKE TEMPORARY ON DATABASE %q FROM PUBLIC`, db))
		as, _ := asRole(t, pool, "reader", `GRANT SELECT, UPDATE, DELETE ON notifications TO @ROLE@`)
		warnings, err := checkYAML(t, as, pass("notifications", "read_at", "where: t.kind = 'digest'"))
		sameLines(t, "refusals", refusals(err), []string{
			`p.yaml:8: pass "p" of sweep "s": the condition's functions could not be read: permission denied to create temporary tables in database "` + db + `" (SQLSTATE 42501); the API's database role needs SELECT, UPDATE and DELETE on the swept table (UPDATE for FOR UPDATE), SELECT on guard tables, and SELECT and DELETE on delete_with tables`,
		})
		sameLines(t, "warnings", warnings, nil)
	})
}

const day = 24 * time.Hour

// month is the window of the pass the rows write: 30 days, in UTC.
var month = partition.Window{Retention: 30 * day, TimeZone: "UTC"}

// withRole writes role into each line's @ROLE@.
func withRole(lines []string, role string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, strings.ReplaceAll(l, "@ROLE@", role))
	}
	return out
}
