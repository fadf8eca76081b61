package sweep_test

import (
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbtest"
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
			t.Run("delete_with", func(t *testing.T) {
				t.Parallel()
				testPathDeleteWith(t, tp, 0)
			})
			t.Run("delete_with under max_rows", func(t *testing.T) {
				t.Parallel()
				testPathDeleteWith(t, tp, 250)
			})
			t.Run("archive_to", func(t *testing.T) {
				t.Parallel()
				testPathArchive(t, tp, 0)
			})
			t.Run("archive_to under max_rows", func(t *testing.T) {
				t.Parallel()
				testPathArchive(t, tp, 100)
			})
			t.Run("max_rows", func(t *testing.T) {
				t.Parallel()
				testPathMaxRows(t, tp)
			})
		})
	}
}

// testPathDeleteWith sweeps 1,000 events, a tenth still open, each with its deliveries and
// receipts, a row per page, in batches of 100 (ranges of 100 blocks), capped at maxRows a tick
// when set; every tick it checks no event lost only some of its children.
func testPathDeleteWith(t *testing.T, tp testPath, maxRows int) {
	pool := dbtest.Pool(t)
	exec(t, pool, `
CREATE TABLE events (id bigint PRIMARY KEY, state text NOT NULL, closed_at timestamptz NOT NULL, note text NOT NULL);
CREATE INDEX events_closed_at ON events (closed_at);
CREATE TABLE deliveries (id bigserial PRIMARY KEY, event_id bigint NOT NULL REFERENCES events (id));
CREATE INDEX deliveries_event_id ON deliveries (event_id);
CREATE TABLE receipts (id bigserial PRIMARY KEY, event_id bigint NOT NULL REFERENCES events (id) ON DELETE RESTRICT);
CREATE INDEX receipts_event_id ON receipts (event_id);`)
	onePerPage(t, pool, "events")
	at := dbNow(t, pool)
	exec(t, pool, `INSERT INTO events SELECT i, CASE WHEN i % 10 = 0 THEN 'open' ELSE 'terminal' END,
		$1::timestamptz - interval '40 days' + i * interval '1 minute', `+pad+` FROM generate_series(1, 1000) i`, at)
	exec(t, pool, `INSERT INTO deliveries (event_id) SELECT i FROM generate_series(1, 1000) i, generate_series(1, i % 4)`)
	exec(t, pool, `INSERT INTO receipts (event_id) SELECT i FROM generate_series(1, 1000) i, generate_series(1, i % 3)`)
	yaml := `sweeps:
  - name: events
    passes:
      - name: terminal
        table: events
        age_column: closed_at
        where: t.state = 'terminal'
        retention: 30d
        delete_with:
          - table: deliveries
            column: event_id
          - table: receipts
            column: event_id
`
	if maxRows > 0 {
		yaml += "        max_rows: 250\n"
	}
	pol := load(t, yaml)
	var eligible, deliveries, receipts, allDeliveries int64
	for i := int64(1); i <= 1000; i++ {
		allDeliveries += i % 4
		if i%10 != 0 {
			eligible, deliveries, receipts = eligible+1, deliveries+i%4, receipts+i%3
		}
	}
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
		if n := count(t, pool, `SELECT count(*) FROM events e WHERE (SELECT count(*) FROM deliveries d WHERE d.event_id = e.id) <> e.id % 4
			OR (SELECT count(*) FROM receipts r WHERE r.event_id = e.id) <> e.id % 3`); n != 0 {
			t.Fatalf("tick %d: %d events lost some of their children", tick, n)
		}
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
	if n := count(t, pool, `SELECT count(*) FROM events`); n != 100 {
		t.Errorf("%d events left, want the 100 open ones", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM deliveries`); n != allDeliveries-deliveries {
		t.Errorf("%d deliveries left, want the open events' %d", n, allDeliveries-deliveries)
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
	spec := auditArchiveSpec(sweep.ModeBatched, "archive.audit_log")
	spec.Passes[0].MaxRows = maxRows
	// Ranges of two blocks: audit_log's rows are narrow, so a range holds dozens of them.
	r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: []sweep.Spec{spec}, Settings: fixed(settings(), 40), AsOf: fixedAsOf(at)}, 2))
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
	r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: []sweep.Spec{capped}, Settings: fixed(settings(), 100), AsOf: fixedAsOf(at)}, 100))
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
