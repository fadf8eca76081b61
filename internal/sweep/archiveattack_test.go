package sweep_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
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

// remoteForget is a deferred trigger on the cold archive's remote table: it deletes each row
// archived there as the remote transaction commits, after the batch's proof.
const remoteForget = `CREATE FUNCTION forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN DELETE FROM public.audit_log_archive WHERE id = NEW.id; RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER forget AFTER INSERT ON audit_log_archive DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION forget()`

// TestArchiveLost makes a foreign archive lose a committed batch's rows at its remote commit: the
// read-back after that commit stops the run with archive-lost naming the keys, and the sweep
// stays halted, in later runs of this runner and of another one, until the halt is deleted.
func TestArchiveLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		history bool
	}{
		{"kept in the history", true},
		{"kept in the runner without a history", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			_, coldURL := coldSetup(t, pool)
			remote := freshPool(t, coldURL)
			exec(t, remote, remoteForget)
			at := dbNow(t, pool)
			seedAudit(t, pool, at, 40, 5)
			var store *history.Store
			if tc.history {
				store = history.New(pool, 30*24*time.Hour)
			}
			runner := func() *sweep.Runner {
				return newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{auditArchiveSpec(policy.ModeBatched, coldArchiveName)},
					Settings: fixed(settings(), 10), AsOf: fixedAsOf(at), History: store})
			}
			r := runner()
			res := run(t, r, "audit-archive")
			if !res.Failed() || res.Error == nil || res.Error.Code != sweep.ArchiveLostCode || res.Deleted == 0 || res.Archived != 0 || res.BatchCount != 1 ||
				!strings.Contains(res.Error.Message, `foreign archive "cold.audit_log_archive" does not hold rows of "audit_log" that batch 1 of pass "operational" deleted and committed: missing Key (id)=(`) ||
				!strings.Contains(res.Error.Message, `DELETE FROM sweeprail.archive_halt WHERE sweep = 'audit-archive';`) {
				t.Fatalf("run %+v (error %+v): want batch-error %s after one batch, none of it archived, naming the keys and the release", res, res.Error, sweep.ArchiveLostCode)
			}
			lost := res.Deleted
			left := count(t, pool, "SELECT count(*) FROM audit_log")
			again := []*sweep.Runner{r}
			if tc.history {
				again = append(again, runner()) // another process: the halt is in the database
			}
			for i, r := range again {
				res = run(t, r, "audit-archive")
				if !res.Failed() || res.Error == nil || res.Error.Code != sweep.ArchiveLostCode || res.BatchCount != 0 || res.Deleted != 0 ||
					!strings.Contains(res.Error.Message, `sweep "audit-archive" is halted since `) {
					t.Fatalf("run %d after the loss: %+v (error %+v); want it halted before any batch", i+2, res, res.Error)
				}
			}
			if n := count(t, pool, "SELECT count(*) FROM audit_log"); n != left {
				t.Fatalf("the halted runs deleted %d rows", left-n)
			}
			if !tc.history {
				return
			}
			// The operator removes the cause and releases the sweep.
			exec(t, remote, `DROP TRIGGER forget ON audit_log_archive`)
			exec(t, pool, `DELETE FROM sweeprail.archive_halt WHERE sweep = 'audit-archive'`)
			res = run(t, runner(), "audit-archive")
			if res.StopReason != wire.StopExhausted || res.Deleted != 40-lost || res.Archived != 40-lost {
				t.Fatalf("after the release: %+v (error %+v); want exhausted, the other %d moved", res, res.Error, 40-lost)
			}
			if n := count(t, remote, "SELECT count(*) FROM audit_log_archive"); n != 40-lost {
				t.Errorf("the archive holds %d rows, want the %d moved after the release", n, 40-lost)
			}
		})
	}
}
