package sweep_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// epochSchema is a table whose times are BIGINT milliseconds of Unix time, as a chat server keeps
// them, with the btree indexes a team would have: the age column's own, and the guard column's.
const epochSchema = `
CREATE TABLE receipts (id bigserial PRIMARY KEY, received_ts bigint NOT NULL, expiry_ts bigint, room text NOT NULL DEFAULT 'r');
CREATE INDEX receipts_received_ts ON receipts (received_ts);
CREATE INDEX receipts_expiry_ts ON receipts (expiry_ts);
CREATE TABLE receipts_archive (LIKE receipts);
CREATE TABLE pins (receipt_id bigint NOT NULL, last_seen bigint NOT NULL);
CREATE INDEX pins_receipt_id ON pins (receipt_id);
CREATE FUNCTION forget_receipt(k bigint) RETURNS boolean LANGUAGE sql AS $$
  DELETE FROM receipts WHERE id = k RETURNING true $$;
`

const epochRetention = 30 * 24 * time.Hour

// seedEpoch writes the boundary rows, 1 ms either side of the cutoff and on it, then old rows
// enough for several batches of 50, and returns the cutoff in milliseconds.
func seedEpoch(t *testing.T, pool *pgxpool.Pool, at time.Time, old int) int64 {
	t.Helper()
	cut := statement.EpochOf(statement.EpochMilliseconds, at.Add(-epochRetention))
	exec(t, pool, `INSERT INTO receipts (id, received_ts) VALUES (1, $1::bigint - 1), (2, $1::bigint), (3, $1::bigint + 1)`, cut)
	exec(t, pool, `INSERT INTO receipts (id, received_ts) SELECT 100 + i, $1::bigint - 1000 - i * 7 FROM generate_series(1, $2) i`, cut, old)
	exec(t, pool, `SELECT setval('receipts_id_seq', 100000)`)
	return cut
}

func epochPass(extra func(*policy.Pass)) []policy.Spec {
	p := policy.Pass{Name: "seen", Table: "receipts", AgeColumn: "received_ts", AgeUnit: policy.AgeMilliseconds, Retention: epochRetention}
	if extra != nil {
		extra(&p)
	}
	return []policy.Spec{{Name: "receipts", Passes: []policy.Pass{p}}}
}

// left is the ids still in receipts, as a string to compare.
func left(t *testing.T, pool *pgxpool.Pool, where string) string {
	t.Helper()
	var ids []int64
	if err := pool.QueryRow(ctx, "SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM receipts WHERE "+where).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(ids)
}

// TestEpochAges sweeps a BIGINT-milliseconds age column on every access path and in every mode
// that applies: exactly the rows a whole millisecond before the cutoff go, the row on it and the
// one after it stay, and the policy check finds the column's own index serving the batches.
func TestEpochAges(t *testing.T) {
	t.Parallel()
	for _, tp := range testPaths {
		t.Run("batched, "+tp.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			exec(t, pool, epochSchema)
			at := dbNow(t, pool)
			cut := seedEpoch(t, pool, at, 220)
			onePerPageReceipts(t, pool)
			specs := epochPass(nil)
			if warnings, err := check.Specs(ctx, pool, specs); err != nil || len(warnings) > 0 {
				t.Fatalf("check: %v %v", warnings, err)
			}
			s := settings()
			s.BatchSize = 50
			store := history.New(pool, time.Hour)
			clock := newFakeClock()
			r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: specs, Settings: s, AsOf: fixedAsOf(at), History: store,
				Now: func() time.Time { clock.Advance(time.Millisecond); return clock.Now() }}, 50))
			res := run(t, r, "receipts")
			if res.Deleted != 221 || res.StopReason != wire.StopExhausted || res.BatchCount < 3 || res.Passes[0].Path != string(tp.path) {
				t.Fatalf("run: %+v; want 221 deleted in 3 or more batches of the %s path, exhausted", res.Passes[0], tp.path)
			}
			if got := left(t, pool, "true"); got != "[2 3]" {
				t.Fatalf("left %s, want the rows on the cutoff and 1 ms after it", got)
			}
			// The answer's cutoff is the one the rows went by: every row below it gone, the one
			// on it kept; the instant is the reference time minus the retention.
			p := res.Passes[0]
			if p.CutoffEpoch == nil || *p.CutoffEpoch != cut || p.AgeUnit != policy.AgeMilliseconds ||
				!p.Cutoff.Equal(at.Add(-epochRetention)) || p.Cutoff.Location() != time.UTC || !res.ReferenceTime.Equal(at) || p.DurationMs <= 0 {
				t.Fatalf("answer: cutoff %v (%v %s), reference time %v, %d ms; want %v (%d milliseconds), %v, a duration",
					p.Cutoff, p.CutoffEpoch, p.AgeUnit, res.ReferenceTime, p.DurationMs, at.Add(-epochRetention), cut, at)
			}
			runs, err := store.List(ctx, "receipts", 1)
			if err != nil || len(runs) != 1 {
				t.Fatalf("history: %v %v", runs, err)
			}
			h := runs[0].Passes[0]
			if runs[0].ReferenceTime == nil || !runs[0].ReferenceTime.Equal(at) || h.Cutoff == nil || !h.Cutoff.Equal(p.Cutoff) ||
				h.CutoffEpoch == nil || *h.CutoffEpoch != cut || h.DurationMs != p.DurationMs {
				t.Fatalf("history: %+v, pass %+v; want the answer's reference time, cutoff and duration", runs[0], h)
			}
		})
	}

	modes := []struct {
		name  string
		pass  func(*policy.Pass)
		table string
		seed  func(t *testing.T, pool *pgxpool.Pool, cut int64)
		want  string
	}{
		{"single", func(p *policy.Pass) { p.Mode = policy.ModeSingle }, "", nil, "[2 3]"},
		{"per-row", func(p *policy.Pass) { p.Mode, p.Function = policy.ModePerRow, "forget_receipt" }, "", nil, "[2 3]"},
		{"archive_to", func(p *policy.Pass) { p.ArchiveTo = "receipts_archive" }, "receipts_archive", nil, "[2 3]"},
		{"archive_to, single", func(p *policy.Pass) { p.Mode, p.ArchiveTo = policy.ModeSingle, "receipts_archive" }, "receipts_archive", nil, "[2 3]"},
		{"where and keep guard with :cutoff in milliseconds", func(p *policy.Pass) {
			p.Where = "t.room <> 'keep' AND t.received_ts < :cutoff"
			p.Guards = []policy.Guard{{Table: "pins", Columns: []string{"receipt_id"}, Where: "g.last_seen >= :cutoff"}}
		}, "", func(t *testing.T, pool *pgxpool.Pool, cut int64) {
			exec(t, pool, `UPDATE receipts SET room = 'keep' WHERE id = 101`)
			// A pin seen on the cutoff keeps its receipt; one seen 1 ms before it does not.
			exec(t, pool, `INSERT INTO pins VALUES (102, $1::bigint), (103, $1::bigint - 1)`, cut)
		}, "[2 3 101 102]"},
		{"expiry", func(p *policy.Pass) { p.AgeColumn, p.Expiry, p.Retention = "expiry_ts", true, 0 }, "", func(t *testing.T, pool *pgxpool.Pool, cut int64) {
			// Expiry 1 ms before the reference time goes, on it and after it stays.
			exec(t, pool, `UPDATE receipts SET expiry_ts = $1::bigint + CASE id WHEN 1 THEN -1 WHEN 2 THEN 0 WHEN 3 THEN 1 ELSE -5 END`, cut+epochRetention.Milliseconds())
		}, "[2 3]"},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			exec(t, pool, epochSchema)
			at := dbNow(t, pool)
			cut := seedEpoch(t, pool, at, 30)
			if m.seed != nil {
				m.seed(t, pool, cut)
			}
			analyze(t, pool, "ANALYZE receipts")
			specs := epochPass(m.pass)
			if warnings, err := check.Specs(ctx, pool, specs); err != nil || len(warnings) > 0 {
				t.Fatalf("check: %v %v", warnings, err)
			}
			r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Settings: settings(), AsOf: fixedAsOf(at)})
			dry, err := r.DryRun(ctx, "receipts")
			if err != nil {
				t.Fatal(err)
			}
			before := count(t, pool, "SELECT count(*) FROM receipts")
			res := run(t, r, "receipts")
			if res.StopReason != wire.StopExhausted {
				t.Fatalf("run: %+v", res)
			}
			if got := left(t, pool, "true"); got != m.want {
				t.Fatalf("left %s, want %s", got, m.want)
			}
			gone := before - count(t, pool, "SELECT count(*) FROM receipts")
			if n := res.Passes[0].Deleted + res.Passes[0].Processed; n != gone || (m.name == "per-row") != (res.Passes[0].Processed > 0) {
				t.Fatalf("run: %+v; want %d rows, per-row ones as processed", res.Passes[0], gone)
			}
			dp := dry.Passes[0]
			if dp.Eligible == nil || *dp.Eligible != gone || !dp.Indexed || dp.CutoffEpoch == nil || res.Passes[0].CutoffEpoch == nil || *dp.CutoffEpoch != *res.Passes[0].CutoffEpoch {
				t.Fatalf("dry run %+v; want %d eligible, indexed, the run's cutoff", dp, gone)
			}
			if m.table != "" {
				if n := count(t, pool, "SELECT count(*) FROM "+m.table+" WHERE received_ts < $1::bigint", cut); n != gone {
					t.Fatalf("archived %d, want the %d deleted", n, gone)
				}
			}
		})
	}
}

// onePerPageReceipts lays receipts out a row per page (onePerPage, with rows of a kilobyte), so
// that a heap range of 50 blocks holds a batch of 50 rows, as on the other heap-path tests.
func onePerPageReceipts(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	onePerPage(t, pool, "receipts")
	exec(t, pool, `UPDATE receipts SET room = `+strings.ReplaceAll(pad, "i::text", "id::text"))
	exec(t, pool, `VACUUM FULL receipts`)
	analyze(t, pool, "ANALYZE receipts")
}

// TestEpochPartitions drops the partitions of a table range-partitioned on BIGINT milliseconds
// whose upper bound is at or below the cutoff, and deletes the boundary's rows 1 ms before it by
// the batched engine, keeping the row on it.
func TestEpochPartitions(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	at := dbNow(t, pool)
	cut := statement.EpochOf(statement.EpochMilliseconds, at.Add(-epochRetention))
	const day = int64(24 * time.Hour / time.Millisecond)
	exec(t, pool, fmt.Sprintf(`
CREATE TABLE events_ms (id bigint NOT NULL, received_ts bigint NOT NULL) PARTITION BY RANGE (received_ts);
CREATE INDEX ON events_ms (received_ts);
CREATE TABLE events_ms_old PARTITION OF events_ms FOR VALUES FROM (%[1]d) TO (%[2]d);
CREATE TABLE events_ms_edge PARTITION OF events_ms FOR VALUES FROM (%[2]d) TO (%[4]d);
CREATE TABLE events_ms_new PARTITION OF events_ms FOR VALUES FROM (%[4]d) TO (MAXVALUE);
CREATE TABLE events_ms_default PARTITION OF events_ms DEFAULT;
INSERT INTO events_ms VALUES (1, %[1]d), (2, %[2]d), (3, %[3]d), (4, %[4]d), (5, %[1]d - 10 * %[5]d);
ANALYZE events_ms`, cut-2*day, cut-1, cut, cut+1, day))
	specs := []policy.Spec{{Name: "events", Passes: []policy.Pass{{Name: "old", Table: "events_ms", AgeColumn: "received_ts",
		AgeUnit: policy.AgeMilliseconds, Retention: epochRetention, Mode: policy.ModePartitions}}}}
	if warnings, err := check.Specs(ctx, pool, specs); err != nil || len(warnings) > 0 {
		t.Fatalf("check: %v %v", warnings, err)
	}
	r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Settings: settings(), AsOf: fixedAsOf(at)})
	dry, err := r.DryRun(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if dp := dry.Passes[0]; len(dp.Partitions) != 1 || dp.Partitions[0].Name != "public.events_ms_old" || dp.Eligible == nil || *dp.Eligible != 2 {
		t.Fatalf("dry run: %+v; want events_ms_old to drop and 2 boundary rows", dp)
	}
	res := run(t, r, "events")
	if p := res.Passes[0]; p.PartitionsDropped != 1 || p.Deleted != 2 || p.StopReason != wire.StopExhausted || p.CutoffEpoch == nil || *p.CutoffEpoch != cut {
		t.Fatalf("run: %+v; want 1 partition dropped, 2 boundary rows deleted, cutoff %d", p, cut)
	}
	var ids []int64
	if err := pool.QueryRow(ctx, "SELECT array_agg(id ORDER BY id) FROM events_ms").Scan(&ids); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids) != "[3 4]" || tableExists(t, pool, "events_ms_old") {
		t.Fatalf("left %v (events_ms_old there: %v), want the rows on the cutoff and 1 ms after it", ids, tableExists(t, pool, "events_ms_old"))
	}
}
