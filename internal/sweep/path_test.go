package sweep_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestAccessPath: a batched pass takes the heap path where the planner expects at least
// sweep.HeapShare of the table eligible and the index path below it, per run; the dry run says
// the same; the heap batch is a TID Range Scan.
func TestAccessPath(t *testing.T) {
	t.Parallel()
	// seed fills notifications with eligible old rows and fresh ones in the given proportion.
	seed := func(t *testing.T, eligible, fresh int) (*sweep.Runner, func() *wire.Result, func() string) {
		t.Helper()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, eligible, fresh)
		analyze(t, pool, "ANALYZE notifications")
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), AsOf: fixedAsOf(at)})
		runIt := func() *wire.Result { return run(t, r, "notifications") }
		dry := func() string {
			dr, err := r.DryRun(ctx, "notifications")
			if err != nil {
				t.Fatal(err)
			}
			return dr.Passes[0].Path
		}
		return r, runIt, dry
	}
	tests := []struct {
		name            string
		eligible, fresh int
		want            sweep.Path
	}{
		{"dense: heap", 1800, 200, sweep.PathHeap},
		{"age in heap order, past its crossover: heap", 1400, 600, sweep.PathHeap}, // 70%, 1.27 × HeapShareOrdered
		{"age in heap order, short of it: index", 800, 1200, sweep.PathIndex},      // 40%, HeapShareOrdered ÷ 1.375
		{"sparse: index", 20, 1980, sweep.PathIndex},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, runIt, dry := seed(t, tt.eligible, tt.fresh)
			if got := dry(); got != string(tt.want) {
				t.Errorf("dry run path %q, want %q", got, tt.want)
			}
			res := runIt()
			if p := res.Passes[0]; p.Path != string(tt.want) || p.Deleted != int64(tt.eligible) || res.StopReason != wire.StopExhausted {
				t.Errorf("run: %+v, want %d deleted on the %s path, exhausted", p, tt.eligible, tt.want)
			}
		})
	}

	// The same share, 3 times HeapShareScattered, takes the heap path when the ages are scattered
	// over the heap and the index path when they follow it.
	t.Run("scattered ages take the heap path from a lower share", func(t *testing.T) {
		t.Parallel()
		for _, layout := range []struct {
			order string
			want  sweep.Path
		}{{"random()", sweep.PathHeap}, {"i", sweep.PathIndex}} {
			pool := dbtest.Pool(t)
			at := dbNow(t, pool)
			exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'n@example.com')`)
			// 6% of the rows eligible, in heap order or at random places.
			exec(t, pool, `INSERT INTO notifications (account_id, kind, body, read_at)
				SELECT '00000000-0000-0000-0000-000000000001', 'mention', 'row ' || i, r.read_at
				FROM generate_series(1, 5000) i
				CROSS JOIN LATERAL (SELECT CASE WHEN i <= 300 THEN $1::timestamptz - interval '31 days' ELSE $1::timestamptz - interval '1 day' END
				                           - i * interval '1 second' AS read_at) r
				ORDER BY `+layout.order, at)
			analyze(t, pool, "ANALYZE notifications")
			r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), AsOf: fixedAsOf(at)})
			if res := run(t, r, "notifications"); res.Passes[0].Path != string(layout.want) || res.Deleted != 300 {
				t.Errorf("rows inserted in %s order: %+v, want 300 deleted on the %s path", layout.order, res.Passes[0], layout.want)
			}
		}
	})

	t.Run("a table never analyzed takes the index path", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 200, 0)
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), AsOf: fixedAsOf(at)})
		if res := run(t, r, "notifications"); res.Passes[0].Path != string(sweep.PathIndex) || res.Deleted != 200 {
			t.Fatalf("run: %+v, want 200 deleted on the index path", res.Passes[0])
		}
	})

	t.Run("per run: the same pass changes path as its table changes", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 20, 1980)
		analyze(t, pool, "ANALYZE notifications")
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), AsOf: fixedAsOf(at)})
		if res := run(t, r, "notifications"); res.Passes[0].Path != string(sweep.PathIndex) {
			t.Fatalf("sparse: path %s, want index", res.Passes[0].Path)
		}
		// A month passes: every fresh row is past the cutoff.
		exec(t, pool, "UPDATE notifications SET read_at = read_at - interval '60 days'")
		analyze(t, pool, "VACUUM ANALYZE notifications")
		if res := run(t, r, "notifications"); res.Passes[0].Path != string(sweep.PathHeap) || res.Deleted != 1980 {
			t.Fatalf("dense: %+v, want 1980 deleted on the heap path", res.Passes[0])
		}
	})

	// Statistics taken before a drain still count the rows it deleted: until autovacuum analyzes
	// again, the pass keeps to the index path rather than read the whole heap for nothing.
	t.Run("statistics stale since a drain: index", func(t *testing.T) {
		t.Parallel()
		pool, u := poolAndURL(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 1800, 200)
		analyze(t, pool, "ANALYZE notifications")
		// The deletes reach the statistics when their backend next reports, which it is asked
		// to do at once; the wait is for that report, bounded.
		deleter := dbtest.Conn(t, u)
		if _, err := deleter.Exec(ctx, "DELETE FROM notifications WHERE body LIKE 'old %' AND id % 2 = 0"); err != nil {
			t.Fatal(err)
		}
		// PostgreSQL 14 has no such call: its backend reports at the end of a transaction half a
		// second (PGSTAT_STAT_INTERVAL) after its last report, so one more ends past that.
		flush := "SELECT pg_stat_force_next_flush()"
		if count(t, pool, "SELECT current_setting('server_version_num')::int") < 150000 {
			flush = "SELECT 1"
			time.Sleep(510 * time.Millisecond)
		}
		if _, err := deleter.Exec(ctx, flush); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for count(t, pool, "SELECT pg_stat_get_mod_since_analyze('notifications'::regclass)") < 900 {
			if time.Now().After(deadline) {
				t.Fatal("the deletes never showed in pg_stat_get_mod_since_analyze")
			}
			time.Sleep(10 * time.Millisecond)
		}
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), AsOf: fixedAsOf(at)})
		if res := run(t, r, "notifications"); res.Passes[0].Path != string(sweep.PathIndex) || res.Deleted != 900 {
			t.Fatalf("run: %+v, want 900 deleted on the index path", res.Passes[0])
		}
	})

	t.Run("every mode says its path", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings()})
		for name, want := range map[string][]string{
			"idempotency-records": {"index", "single"},
			"account-erasure":     {"per-row"},
		} {
			res := run(t, r, name)
			dr, err := r.DryRun(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range want {
				if res.Passes[i].Path != w || dr.Passes[i].Path != w {
					t.Errorf("%s pass %d: run path %q, dry run %q; want %q", name, i, res.Passes[i].Path, dr.Passes[i].Path, w)
				}
			}
		}
	})

	// The heap path's bounds are plain ctid comparisons; the planner must read them as a TID
	// Range Scan, not filter an index scan or a sequential scan of the whole table with them.
	t.Run("the heap batch is a TID Range Scan", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 2000, 100)
		analyze(t, pool, "VACUUM ANALYZE notifications")
		for _, s := range []string{"notifications", "outbox"} {
			for _, capped := range []bool{false, true} {
				p := spec(t, s).Passes[0]
				args := []any{at.Add(-p.Retention), pgtype.TID{BlockNumber: 100, Valid: true}, pgtype.TID{BlockNumber: 200, Valid: true}}
				if capped {
					args = append(args, 10)
				}
				var raw []byte
				// Inside a transaction rolled back: EXPLAIN of a DELETE executes nothing, but keep
				// it honest anyway.
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sweep.HeapBatchSQL(p, capped), args...).Scan(&raw); err != nil {
					t.Fatal(err)
				}
				_ = tx.Rollback(ctx)
				if scan := scanOf(t, raw, "t"); scan != "Tid Range Scan" {
					t.Errorf("%s (capped %v): the heap batch reads t by %q, want a Tid Range Scan:\n%s", s, capped, scan, raw)
				}
			}
		}
	})
}

// scanOf is the node type that reads alias in an EXPLAIN (FORMAT JSON) plan.
func scanOf(t *testing.T, raw []byte, alias string) string {
	t.Helper()
	type node struct {
		NodeType string `json:"Node Type"`
		Alias    string `json:"Alias"`
		Plans    []node `json:"Plans"`
	}
	var out []struct {
		Plan node `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) == 0 {
		t.Fatalf("plan %s: %v", raw, err)
	}
	var find func(n node) string
	find = func(n node) string {
		if n.Alias == alias && n.NodeType != "ModifyTable" {
			return n.NodeType
		}
		for _, c := range n.Plans {
			if s := find(c); s != "" {
				return s
			}
		}
		return ""
	}
	return find(out[0].Plan)
}

// TestHeapPath holds the heap path's own promises: ranges sized like row batches, and a bounded
// end.
func TestHeapPath(t *testing.T) {
	t.Parallel()
	// The heap path ends at the table's size at the pass's start. A row that an update moves
	// past it (its page has no room for the new version, nor has any page before the end) is
	// not seen by this run, and the next run takes it; a row moved to a block the run has not
	// reached yet is deleted when the run gets there. Either way no row is deleted twice, and
	// none waits longer than one run.
	t.Run("a row an update moves past the end waits for the next run", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'n@example.com')`)
		// 1.5 kB rows, 5 to a page with little room left: 250 rows fill 50 pages.
		exec(t, pool, `INSERT INTO notifications (account_id, kind, body, read_at)
			SELECT '00000000-0000-0000-0000-000000000001', 'mention', 'old ' || lpad(i::text, 4, '0') || repeat(md5(i::text), 47),
			       $1::timestamptz - interval '31 days' - (250 - i) * interval '1 second'
			FROM generate_series(1, 250) i`, at)
		end := count(t, pool, `SELECT pg_relation_size('notifications') / current_setting('block_size')::bigint`)
		if full := count(t, pool, `SELECT count(*) FROM (SELECT (ctid::text::point)[0] FROM notifications GROUP BY 1 HAVING count(*) < 5) b`); full != 0 {
			t.Fatalf("fixture: %d pages are not full", full)
		}
		// The last block's first row: the run reaches it last.
		var moved int64
		if err := pool.QueryRow(ctx, `SELECT id FROM notifications WHERE (ctid::text::point)[0] = $1 ORDER BY id LIMIT 1`, end-1).Scan(&moved); err != nil {
			t.Fatal(err)
		}
		s := fixed(settings(), 50)
		s.Pause = time.Millisecond
		updated := false
		r := newRunner(t, sweep.WithTestKnobs(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at),
			Sleep: func(context.Context, time.Duration) {
				if !updated {
					updated = true
					// Still eligible, but 400 bytes longer: no room on its page.
					exec(t, pool, `UPDATE notifications SET body = body || repeat('y', 400) WHERE id = $1`, moved)
					if b := count(t, pool, `SELECT (ctid::text::point)[0]::bigint FROM notifications WHERE id = $1`, moved); b < end {
						t.Errorf("fixture: the update left the row in block %d, before the end %d", b, end)
					}
				}
			}}, sweep.PathHeap, 10, 0, false))
		res := run(t, r, "notifications")
		if res.Deleted != 249 || res.StopReason != wire.StopExhausted || res.BatchCount != int(end/10) {
			t.Fatalf("first run: %+v; want 249 deleted in %d batches, exhausted, the moved row left", res.Passes[0], end/10)
		}
		if n := count(t, pool, `SELECT count(*) FROM notifications WHERE id = $1`, moved); n != 1 {
			t.Fatal("the moved row is gone after the first run")
		}
		if res := run(t, r, "notifications"); res.Deleted != 1 {
			t.Fatalf("next run deleted %d, want the moved row", res.Deleted)
		}
	})

	// Ranges adapt as row batches do: sized from the request's batch size, growing at most
	// twofold while batches are fast, up to MaxBatchSize rows at the density seen; shrinking at
	// most by half while slow, down to MinBatchSize rows. A row per page: blocks are rows.
	for _, tp := range testPaths[:2] {
		t.Run(tp.name+": request batch size, then growth to the max", func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			at := dbNow(t, pool)
			seedNotifications(t, pool, at, 250, 0)
			analyze(t, pool, "ANALYZE notifications")
			s := settings()
			s.MinBatchSize, s.MaxBatchSize = 1, 100
			var out syncBuffer
			logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
			r := newRunner(t, sweep.WithTestKnobs(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at), Logger: logger,
				Now: func() time.Time { return time.Unix(0, 0) }}, tp.path, 0, 0, false)) // every batch "takes" 0s: sizes may only grow
			res, err := r.Run(ctx, "notifications", sweep.Options{BatchSize: 50})
			if err != nil {
				t.Fatal(err)
			}
			// 50, then doubled to 100 (the max), 100: the index path's bound found no row past
			// them, the heap path ends at its last block.
			want := []float64{50, 100, 100}
			if got := deletedPerBatch(t, &out); res.Deleted != 250 || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("deleted %d in batches of %v; want 250 in %v", res.Deleted, got, want)
			}
		})
		t.Run(tp.name+": slow batches shrink toward the target", func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			at := dbNow(t, pool)
			seedNotifications(t, pool, at, 2000, 0)
			analyze(t, pool, "ANALYZE notifications")
			clock := newFakeClock()
			s := settings()
			s.BatchSize, s.MinBatchSize, s.BatchTarget = 1000, 100, 100*time.Millisecond
			var out syncBuffer
			logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
			// Every reading of the clock moves it 500ms: each batch "takes" 500ms, five times the target.
			r := newRunner(t, sweep.WithTestKnobs(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at), Logger: logger,
				Now: func() time.Time { clock.Advance(500 * time.Millisecond); return clock.Now() }}, tp.path, 0, 0, false))
			res := run(t, r, "notifications")
			// Halving at most per batch, floored at 100: 1000, 500, 250, 125, 100, then 25 left.
			want := []float64{1000, 500, 250, 125, 100, 25}
			if got := deletedPerBatch(t, &out); res.Deleted != 2000 || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("deleted %d in batches of %v; want 2000 in %v", res.Deleted, got, want)
			}
		})
	}
}

// deletedPerBatch reads each batch's rows from the runner's debug lines.
func deletedPerBatch(t *testing.T, out *syncBuffer) []float64 {
	t.Helper()
	var got []float64
	for _, l := range out.batchLines(t) {
		got = append(got, l["deleted"].(float64))
	}
	return got
}

// TestIndexPathRanges: an index-path batch deletes a range of ages, ending at the age a batch of
// rows past its start. Where more than a batch of rows share the age a range would start at, the
// range would be empty, and the batch deletes a batch of them by rows instead; a tie across a
// range's end ends the batch before it. Each case is exact on the index path in both its forms.
func TestIndexPathRanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// ages is the eligible rows' seconds before the 31-day mark, one per row, oldest first.
		ages string
		want []float64
	}{
		// 250 rows share one age, then 50 distinct ones: batches by rows through the tie, then the
		// last 100 as the last range.
		{"more than a batch share the first age", `SELECT 1000 FROM generate_series(1, 250) UNION ALL SELECT 50 - i FROM generate_series(1, 50) i`,
			[]float64{100, 100, 100}},
		// ten ages of 30 rows: a batch of 100 ends before the tie its 91st to 120th rows share.
		{"a tie across a range's end ends the batch before it", `SELECT 1000 - i / 30 FROM generate_series(0, 299) i`,
			[]float64{90, 90, 90, 30}},
	} {
		for _, tp := range testPaths {
			if tp.path != sweep.PathIndex {
				continue
			}
			t.Run(tc.name+", "+tp.name, func(t *testing.T) {
				t.Parallel()
				pool := dbtest.Pool(t)
				at := dbNow(t, pool)
				exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'n@example.com')`)
				exec(t, pool, `INSERT INTO notifications (account_id, kind, body, created_at, read_at)
					SELECT '00000000-0000-0000-0000-000000000001', 'mention', 'old', $1::timestamptz - interval '60 days',
					       $1::timestamptz - interval '31 days' - a.s * interval '1 second'
					FROM (`+tc.ages+`) AS a(s)`, at)
				exec(t, pool, `INSERT INTO notifications (account_id, kind, body, created_at, read_at)
					SELECT '00000000-0000-0000-0000-000000000001', 'mention', 'fresh', $1::timestamptz, $1::timestamptz - interval '1 day'
					FROM generate_series(1, 20)`, at)
				var out syncBuffer
				logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
				r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: fixed(settings(), 100),
					AsOf: fixedAsOf(at), Logger: logger}, 100))
				res, err := r.Run(ctx, "notifications", sweep.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if got := deletedPerBatch(t, &out); res.Deleted != 300 || fmt.Sprint(got) != fmt.Sprint(tc.want) || res.StopReason != wire.StopExhausted {
					t.Fatalf("deleted %d in batches of %v, %s; want 300 in %v, exhausted", res.Deleted, got, res.StopReason, tc.want)
				}
				if old, fresh := count(t, pool, `SELECT count(*) FROM notifications WHERE body = 'old'`), count(t, pool, `SELECT count(*) FROM notifications WHERE body = 'fresh'`); old != 0 || fresh != 20 {
					t.Errorf("left %d old and %d fresh rows, want 0 and 20", old, fresh)
				}
			})
		}
	}
}
