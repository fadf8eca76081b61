package sweep_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// mediaRows is the size of the media table the unindexed tests sweep: about 330 blocks.
const mediaRows = 20_000

// seedMedia creates table media with no index on created_at and mediaRows rows whose ages are
// spread over 100 days, in heap order (the oldest first) or scattered by a hash of the row.
func seedMedia(t *testing.T, pool *pgxpool.Pool, at time.Time, scattered bool) {
	t.Helper()
	exec(t, pool, `CREATE TABLE media (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		created_at timestamptz NOT NULL, body text NOT NULL)`)
	day := `(($2 - i) * 100 / $2)`
	if scattered {
		day = `((i * 2654435761) % $2 * 100 / $2)`
	}
	exec(t, pool, `INSERT INTO media (created_at, body)
		SELECT $1::timestamptz - `+day+` * interval '1 day' - interval '1 hour', 'media ' || i || ' ' || md5(i::text)
		FROM generate_series(1, $2::int) i`, at, mediaRows)
}

// debugLogger writes the runner's lines, a batch's among them, to out as JSON.
func debugLogger(out *syncBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// mediaSpec sweeps media past retention days, no index serving it.
func mediaSpec(days int) policy.Spec {
	return policy.Spec{Name: "media", Passes: []policy.Pass{{Name: "old", Table: "media", AgeColumn: "created_at",
		Retention: time.Duration(days) * 24 * time.Hour, AllowUnindexed: true}}}
}

// tableReads are the counters of media the drain is judged by: its sequential scans, the tuples
// its scans returned (TID Range Scans included), and its deleted tuples.
type tableReads struct{ scans, tuples, deleted int64 }

func readsOf(t *testing.T, pool *pgxpool.Pool) tableReads {
	t.Helper()
	var r tableReads
	if err := pool.QueryRow(ctx, `SELECT seq_scan, seq_tup_read, n_tup_del FROM pg_stat_user_tables WHERE relid = 'media'::regclass`).
		Scan(&r.scans, &r.tuples, &r.deleted); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestUnindexedPass: a pass no index serves drains by heap ranges, exactly, reading each tuple of
// the table once per drain rather than once per batch.
func TestUnindexedPass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		scattered bool
		retention int
	}{
		{"ages in heap order, 30% eligible", false, 70},
		{"ages scattered, 30% eligible", true, 70},
		{"ages scattered, 90% eligible", true, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, u := poolAndURL(t)
			at := dbNow(t, pool)
			seedMedia(t, pool, at, tc.scattered)
			analyze(t, pool, "ANALYZE media")
			cutoff := at.Add(-time.Duration(tc.retention) * 24 * time.Hour)
			eligible := count(t, pool, `SELECT count(*) FROM media WHERE created_at < $1`, cutoff)
			blocks := count(t, pool, `SELECT pg_relation_size('media') / current_setting('block_size')::bigint`)
			spec := mediaSpec(tc.retention)
			dr, err := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec}, Settings: settings(), AsOf: fixedAsOf(at)}).DryRun(ctx, "media")
			if err != nil {
				t.Fatal(err)
			}
			before := settledReads(t, pool) // the counts' and the dry run's own reads included

			// The run's own pool, closed after it: its backends report their counts as they exit.
			runPool, err := dbpool.NewPool(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			var out syncBuffer
			s := settings()
			s.MaxBatchSize = 500
			r := newRunner(t, sweep.Config{Pool: runPool, Specs: []policy.Spec{spec}, Settings: s, AsOf: fixedAsOf(at), Logger: debugLogger(&out)})
			res := run(t, r, "media")
			runPool.Close()
			if dr.Passes[0].Indexed || dr.Passes[0].Path != string(sweep.PathHeap) {
				t.Errorf("dry run: indexed %v, path %q; want unindexed on the heap path", dr.Passes[0].Indexed, dr.Passes[0].Path)
			}
			if p := res.Passes[0]; p.Path != string(sweep.PathHeap) || p.Deleted != eligible || res.StopReason != wire.StopExhausted {
				t.Fatalf("run: %+v; want %d deleted on the heap path, exhausted", p, eligible)
			}
			var covered int64
			lines := out.batchLines(t)
			for i, l := range lines {
				if l["path"] != string(sweep.PathHeap) || l["blocks"].(float64) < 1 {
					t.Fatalf("batch %d: path %v, %v blocks; want a range of blocks on the heap path", i+1, l["path"], l["blocks"])
				}
				covered += int64(l["blocks"].(float64))
			}
			if covered != blocks || len(lines) < 5 {
				t.Fatalf("%d batches covered %d blocks; want at least 5 covering the table's %d", len(lines), covered, blocks)
			}
			if left := count(t, pool, `SELECT count(*) FROM media`); left != mediaRows-eligible ||
				count(t, pool, `SELECT count(*) FROM media WHERE created_at < $1`, cutoff) != 0 {
				t.Fatalf("%d rows left, want the %d not eligible and none eligible", left, mediaRows-eligible)
			}
			after := waitReads(t, pool, before.deleted+eligible)
			// Each tuple once: a batch that read the whole table would read len(lines) times as many.
			if read, scans := after.tuples-before.tuples, after.scans-before.scans; read > mediaRows+mediaRows/20 || scans != 0 {
				t.Errorf("the drain read %d tuples in %d sequential scans over %d batches; want at most %d, by TID ranges only",
					read, scans, len(lines), mediaRows+mediaRows/20)
			}
		})
	}

	t.Run("a table never analyzed takes the heap path too", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedMedia(t, pool, at, true)
		cutoff := at.Add(-70 * 24 * time.Hour)
		eligible := count(t, pool, `SELECT count(*) FROM media WHERE created_at < $1`, cutoff)
		r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{mediaSpec(70)}, Settings: settings(), AsOf: fixedAsOf(at)})
		if res := run(t, r, "media"); res.Passes[0].Path != string(sweep.PathHeap) || res.Deleted != eligible {
			t.Fatalf("run: %+v; want %d deleted on the heap path", res.Passes[0], eligible)
		}
	})

	// Where eligible rows are sparse, batches that take no time would grow a range without
	// end; each stays within 8 times MaxBatchSize rows of the table (the heap range's floor),
	// so that a dense stretch after it cannot make one batch far longer than the target.
	t.Run("sparse rows: a range never holds more than 8 batches of the table's rows", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedMedia(t, pool, at, true)
		analyze(t, pool, "ANALYZE media")
		perBlock := float64(mediaRows) / float64(count(t, pool, `SELECT pg_relation_size('media') / current_setting('block_size')::bigint`))
		var out syncBuffer
		s := settings()
		s.BatchSize, s.MinBatchSize, s.MaxBatchSize = 100, 10, 100
		r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{mediaSpec(99)}, Settings: s, AsOf: fixedAsOf(at),
			Logger: debugLogger(&out), Now: func() time.Time { return time.Unix(0, 0) }})
		res := run(t, r, "media")
		if res.Passes[0].Path != string(sweep.PathHeap) || res.StopReason != wire.StopExhausted {
			t.Fatalf("run: %+v; want the heap path, exhausted", res.Passes[0])
		}
		limit := 8 * float64(s.MaxBatchSize) * 1.2 // the planner's rows a block, within a fifth
		for i, l := range out.batchLines(t) {
			if rows := l["blocks"].(float64) * perBlock; rows > limit {
				t.Fatalf("batch %d: a range of %v blocks, about %.0f rows of the table; want at most %.0f", i+1, l["blocks"], rows, limit)
			}
		}
	})
}

// waitReads waits for media's counters to show deleted tuples deleted, which they do once the
// run's backends have reported (as they exit), and returns them.
// settledReads is media's counters once the server shows every read pool's idle connections
// made: at once on PostgreSQL 15 and later, which flush when asked; on 14, whose collector takes
// the counts asynchronously, once they hold still over its reporting interval.
func settledReads(t *testing.T, pool *pgxpool.Pool) tableReads {
	t.Helper()
	r := readsOf(t, pool)
	if !flushStats(t, pool) {
		return readsOf(t, pool)
	}
	for deadline := time.Now().Add(15 * time.Second); ; {
		time.Sleep(pgstatInterval + 100*time.Millisecond)
		next := readsOf(t, pool)
		if next == r {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("media's counters never settled: %+v, then %+v", r, next)
		}
		r = next
	}
}

func waitReads(t *testing.T, pool *pgxpool.Pool, deleted int64) tableReads {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; {
		if r := readsOf(t, pool); r.deleted >= deleted {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("media's counters never showed %d deleted tuples", deleted)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUnindexedDoc holds docs/POLICY.md's worked example of a table no index serves: the check
// warns as the example shows, and the pass drains the table exactly, on the heap path.
func TestUnindexedDoc(t *testing.T) {
	t.Parallel()
	var sql, yaml, output string
	for _, b := range policyDoc(t, "Worked example: a table no index serves") {
		switch b.lang {
		case "sql":
			sql = b.text
		case "yaml":
			yaml = b.text
		case "text":
			output = b.text
		}
	}
	pool := dbtest.Pool(t)
	runDocSQL(t, pool, sql, true)
	pol, err := policy.Load("sweeps.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	warnings, err := check.Policy(ctx, pool, pol)
	want := strings.TrimPrefix(strings.Split(output, "\n")[1], "warning: ")
	if err != nil || len(warnings) != 1 || warnings[0] != want {
		t.Fatalf("the check says %q, %v\nthe docs say %q", warnings, err, want)
	}
	// 5,000 media a day apart in upload order, the newest an hour old: 4,910 past the 90 days.
	at := dbNow(t, pool)
	exec(t, pool, `INSERT INTO local_media (media_id, media_type, media_length, created_ts)
		SELECT 'm' || i, 'image/png', 1000 + i, (extract(epoch FROM $1::timestamptz - (5000 - i) * interval '1 day' - interval '1 hour') * 1000)::bigint
		FROM generate_series(1, 5000) i`, at)
	r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings(), AsOf: fixedAsOf(at)})
	dr, err := r.DryRun(ctx, "local-media")
	if err != nil {
		t.Fatal(err)
	}
	if p := dr.Passes[0]; p.Indexed || p.Path != string(sweep.PathHeap) || p.Eligible == nil || *p.Eligible != 4910 {
		t.Fatalf("dry run: %+v; want 4910 eligible, unindexed, on the heap path", p)
	}
	if res := run(t, r, "local-media"); res.Passes[0].Path != string(sweep.PathHeap) || res.Deleted != 4910 ||
		count(t, pool, `SELECT count(*) FROM local_media`) != 90 {
		t.Fatalf("run: %+v; want 4910 deleted on the heap path, 90 left", res.Passes[0])
	}
}
