package check_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbtest"
)

// coldArchiveTable is the archive on the cold server, keyed like the swept table.
const coldArchiveTable = `CREATE TABLE audit_log_archive (
    id               bigint PRIMARY KEY,
    actor_account_id uuid,
    action           text NOT NULL,
    retention_bucket text NOT NULL,
    details          jsonb NOT NULL,
    occurred_at      timestamptz NOT NULL,
    archived_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE narrow (id bigint, actor_account_id uuid, action text, retention_bucket text, occurred_at timestamptz);
CREATE ROLE reader LOGIN;
GRANT SELECT ON audit_log_archive TO reader;
CREATE FUNCTION discard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`

// foreignArchive makes the cold server's tables foreign tables of the swept database: the
// archive (cold.audit_log_archive), one whose remote lacks a column (cold.narrow), one whose
// remote does not exist (cold.nowhere), and the archive again through a remote role that may
// only read it (reader.audit_log_archive).
const foreignArchive = `CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CREATE SERVER cold FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '%[1]d', dbname 'cold');
CREATE USER MAPPING FOR CURRENT_USER SERVER cold OPTIONS (user 'postgres');
CREATE SCHEMA cold;
IMPORT FOREIGN SCHEMA public LIMIT TO (audit_log_archive) FROM SERVER cold INTO cold;
ALTER FOREIGN TABLE cold.audit_log_archive ALTER COLUMN archived_at SET DEFAULT now();
CREATE FOREIGN TABLE cold.narrow (id bigint, actor_account_id uuid, action text, retention_bucket text, details jsonb, occurred_at timestamptz)
    SERVER cold OPTIONS (schema_name 'public', table_name 'narrow');
CREATE FOREIGN TABLE cold.nowhere (id bigint, actor_account_id uuid, action text, retention_bucket text, details jsonb, occurred_at timestamptz)
    SERVER cold OPTIONS (schema_name 'public', table_name 'nowhere');
CREATE SERVER cold_reader FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '%[1]d', dbname 'cold');
CREATE USER MAPPING FOR CURRENT_USER SERVER cold_reader OPTIONS (user 'reader');
CREATE SCHEMA reader;
IMPORT FOREIGN SCHEMA public LIMIT TO (audit_log_archive) FROM SERVER cold_reader INTO reader`

// TestPolicyForeignArchive checks what the check proves of a postgres_fdw archive on a second
// server: its remote table has the columns and no deferrable trigger or rule, the remote role may
// insert and keeps what it is given, the API's role has a user mapping; a server that cannot be
// reached is a warning.
func TestPolicyForeignArchive(t *testing.T) {
	t.Parallel()
	pool := fixturePool(t)
	cold := dbtest.StartColdServer(t)
	remote := fixtureConn(t, cold.Database(t, "cold"), coldArchiveTable)
	exec(t, pool, fmt.Sprintf(foreignArchive, cold.Port))
	archive := func(name string) string {
		return pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: "+name)
	}
	const at = `p.yaml:9: pass "p" of sweep "s": `
	// The rows run in order: the last ones change the remote and stop the server.
	for _, tt := range []refusalCase{
		{name: "a sound foreign archive", yaml: archive("cold.audit_log_archive")},
		{name: "a remote table without a column", yaml: archive("cold.narrow"), want: []string{
			at + `the remote table of foreign archive "cold.narrow" has no column "details": add it there (column "details" does not exist (SQLSTATE 42703))`,
		}},
		{name: "a remote table that does not exist", yaml: archive("cold.nowhere"), want: []string{
			at + `the remote table of foreign archive "cold.nowhere" cannot be read: relation "public.nowhere" does not exist (SQLSTATE 42P01)`,
		}},
		{name: "a remote role that may not insert", yaml: archive("reader.audit_log_archive"), want: []string{
			at + `the API's role cannot insert into foreign archive "reader.audit_log_archive": permission denied for table audit_log_archive (SQLSTATE 42501); the API's database role needs SELECT, UPDATE and DELETE on the swept table (UPDATE for FOR UPDATE), SELECT on guard tables, and SELECT and DELETE on delete_with tables; every batch would fail and roll back`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			warnings, err := checkYAML(t, pool, tt.yaml)
			sameLines(t, "refusals", refusals(err), tt.want)
			sameLines(t, "warnings", warnings, tt.warnings)
		})
	}
	t.Run("a role without a user mapping", func(t *testing.T) {
		as, role := asRole(t, pool, "sweeper", `GRANT USAGE ON SCHEMA cold TO @ROLE@; GRANT SELECT, UPDATE, DELETE ON audit_log TO @ROLE@;
GRANT INSERT, SELECT ON cold.audit_log_archive TO @ROLE@; GRANT USAGE ON FOREIGN SERVER cold TO @ROLE@`)
		warnings, err := checkYAML(t, as, archive("cold.audit_log_archive"))
		// The server's own words differ by version (17 adds the server's name): only they are
		// left out of the comparison.
		got := refusals(err)
		for i := range got {
			got[i] = serverWords.ReplaceAllString(got[i], "user mapping not found for … (SQLSTATE 42704)")
		}
		sameLines(t, "refusals", got, []string{
			at + fmt.Sprintf(`foreign archive "cold.audit_log_archive" has no user mapping for the API's role %[1]q: every batch would fail with 42704; CREATE USER MAPPING FOR %[1]s SERVER … OPTIONS (user '…', password '…'); (user mapping not found for … (SQLSTATE 42704))`, role),
		})
		sameLines(t, "warnings", warnings, nil)
	})
	// What acts at the remote commit, after each batch's proof: refused, then removed again.
	for _, tc := range []struct{ name, create, drop, want string }{
		{"a deferred trigger on the remote table",
			`CREATE CONSTRAINT TRIGGER forget AFTER INSERT ON audit_log_archive DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION discard()`,
			`DROP TRIGGER forget ON audit_log_archive`,
			at + `the remote table public.audit_log_archive of foreign archive "cold.audit_log_archive" has deferrable constraint trigger forget: it fires at the remote commit, after each batch's proof that the archive holds its rows; drop it there, or recreate it NOT DEFERRABLE`},
		{"a rule on the remote table",
			`CREATE RULE divert AS ON INSERT TO audit_log_archive DO INSTEAD NOTHING`,
			`DROP RULE divert ON audit_log_archive`,
			at + `the remote table public.audit_log_archive of foreign archive "cold.audit_log_archive" has rule divert: a rule rewrites the insert there, so rows may never reach the archive; drop it there (DROP RULE divert ON public.audit_log_archive)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := remote.Exec(ctx, tc.create); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if _, err := remote.Exec(ctx, tc.drop); err != nil {
					t.Fatal(err)
				}
			}()
			warnings, err := checkYAML(t, pool, archive("cold.audit_log_archive"))
			sameLines(t, "refusals", refusals(err), []string{tc.want})
			sameLines(t, "warnings", warnings, nil)
		})
	}
	t.Run("a remote table that discards rows", func(t *testing.T) {
		if _, err := remote.Exec(ctx, `CREATE TRIGGER discard BEFORE INSERT ON audit_log_archive FOR EACH ROW EXECUTE FUNCTION discard()`); err != nil {
			t.Fatal(err)
		}
		warnings, err := checkYAML(t, pool, archive("cold.audit_log_archive"))
		sameLines(t, "refusals", refusals(err), []string{
			at + `foreign archive "cold.audit_log_archive" kept none of the row the check inserted (and rolled back): a trigger or rule on its remote table discards rows, and every batch would roll back with batch-error archive-short; remove it there`,
		})
		sameLines(t, "warnings", warnings, nil)
	})
	t.Run("a server that cannot be reached", func(t *testing.T) {
		cold.Stop(t)
		warnings, err := checkYAML(t, pool, archive("cold.audit_log_archive"))
		sameLines(t, "refusals", refusals(err), nil)
		sameLines(t, "warnings", warnings, []string{
			at + fmt.Sprintf(`the server of foreign archive "cold.audit_log_archive" could not be reached to check its remote table (could not connect to server "cold" (SQLSTATE 08001); connection to server at "127.0.0.1", port %d failed: Connection refused`+"\n\t"+`Is the server running on that host and accepting TCP/IP connections?): its batches fail with batch-error, moving nothing, until it can`, cold.Port),
		})
	})
}

// serverWords is PostgreSQL's message for a missing user mapping, whatever its version.
var serverWords = regexp.MustCompile(`user mapping not found for [^()]*\(SQLSTATE 42704\)`)
