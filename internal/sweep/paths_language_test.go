package sweep_test

import (
	"fmt"
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestPathsLanguage runs the policy language's batch forms on every path and every form
// (testPaths): delete_with, archive_to and max_rows each change the batch statement (the heap
// path's capped form, its bare DELETE where nothing needs the deleted rows, the archive's INSERT
// around the delete), so each is held to its exactness on each.
func TestPathsLanguage(t *testing.T) {
	t.Parallel()
	for _, tp := range testPaths {
		t.Run(tp.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name string
				test func(t *testing.T, tp testPath)
			}{
				{"delete_with", func(t *testing.T, tp testPath) { testPathDeleteWith(t, tp, 0) }},
				{"delete_with under max_rows", func(t *testing.T, tp testPath) { testPathDeleteWith(t, tp, 250) }},
				{"archive_to", func(t *testing.T, tp testPath) { testPathArchive(t, tp, 0) }},
				{"archive_to under max_rows", func(t *testing.T, tp testPath) { testPathArchive(t, tp, 100) }},
				{"max_rows", testPathMaxRows},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.test(t, tp)
				})
			}
		})
	}
}

// testPathDeleteWith sweeps 1,000 events, a tenth still open, each with its deliveries and
// receipts, a row per page, in batches of 100 (ranges of 100 blocks), capped at maxRows a tick
// when set; every tick it checks no event lost only some of its children.
func testPathDeleteWith(t *testing.T, tp testPath, maxRows int) {
	pool := dbtest.Pool(t)
	exec(t, pool, familySchema)
	onePerPage(t, pool, "events")
	at := dbNow(t, pool)
	seedFamilies(t, pool, at, true)
	extra := familyBoth
	if maxRows > 0 {
		extra += fmt.Sprintf("        max_rows: %d\n", maxRows)
	}
	pol := load(t, familyPolicy(extra))
	eligible, deliveries, receipts := familyOracle()
	r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: pol.Specs, Settings: fixed(settings(), 100), AsOf: fixedAsOf(at)}, 100))
	var deleted, gotDeliveries, gotReceipts int64
	for tick := 1; ; tick++ {
		res := run(t, r, "events")
		p := res.Passes[0]
		if res.Error != nil || p.Path != string(tp.path) {
			t.Fatalf("tick %d: path %q, error %+v; want path %q, no error", tick, p.Path, res.Error, tp.path)
		}
		deleted += p.Deleted
		gotDeliveries += p.Children[0].Rows
		gotReceipts += p.Children[1].Rows
		checkFamilies(t, pool, tick)
		if maxRows > 0 && deleted < eligible {
			if p.Deleted != int64(maxRows) || p.StopReason != wire.StopBatchCap {
				t.Fatalf("tick %d: deleted %d, %s; want exactly %d, batch-cap", tick, p.Deleted, p.StopReason, maxRows)
			}
			continue
		}
		if p.StopReason != wire.StopExhausted {
			t.Fatalf("tick %d: %+v; want exhausted", tick, p)
		}
		break
	}
	if deleted != eligible || gotDeliveries != deliveries || gotReceipts != receipts {
		t.Errorf("deleted %d events, %d deliveries, %d receipts; want %d, %d, %d", deleted, gotDeliveries, gotReceipts, eligible, deliveries, receipts)
	}
	if n := count(t, pool, `SELECT count(*) FROM events WHERE state = 'open'`); n != 100 {
		t.Errorf("%d open events left, want 100", n)
	}
}

// testPathArchive moves audit_log's 250 eligible rows into a local archive, at most maxRows a run
// when set: every run moves exactly what it deletes, and at the end the archive and the table together hold
// every row once.
func testPathArchive(t *testing.T, tp testPath, maxRows int) {
	pool := dbtest.Pool(t)
	exec(t, pool, localArchive)
	at := dbNow(t, pool)
	seedAudit(t, pool, at, 250, 20)
	o := newAuditOracle(t, pool, at)
	spec := auditArchiveSpec(policy.ModeBatched, "archive.audit_log")
	spec.Passes[0].MaxRows = maxRows
	// Ranges of two blocks: audit_log's rows are narrow, so a range holds dozens of them.
	r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: []policy.Spec{spec}, Settings: fixed(settings(), 40), AsOf: fixedAsOf(at)}, 2))
	var moved int64
	for tick := 1; ; tick++ {
		res := run(t, r, "audit-archive")
		p := res.Passes[0]
		if res.Error != nil || p.Path != string(tp.path) || p.Archived != p.Deleted {
			t.Fatalf("tick %d: path %q, deleted %d, archived %d, error %+v", tick, p.Path, p.Deleted, p.Archived, res.Error)
		}
		moved += p.Deleted
		if maxRows > 0 && moved < 250 {
			if p.Deleted != int64(maxRows) || p.StopReason != wire.StopBatchCap {
				t.Fatalf("tick %d: moved %d, %s; want exactly %d, batch-cap", tick, p.Deleted, p.StopReason, maxRows)
			}
			continue
		}
		if p.StopReason != wire.StopExhausted || moved != 250 {
			t.Fatalf("tick %d: %s after %d moved; want exhausted after 250", tick, p.StopReason, moved)
		}
		break
	}
	if n := o.check(t, pool, pool, "archive.audit_log", true); n != 250 {
		t.Errorf("archive holds %d rows, want 250", n)
	}
}

// testPathMaxRows sweeps 1,000 notifications capped at 750 a run, in batches of 100 (ranges of
// 100 blocks): seven full batches, then one of the 50 the cap leaves, however many its range holds.
func testPathMaxRows(t *testing.T, tp testPath) {
	pool := dbtest.Pool(t)
	at := dbNow(t, pool)
	seedNotifications(t, pool, at, 1000, 10)
	capped := spec(t, "notifications")
	capped.Passes[0].MaxRows = 750
	r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: []policy.Spec{capped}, Settings: fixed(settings(), 100), AsOf: fixedAsOf(at)}, 100))
	res := run(t, r, "notifications")
	if p := res.Passes[0]; p.Deleted != 750 || p.BatchCount != 8 || p.StopReason != wire.StopBatchCap || !res.Truncated || p.Path != string(tp.path) {
		t.Fatalf("first run: %+v truncated %t; want 750 rows in 8 batches on %s, batch-cap", p, res.Truncated, tp.path)
	}
	res = run(t, r, "notifications")
	if p := res.Passes[0]; p.Deleted != 250 || p.StopReason != wire.StopExhausted {
		t.Fatalf("second run: %+v; want the 250 left, exhausted", p)
	}
	if old, fresh := remaining(t, pool); old != 0 || fresh != 10 {
		t.Fatalf("left %d old and %d fresh, want 0 and 10", old, fresh)
	}
}
