package sweep_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// discardTrigger keeps every other row out of an archive, as a BEFORE INSERT trigger returning
// NULL does: the insert reports fewer rows than it was given.
const discardTrigger = `CREATE FUNCTION %[1]s_discard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.id %% 2 = 0 THEN RETURN NULL; END IF; RETURN NEW; END $$;
CREATE TRIGGER discard BEFORE INSERT ON %[2]s FOR EACH ROW EXECUTE FUNCTION %[1]s_discard()`

// TestArchiveProof checks that a batch whose archive discards rows (a trigger, locally or on a
// foreign archive's remote table) is rolled back whole, with batch-error naming the archive
// and both counts, in every mode: no row leaves the swept table that the archive did not take.
func TestArchiveProof(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		foreign bool
		mode    policy.Mode
	}{
		{"local, batched", false, policy.ModeBatched},
		{"local, single", false, policy.ModeSingle},
		{"foreign, batched", true, policy.ModeBatched},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			at := dbNow(t, pool)
			seedAudit(t, pool, at, 40, 5)
			archive := "archive.audit_log"
			var remote *pgxpool.Pool
			if tc.foreign {
				_, coldURL := coldSetup(t, pool)
				remote = freshPool(t, coldURL)
				exec(t, remote, fmt.Sprintf(discardTrigger, "cold", "audit_log_archive"))
				archive = coldArchiveName
			} else {
				exec(t, pool, localArchive)
				exec(t, pool, fmt.Sprintf(discardTrigger, "archive", "archive.audit_log"))
			}
			before := count(t, pool, "SELECT count(*) FROM audit_log")
			r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{auditArchiveSpec(tc.mode, archive)}, Settings: fixed(settings(), 10), AsOf: fixedAsOf(at)})
			res, err := r.Run(ctx, "audit-archive", sweep.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Failed() || res.Error == nil || res.Error.Code != sweep.ArchiveShortCode || res.Deleted != 0 || res.Archived != 0 {
				t.Fatalf("run %+v (error %+v): want batch-error %s, nothing deleted or archived", res, res.Error, sweep.ArchiveShortCode)
			}
			if !strings.Contains(res.Error.Message, `archive "`+archive+`" took `) || !strings.Contains(res.Error.Message, "rows the batch deleted: rolled back") {
				t.Errorf("message %q: want the archive and both counts", res.Error.Message)
			}
			if n := count(t, pool, "SELECT count(*) FROM audit_log"); n != before {
				t.Errorf("audit_log lost %d rows that the archive did not take", before-n)
			}
			archived := pool
			table := "archive.audit_log"
			if tc.foreign {
				archived, table = remote, "audit_log_archive"
			}
			if n := count(t, archived, "SELECT count(*) FROM "+table); n != 0 {
				t.Errorf("the archive kept %d rows of a rolled-back batch", n)
			}
		})
	}
}

// TestArchiveHeal makes the crash window between a foreign archive's commit and the local one:
// rows in the archive already, still in the swept table. The next run finds them identical,
// deletes them and counts them as recovered; a copy that differs stops the batch naming its key.
func TestArchiveHeal(t *testing.T) {
	t.Parallel()
	const columns = "id, actor_account_id, action, retention_bucket, details, occurred_at"
	for _, tc := range []struct {
		name    string
		foreign bool
		mode    policy.Mode
	}{
		{"local, batched", false, policy.ModeBatched},
		{"local, single", false, policy.ModeSingle},
		{"foreign, batched", true, policy.ModeBatched},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			at := dbNow(t, pool)
			seedAudit(t, pool, at, 40, 5)
			archive := "archive.audit_log"
			if tc.foreign {
				coldSetup(t, pool)
				archive = coldArchiveName
			} else {
				exec(t, pool, localArchive)
			}
			// The crash window: the oldest six eligible rows reached the archive, and the local
			// commit that deleted them was lost.
			exec(t, pool, `INSERT INTO `+archive+` (`+columns+`) OVERRIDING SYSTEM VALUE SELECT `+columns+` FROM audit_log
				WHERE retention_bucket = 'operational' AND action LIKE 'old %' ORDER BY occurred_at LIMIT 6`)
			if tc.foreign {
				exec(t, pool, `INSERT INTO `+archive+` (`+columns+`) SELECT `+columns+` FROM audit_log WHERE false`)
			}
			o := newAuditOracle(t, pool, at)
			r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{auditArchiveSpec(tc.mode, archive)}, Settings: fixed(settings(), 10), AsOf: fixedAsOf(at)})
			res, err := r.Run(ctx, "audit-archive", sweep.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Error != nil || res.Passes[0].Recovered != 6 || res.Deleted != 40 || res.Archived != 34 {
				t.Fatalf("run %+v (error %+v): want 40 deleted, 34 archived, 6 recovered", res, res.Error)
			}
			if n := count(t, pool, `SELECT count(*) FROM audit_log WHERE action LIKE 'old %'`); n != 0 {
				t.Errorf("%d old rows left in audit_log", n)
			}
			if n := count(t, pool, `SELECT count(*) FROM `+archive); n != int64(len(o.eligible)) {
				t.Errorf("the archive holds %d rows, want the %d eligible, each once", n, len(o.eligible))
			}

			// A copy that differs from the swept row: the batch stops, naming the key.
			exec(t, pool, `INSERT INTO audit_log (actor_account_id, action, retention_bucket, details, occurred_at)
				VALUES (NULL, 'late', 'operational', '{}', $1::timestamptz - interval '100 days')`, at)
			id := count(t, pool, `SELECT id FROM audit_log WHERE action = 'late'`)
			exec(t, pool, `INSERT INTO `+archive+` (`+columns+`) OVERRIDING SYSTEM VALUE SELECT id, actor_account_id, 'changed', retention_bucket, details, occurred_at
				FROM audit_log WHERE action = 'late'`)
			res, err = r.Run(ctx, "audit-archive", sweep.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Failed() || res.Error == nil || res.Error.Code != sweep.ArchiveDiffersCode ||
				!strings.Contains(res.Error.Message, fmt.Sprintf("Key (id)=(%d)", id)) {
				t.Fatalf("run %+v (error %+v): want batch-error %s naming Key (id)=(%d)", res, res.Error, sweep.ArchiveDiffersCode, id)
			}
			if n := count(t, pool, `SELECT count(*) FROM audit_log WHERE action = 'late'`); n != 1 {
				t.Errorf("the row whose copy differs is gone from audit_log")
			}
		})
	}
}
