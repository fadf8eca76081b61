package sweep_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// TestHealNeedsTheCopy: a healing batch counts a row as recovered only when the archive holds
// its copy under its key. ON CONFLICT DO NOTHING skips a clash on any unique index of the
// archive, so an archive with a second one skips a swept row clashing with a row of another
// id: that row is in the archive under no key of its own, and the batch must roll back, leaving
// it in the swept table, rather than delete it as recovered.
func TestHealNeedsTheCopy(t *testing.T) {
	t.Parallel()
	for _, mode := range []policy.Mode{policy.ModeBatched, policy.ModeSingle} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			at := dbNow(t, pool)
			seedAudit(t, pool, at, 40, 5)
			exec(t, pool, localArchive)
			exec(t, pool, `CREATE UNIQUE INDEX audit_log_action ON archive.audit_log (action)`)
			exec(t, pool, `INSERT INTO archive.audit_log (id, action, retention_bucket, details, occurred_at) OVERRIDING SYSTEM VALUE
				VALUES (1000000, 'old 7', 'operational', '{}', now())`)
			r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{auditArchiveSpec(mode, "archive.audit_log")}, Settings: fixed(settings(), 10), AsOf: fixedAsOf(at)})
			res, err := r.Run(ctx, "audit-archive", sweep.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Failed() || res.Error == nil || res.Error.Code != sweep.ArchiveDiffersCode || res.Passes[0].Recovered != 0 {
				t.Errorf("run %+v (error %+v): want batch-error %s, nothing recovered", res, res.Error, sweep.ArchiveDiffersCode)
			}
			id := count(t, pool, `SELECT id FROM audit_log WHERE action = 'old 7'`)
			if want := fmt.Sprintf("holds no copy of, on another of its unique indexes: Key (id)=(%d)", id); res.Error != nil && !strings.Contains(res.Error.Message, want) {
				t.Errorf("message %q: want %q", res.Error.Message, want)
			}
			if n := count(t, pool, `SELECT count(*) FROM audit_log WHERE action = 'old 7'`); n != 1 {
				t.Errorf("row 'old 7' left audit_log, and the archive holds no copy of it: only a row of another id")
			}
			if n := count(t, pool, `SELECT count(*) FROM archive.audit_log a JOIN audit_log s USING (id)`); n != 0 {
				t.Errorf("the archive holds %d rows still in audit_log: a rolled-back batch's", n)
			}
		})
	}
}
