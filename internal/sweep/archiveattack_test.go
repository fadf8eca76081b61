package sweep_test

import (
	"strings"
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// TestArchiveAttacks sets on a local archive each thing that could make a batch's archived rows
// other than the rows it deleted, and runs a sweep into it: every one rolls the batch back, or
// refuses the run before its first batch, and audit_log keeps every row.
func TestArchiveAttacks(t *testing.T) {
	t.Parallel()
	const forget = `CREATE FUNCTION archive.forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN DELETE FROM archive.audit_log WHERE id = NEW.id; RETURN NULL; END $$;
`
	for _, tc := range []struct {
		name, archive, attack string
		// code is the answer's error code, and want a part of its message.
		code, want string
		// refused says the run refuses before its first batch.
		refused bool
	}{
		{"an AFTER INSERT row trigger deleting the archived rows", localArchive, forget +
			`CREATE TRIGGER forget AFTER INSERT ON archive.audit_log FOR EACH ROW EXECUTE FUNCTION archive.forget()`,
			sweep.ArchiveShortCode, "rows the batch deleted: rolled back, nothing deleted; missing after the batch's statement: Key (id)=(", false},
		{"an AFTER INSERT statement trigger emptying the archive", localArchive, `CREATE FUNCTION archive.empty() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN DELETE FROM archive.audit_log; RETURN NULL; END $$;
CREATE TRIGGER empty AFTER INSERT ON archive.audit_log FOR EACH STATEMENT EXECUTE FUNCTION archive.empty()`,
			sweep.ArchiveShortCode, `archive "archive.audit_log" took 0 of the `, false},
		{"a BEFORE INSERT trigger rewriting NEW", localArchive, `CREATE FUNCTION archive.rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.action := 'rewritten'; RETURN NEW; END $$;
CREATE TRIGGER rewrite BEFORE INSERT ON archive.audit_log FOR EACH ROW EXECUTE FUNCTION archive.rewrite()`,
			sweep.ArchiveAlteredCode, `archive "archive.audit_log" holds rows of "audit_log" other than the batch deleted them: Key (id)=(`, false},
		{"a date column for a timestamptz", `CREATE SCHEMA archive;
CREATE TABLE archive.audit_log (id bigint PRIMARY KEY, actor_account_id uuid, action text, retention_bucket text, details jsonb, occurred_at date)`, "",
			sweep.ArchiveAlteredCode, "a column of it is of another type than the swept table's", false},
		{"a deferred constraint trigger", localArchive, forget +
			`CREATE CONSTRAINT TRIGGER forget AFTER INSERT ON archive.audit_log DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION archive.forget()`,
			"internal", `archive_to "archive.audit_log" has deferrable constraint trigger forget: they act after each batch's proof`, true},
		{"a DO INSTEAD rule", localArchive, `CREATE TABLE archive.elsewhere (LIKE archive.audit_log);
CREATE RULE divert AS ON INSERT TO archive.audit_log DO INSTEAD INSERT INTO archive.elsewhere VALUES (NEW.*)`,
			"internal", `archive_to "archive.audit_log" has rule divert`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			exec(t, pool, tc.archive)
			if tc.attack != "" {
				exec(t, pool, tc.attack)
			}
			at := dbNow(t, pool)
			seedAudit(t, pool, at, 40, 5)
			before := count(t, pool, "SELECT count(*) FROM audit_log")
			r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{auditArchiveSpec(policy.ModeBatched, "archive.audit_log")},
				Settings: fixed(settings(), 10), AsOf: fixedAsOf(at)})
			res := run(t, r, "audit-archive")
			if !res.Failed() || res.Error == nil || res.Error.Code != tc.code || !strings.Contains(res.Error.Message, tc.want) || res.Deleted != 0 || res.Archived != 0 {
				t.Fatalf("run %+v (error %+v): want batch-error %s with %q, nothing deleted or archived", res, res.Error, tc.code, tc.want)
			}
			if tc.refused && res.BatchCount != 0 {
				t.Errorf("%d batches ran; want the run refused before its first", res.BatchCount)
			}
			if n := count(t, pool, "SELECT count(*) FROM audit_log"); n != before {
				t.Errorf("audit_log lost %d rows that the archive does not hold", before-n)
			}
		})
	}
}
