package sweep_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// The archive tests sweep the reference schema's audit_log, whose operational rows go after 90
// days, into an archive, and judge every run against an oracle written from the rule: the rows
// as they were before, and which of them were eligible. Whatever stopped the run, every row is
// in exactly one of the swept table and the archive, unchanged, the archive holds only eligible
// rows, and once a run completes it holds every one of them.

const auditRetention = 90 * 24 * time.Hour

// seedAudit inserts into audit_log, as of at: n operational rows past the 90-day window (three
// to a timestamp, so batches meet ties), keep operational rows inside it, and keep compliance
// rows past it (another pass's). Every fifth actor is NULL.
// An index-path batch of 100 ends before a tie it would split (its range of ages ends at the
// 101st row's age). Of seedAudit's 250 rows, oldest first, the first batch moves 98 (two rows,
// then 32 timestamps of three); of 450, the first moves 100 (one, then 33 of three) and the
// second 99.
const (
	firstBatchOf250   = 98
	firstBatchesOf450 = 100 + 99
	restOf250         = 250 - firstBatchOf250
	restOf450         = 450 - firstBatchesOf450
)

func seedAudit(t *testing.T, pool *pgxpool.Pool, at time.Time, n, keep int) {
	t.Helper()
	exec(t, pool, `
INSERT INTO audit_log (actor_account_id, action, retention_bucket, details, occurred_at)
SELECT CASE WHEN i % 5 = 0 THEN NULL ELSE gen_random_uuid() END, 'old ' || i, 'operational',
       jsonb_build_object('i', i, 'note', 'a "quoted", note'), $1::timestamptz - interval '91 days' - (i / 3) * interval '1 minute'
FROM generate_series(1, $2::int) i`, at, n)
	exec(t, pool, `
INSERT INTO audit_log (actor_account_id, action, retention_bucket, details, occurred_at)
SELECT gen_random_uuid(), 'fresh ' || i, 'operational', '{}', $1::timestamptz - interval '89 days'
FROM generate_series(1, $2::int) i`, at, keep)
	exec(t, pool, `
INSERT INTO audit_log (actor_account_id, action, retention_bucket, details, occurred_at)
SELECT gen_random_uuid(), 'compliance ' || i, 'compliance', '{}', $1::timestamptz - interval '200 days'
FROM generate_series(1, $2::int) i`, at, keep)
}

// auditArchiveSpec is the audit-log sweep's operational pass, archiving to archive.
func auditArchiveSpec(mode policy.Mode, archive string) policy.Spec {
	return policy.Spec{Name: "audit-archive", Passes: []policy.Pass{{
		Name: "operational", Table: "audit_log", AgeColumn: "occurred_at", Where: "t.retention_bucket = 'operational'",
		Retention: auditRetention, Mode: mode, ArchiveTo: archive,
	}}}
}

// localArchive is an archive table as an operator makes one: the swept table's columns with
// its identity (GENERATED ALWAYS) and keys, and an archived_at of its own.
const localArchive = `CREATE SCHEMA archive;
CREATE TABLE archive.audit_log (LIKE public.audit_log INCLUDING ALL, archived_at timestamptz NOT NULL DEFAULT now())`

// auditRowSQL is a row of audit_log (or of an archive of it) as text, the same on any server
// whatever its time zone, keyed by id.
const auditRowSQL = `SELECT id, ROW(id, actor_account_id, action, retention_bucket, details, occurred_at AT TIME ZONE 'UTC')::text FROM `

// auditOracle is the audit_log before a sweep: each row as text, and the ids the pass may move.
type auditOracle struct {
	rows     map[int64]string
	eligible map[int64]bool
}

func newAuditOracle(t *testing.T, pool *pgxpool.Pool, at time.Time) auditOracle {
	t.Helper()
	o := auditOracle{rows: rowsByID(t, pool, auditRowSQL+"audit_log"), eligible: map[int64]bool{}}
	rows, err := pool.Query(ctx, `SELECT id FROM audit_log WHERE retention_bucket = 'operational' AND occurred_at < $1::timestamptz - $2::interval`,
		at, auditRetention)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		o.eligible[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(o.eligible) == 0 {
		t.Fatal("oracle: nothing eligible; the test would prove nothing")
	}
	return o
}

// rowsByID runs query (id, row text) and fails the test on an id seen twice.
func rowsByID(t *testing.T, pool *pgxpool.Pool, query string) map[int64]string {
	t.Helper()
	rows, err := pool.Query(ctx, query)
	if err != nil {
		t.Fatalf("%v\n%s", err, query)
	}
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[id]; dup {
			t.Errorf("row %d is there twice: %s", id, query)
		}
		out[id] = text
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// check judges the swept table and the archive (read from archivePool) after a run: every row in
// exactly one of them, unchanged; the archive holding only eligible rows; and, when complete,
// every eligible row. It returns how many rows the archive holds.
func (o auditOracle) check(t *testing.T, pool, archivePool *pgxpool.Pool, archive string, complete bool) int {
	t.Helper()
	source := rowsByID(t, pool, auditRowSQL+"audit_log")
	archived := rowsByID(t, archivePool, auditRowSQL+archive)
	for id, text := range archived {
		switch {
		case o.rows[id] == "":
			t.Errorf("archived row %d was never in audit_log: %s", id, text)
		case o.rows[id] != text:
			t.Errorf("row %d changed on its way to the archive:\n was %s\n  is %s", id, o.rows[id], text)
		case !o.eligible[id]:
			t.Errorf("row %d was archived but is not eligible: %s", id, text)
		}
		if _, ok := source[id]; ok {
			t.Errorf("row %d is both in audit_log and in the archive", id)
		}
	}
	for id, text := range o.rows {
		_, inArchive := archived[id]
		now, inSource := source[id]
		switch {
		case !inArchive && !inSource:
			t.Errorf("row %d is lost: in neither audit_log nor the archive: %s", id, text)
		case inSource && now != text:
			t.Errorf("row %d changed in audit_log:\n was %s\n  is %s", id, text, now)
		case complete && o.eligible[id] && !inArchive:
			t.Errorf("eligible row %d was not archived", id)
		}
	}
	if len(source)+len(archived) != len(o.rows) {
		t.Errorf("%d rows in audit_log and %d in the archive, want %d in all", len(source), len(archived), len(o.rows))
	}
	return len(archived)
}

// archiveRunner is a runner of spec with fixed batches of size, pinned at at; after, when set, is
// called after each batch with the number of batches done (the runner's pause hook).
func archiveRunner(t *testing.T, pool *pgxpool.Pool, spec policy.Spec, at time.Time, size int, after func(batches int)) *sweep.Runner {
	t.Helper()
	s := fixed(settings(), size)
	// Roomy: tests that hold a lock end the batch themselves, long before these.
	s.StatementTimeout, s.LockTimeout = 30*time.Second, 30*time.Second
	cfg := sweep.Config{Pool: pool, Specs: []policy.Spec{spec}, Settings: s, AsOf: fixedAsOf(at)}
	if after != nil {
		s.Pause = time.Millisecond
		cfg.Settings = s
		batches := 0
		cfg.Sleep = func(context.Context, time.Duration) { batches++; after(batches) }
	}
	return newRunner(t, cfg)
}

// waitBlocked polls the server of pool until a session running a statement that contains marker
// waits for a lock, and returns its pid.
func waitBlocked(t *testing.T, pool *pgxpool.Pool, marker string) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var pid int
		err := pool.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE cardinality(pg_blocking_pids(pid)) > 0 AND strpos(query, $1) > 0`, marker).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		if pid != 0 {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no session running %q ever waited for a lock", marker)
	return 0
}

func TestArchive(t *testing.T) {
	t.Parallel()
	const archive = "archive.audit_log"

	t.Run("a batched pass moves exactly the eligible rows", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, localArchive)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 250, 20)
		o := newAuditOracle(t, pool, at)
		res := run(t, archiveRunner(t, pool, auditArchiveSpec(policy.ModeBatched, archive), at, 100, nil), "audit-archive")
		if n := o.check(t, pool, pool, archive, true); n != 250 {
			t.Errorf("archive holds %d rows, want 250", n)
		}
		// 100, 100, then 50: the keyset cursor still works (ties included).
		if res.Deleted != 250 || res.Archived != 250 || res.Passes[0].Archived != 250 || res.BatchCount != 3 || res.StopReason != wire.StopExhausted {
			t.Errorf("answer: deleted %d, archived %d (pass %d) in %d batches, %s; want 250, 250 in 3, exhausted",
				res.Deleted, res.Archived, res.Passes[0].Archived, res.BatchCount, res.StopReason)
		}
		if n := count(t, pool, `SELECT count(*) FROM archive.audit_log WHERE archived_at IS NULL`); n != 0 {
			t.Errorf("%d archived rows without archived_at: the archive's own default must fill it", n)
		}
		// The rows keep their ids in an archive whose id is GENERATED ALWAYS AS IDENTITY.
		if res = run(t, archiveRunner(t, pool, auditArchiveSpec(policy.ModeBatched, archive), at, 100, nil), "audit-archive"); res.Deleted != 0 || res.Archived != 0 {
			t.Errorf("a second run moved %d rows (archived %d), want none", res.Deleted, res.Archived)
		}
	})

	t.Run("a single pass moves them in one statement", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, localArchive)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 40, 5)
		o := newAuditOracle(t, pool, at)
		res := run(t, archiveRunner(t, pool, auditArchiveSpec(policy.ModeSingle, archive), at, 10, nil), "audit-archive")
		o.check(t, pool, pool, archive, true)
		if res.Deleted != 40 || res.Archived != 40 || res.BatchCount != 1 {
			t.Errorf("deleted %d, archived %d in %d batches; want 40, 40 in 1", res.Deleted, res.Archived, res.BatchCount)
		}
	})

	t.Run("a pass without archive_to archives nothing", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 30, 5)
		res := run(t, archiveRunner(t, pool, auditArchiveSpec(policy.ModeBatched, ""), at, 100, nil), "audit-archive")
		if res.Deleted != 30 || res.Archived != 0 || res.Passes[0].Archived != 0 {
			t.Errorf("deleted %d, archived %d; want 30, 0", res.Deleted, res.Archived)
		}
	})

	t.Run("the dry run counts the same with and without archive_to", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, localArchive)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 120, 10)
		var counts []int64
		for _, archive := range []string{"", archive} {
			r := archiveRunner(t, pool, auditArchiveSpec(policy.ModeBatched, archive), at, 100, nil)
			dr, err := r.DryRun(ctx, "audit-archive")
			if err != nil {
				t.Fatal(err)
			}
			if dr.Passes[0].Eligible == nil {
				t.Fatal("no exact count")
			}
			counts = append(counts, *dr.Passes[0].Eligible)
		}
		if counts[0] != 120 || counts[1] != 120 {
			t.Errorf("eligible %v without and with archive_to, want 120 both", counts)
		}
		if n := count(t, pool, `SELECT count(*) FROM archive.audit_log`); n != 0 {
			t.Errorf("the dry run archived %d rows", n)
		}
	})

	// A column added to the swept table after the run read its columns: the next batch's
	// deleted.* is one value longer than the INSERT's list, and the server refuses the statement.
	// Had the INSERT named its values too, the batch would have dropped the new column's data.
	t.Run("a column added mid-run fails the batch and loses nothing", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, localArchive)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 250, 10)
		o := newAuditOracle(t, pool, at)
		r := archiveRunner(t, pool, auditArchiveSpec(policy.ModeBatched, archive), at, 100, func(batches int) {
			if batches == 1 {
				exec(t, pool, `ALTER TABLE audit_log ADD COLUMN source_ip text`)
			}
		})
		res := run(t, r, "audit-archive")
		if res.StopReason != wire.StopBatchError || res.Error == nil || res.Error.Code != "42601" || res.Deleted != firstBatchOf250 || res.Archived != firstBatchOf250 {
			t.Fatalf("got %s, deleted %d, archived %d, error %+v; want batch-error 42601 after one batch of %d", res.StopReason, res.Deleted, res.Archived, res.Error, firstBatchOf250)
		}
		if n := o.check(t, pool, pool, archive, false); n != firstBatchOf250 {
			t.Errorf("archive holds %d rows, want the first batch's %d", n, firstBatchOf250)
		}
		// The archive without the column: every run fails, naming it, and moves nothing.
		res = run(t, r, "audit-archive")
		if res.StopReason != wire.StopBatchError || res.Error == nil || res.Error.Code != "42703" || !strings.Contains(res.Error.Message, "source_ip") {
			t.Fatalf("with the archive behind: %s, error %+v; want batch-error 42703 naming source_ip", res.StopReason, res.Error)
		}
		// The migration adds it to the archive too: the next run of the same runner reads the new
		// list, without a restart.
		exec(t, pool, `ALTER TABLE archive.audit_log ADD COLUMN source_ip text`)
		res = run(t, r, "audit-archive")
		if res.StopReason != wire.StopExhausted || res.Archived != restOf250 {
			t.Fatalf("after the archive's migration: %s, archived %d, error %+v; want exhausted, %d", res.StopReason, res.Archived, res.Error, restOf250)
		}
		o.check(t, pool, pool, archive, true)
	})

	// What a lost remote commit leaves behind (statement/archive.go): a row the archive holds, still in the
	// swept table. An archive with the swept table's key refuses the second copy, and the batch
	// heals: the copy is identical, so the row is recovered.
	t.Run("a row already in the archive heals", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, localArchive)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 250, 10)
		o := newAuditOracle(t, pool, at)
		// The oldest row: the first batch's.
		exec(t, pool, `INSERT INTO archive.audit_log OVERRIDING SYSTEM VALUE
			SELECT * FROM audit_log WHERE retention_bucket = 'operational' ORDER BY occurred_at, id LIMIT 1`)
		res := run(t, archiveRunner(t, pool, auditArchiveSpec(policy.ModeBatched, archive), at, 100, nil), "audit-archive")
		if res.StopReason != wire.StopExhausted || res.Error != nil || res.Deleted != 250 || res.Archived != 249 || res.Passes[0].Recovered != 1 {
			t.Fatalf("got %s, deleted %d, archived %d, error %+v; want exhausted, 250 deleted, 249 archived, 1 recovered", res.StopReason, res.Deleted, res.Archived, res.Error)
		}
		o.check(t, pool, pool, archive, true)
	})

	t.Run("a shutdown between batches stops with what it moved", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, localArchive)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 450, 10)
		o := newAuditOracle(t, pool, at)
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		r := archiveRunner(t, pool, auditArchiveSpec(policy.ModeBatched, archive), at, 100, func(batches int) {
			if batches == 2 {
				cancel() // the API's SIGTERM
			}
		})
		res, err := r.Run(runCtx, "audit-archive", sweep.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.StopReason != wire.StopShutdown || res.Archived != firstBatchesOf450 || res.Deleted != firstBatchesOf450 {
			t.Fatalf("got %s, deleted %d, archived %d; want shutdown after %d", res.StopReason, res.Deleted, res.Archived, firstBatchesOf450)
		}
		o.check(t, pool, pool, archive, false)
		res = run(t, archiveRunner(t, pool, auditArchiveSpec(policy.ModeBatched, archive), at, 100, nil), "audit-archive")
		if res.Archived != restOf450 {
			t.Errorf("the next run archived %d, want the remaining %d", res.Archived, restOf450)
		}
		o.check(t, pool, pool, archive, true)
	})

	// The API dies in the middle of a batch: its connection ends while the statement waits (here
	// on a lock another session holds on the archive), and the server rolls the transaction back.
	t.Run("a connection cut mid-batch moves nothing of that batch", func(t *testing.T) {
		t.Parallel()
		u := dbtest.URL(t)
		pool, err := dbpool.NewPool(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		exec(t, pool, localArchive)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 250, 10)
		o := newAuditOracle(t, pool, at)
		blocker := dbtest.Conn(t, u)
		held := false
		r := archiveRunner(t, pool, auditArchiveSpec(policy.ModeBatched, archive), at, 100, func(batches int) {
			if batches == 1 {
				for _, q := range []string{"BEGIN", "LOCK TABLE archive.audit_log IN SHARE MODE"} {
					if _, err := blocker.Exec(ctx, q); err != nil {
						t.Error(err)
					}
				}
				held = true
			}
		})
		done := make(chan *wire.Result, 1)
		go func() {
			res, err := r.Run(ctx, "audit-archive", sweep.Options{})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		pid := waitBlocked(t, pool, "INSERT INTO \"archive\".\"audit_log\"")
		exec(t, pool, `SELECT pg_terminate_backend($1)`, pid)
		res := <-done
		if _, err := blocker.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if !held || res == nil || res.StopReason != wire.StopBatchError || res.Archived != firstBatchOf250 || res.Deleted != firstBatchOf250 {
			t.Fatalf("got %+v; want batch-error after the first batch of %d", res, firstBatchOf250)
		}
		t.Logf("the cut batch failed with %+v", res.Error)
		if n := o.check(t, pool, pool, archive, false); n != firstBatchOf250 {
			t.Errorf("archive holds %d rows, want the first batch's %d", n, firstBatchOf250)
		}
		res = run(t, archiveRunner(t, pool, auditArchiveSpec(policy.ModeBatched, archive), at, 100, nil), "audit-archive")
		if res.Archived != restOf250 {
			t.Errorf("the next run archived %d, want the remaining %d", res.Archived, restOf250)
		}
		o.check(t, pool, pool, archive, true)
	})

	// A batch that archives commits synchronously (statement/archive.go): an archive trigger records the
	// setting its batch ran with.
	t.Run("an archiving batch commits synchronously", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, localArchive+`;
CREATE TABLE archive.commit_modes (mode text NOT NULL);
CREATE FUNCTION archive.note_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO archive.commit_modes VALUES (current_setting('synchronous_commit'));
    RETURN NULL;
END $$;
CREATE TRIGGER note_commit_mode AFTER INSERT ON archive.audit_log FOR EACH STATEMENT EXECUTE FUNCTION archive.note_commit_mode()`)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 150, 5)
		run(t, archiveRunner(t, pool, auditArchiveSpec(policy.ModeBatched, archive), at, 100, nil), "audit-archive")
		if n := count(t, pool, `SELECT count(*) FROM archive.commit_modes WHERE mode = 'on'`); n != 2 || count(t, pool, `SELECT count(*) FROM archive.commit_modes`) != 2 {
			t.Errorf("%d of the two batches ran with synchronous_commit on", n)
		}
	})

	t.Run("the run history records what was archived", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, localArchive)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 150, 5)
		store := history.New(pool, 30*24*time.Hour)
		spec := auditArchiveSpec(policy.ModeBatched, archive)
		r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec}, Settings: fixed(settings(), 100), AsOf: fixedAsOf(at), History: store})
		run(t, r, "audit-archive")
		runs, err := store.List(ctx, "audit-archive", 1)
		if err != nil || len(runs) != 1 {
			t.Fatalf("%+v %v", runs, err)
		}
		if h := runs[0]; h.Deleted != 150 || h.Archived != 150 || len(h.Passes) != 1 || h.Passes[0].Archived != 150 {
			t.Errorf("history %+v, want 150 deleted and archived, in the run and its pass", h)
		}
	})

	t.Run("rows archived are counted in the metric", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		exec(t, pool, localArchive)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 150, 5)
		reg := prometheus.NewPedanticRegistry()
		m, err := metrics.New(reg, metrics.Labels{Sweeps: []metrics.Sweep{{Name: "audit-archive", Passes: []string{"operational"}, Archiving: []string{"operational"}}}})
		if err != nil {
			t.Fatal(err)
		}
		spec := auditArchiveSpec(policy.ModeBatched, archive)
		r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec}, Settings: fixed(settings(), 100), Metrics: m, AsOf: fixedAsOf(at)})
		run(t, r, "audit-archive")
		want := `
# HELP sweeprail_rows_archived_total Rows moved to an archive table by sweeps (archive_to), by sweep and pass; each was also counted as deleted.
# TYPE sweeprail_rows_archived_total counter
sweeprail_rows_archived_total{pass="operational",sweep="audit-archive"} 150
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sweeprail_rows_archived_total"); err != nil {
			t.Error(err)
		}
	})
}

// TestArchivePolicy loads archive_to from a policy file and refuses what cannot archive.
func TestArchivePolicy(t *testing.T) {
	t.Parallel()
	t.Run("loads and shows in the catalog", func(t *testing.T) {
		pol, err := policy.Load("p.yaml", []byte(policyYAML(passYAML("audit_log", "occurred_at", "archive_to: archive.audit_log"))))
		if err != nil {
			t.Fatal(err)
		}
		p := pol.Specs[0].Passes[0]
		if p.ArchiveTo != "archive.audit_log" || policy.CatalogPass(p).ArchiveTo != "archive.audit_log" {
			t.Errorf("archive_to %q, catalog %q", p.ArchiveTo, policy.CatalogPass(p).ArchiveTo)
		}
	})
	for _, tc := range []struct{ name, pass, want string }{
		{"per-row", passYAML("accounts", "deletion_requested_at", "mode: per-row", "function: wipe_account", "archive_to: archive.accounts"),
			`p.yaml:10: pass "p" of sweep "s": archive_to is for modes batched and single`},
		{"partitions", passYAML("audit_log", "occurred_at", "mode: partitions", "archive_to: archive.audit_log"),
			`p.yaml:9: pass "p" of sweep "s": archive_to is for modes batched and single: in mode partitions a dropped partition's rows would not be archived`},
		{"the table itself", passYAML("audit_log", "occurred_at", "archive_to: audit_log"),
			`p.yaml:8: pass "p" of sweep "s": archive_to "audit_log" is the swept table itself`},
		{"quoted", passYAML("audit_log", "occurred_at", `archive_to: '"archive".audit_log'`),
			`p.yaml:8: pass "p" of sweep "s": archive_to "\"archive\".audit_log": write the name without quotes`},
		{"not a string", passYAML("audit_log", "occurred_at", "archive_to: [a]"),
			`p.yaml:8: pass "p" of sweep "s": archive_to is a list: want a string`},
		{"misspelt", passYAML("audit_log", "occurred_at", "archiveTo: archive.audit_log"),
			`unknown key "archiveTo" in a pass (did you mean "archive_to"?)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.Load("p.yaml", []byte(policyYAML(tc.pass)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestArchiveIsNotTheSweptTable spells the swept table as its own archive in every way a policy
// can: each is refused, at load where the names alone say so, else by the check (the tables'
// oids), and a run of specs that were never checked refuses it too, before anything is deleted.
func TestArchiveIsNotTheSweptTable(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	exec(t, pool, `CREATE TABLE "AuditTrail" (LIKE audit_log INCLUDING ALL)`)
	at := dbNow(t, pool)
	seedAudit(t, pool, at, 30, 5)
	exec(t, pool, `INSERT INTO "AuditTrail" OVERRIDING SYSTEM VALUE SELECT * FROM audit_log`)
	const where = "where: t.retention_bucket = 'operational'"
	for _, tc := range []struct {
		name, table, archive string
		// atLoad is the loader's refusal; "" when the names differ and the live schema must tell.
		atLoad string
	}{
		{"bare", "audit_log", "audit_log", `archive_to "audit_log" is the swept table itself: name another table`},
		{"quoted", "audit_log", `'"audit_log"'`, `archive_to "\"audit_log\"": write the name without quotes`},
		{"schema-qualified", "audit_log", "public.audit_log", ""},
		{"the swept table schema-qualified", "public.audit_log", "audit_log", ""},
		{"a name SQL must quote, schema-qualified", "AuditTrail", "public.AuditTrail", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := policyYAML(passYAML(tc.table, "occurred_at", where, "archive_to: "+tc.archive))
			pol, err := policy.Load("p.yaml", []byte(yaml))
			if tc.atLoad != "" {
				if want := `p.yaml:9: pass "p" of sweep "s": ` + tc.atLoad; err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("load: %v\nwant %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			_, err = check.Policy(ctx, pool, pol)
			want := fmt.Sprintf(`p.yaml:9: pass "p" of sweep "s": archive_to %q is the swept table itself: name another table`, tc.archive)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("check: %v\nwant %s", err, want)
			}
			table := strings.TrimPrefix(tc.table, "public.")
			before := count(t, pool, fmt.Sprintf(`SELECT count(*) FROM %q`, table))
			r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings(), AsOf: fixedAsOf(at)})
			res := run(t, r, "s")
			want = fmt.Sprintf(`archive_to %q is the swept table %q itself`, tc.archive, tc.table)
			if res.StopReason != wire.StopBatchError || res.Error == nil || !strings.Contains(res.Error.Message, want) ||
				res.Deleted != 0 || res.Archived != 0 || res.BatchCount != 0 {
				t.Fatalf("run: %+v (error %+v), want batch-error %q before any batch", res, res.Error, want)
			}
			if n := count(t, pool, fmt.Sprintf(`SELECT count(*) FROM %q`, table)); n != before {
				t.Fatalf("%s holds %d rows after the run, %d before", table, n, before)
			}
		})
	}
}
