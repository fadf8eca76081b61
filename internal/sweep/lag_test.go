package sweep_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// lagSpec is one sweep of one pass over table lagged, a day's retention.
func lagSpec(unindexed bool) policy.Spec {
	return policy.Spec{Name: "lagged", Passes: []policy.Pass{{Name: "old", Table: "lagged", AgeColumn: "at",
		Retention: 24 * time.Hour, AllowUnindexed: unindexed}}}
}

// seedLag creates table lagged (with its age index unless unindexed) and n rows, one a minute,
// the oldest overdue by overdue at ref.
func seedLag(t *testing.T, pool *pgxpool.Pool, ref time.Time, n int, overdue time.Duration, unindexed bool) {
	t.Helper()
	exec(t, pool, `CREATE TABLE IF NOT EXISTS lagged (id bigserial PRIMARY KEY, at timestamptz NOT NULL)`)
	if !unindexed {
		exec(t, pool, `CREATE INDEX IF NOT EXISTS lagged_at ON lagged (at)`)
	}
	addLagRows(t, pool, ref.Add(-24*time.Hour-overdue), n)
}

// addLagRows inserts n rows, one a minute from oldest on.
func addLagRows(t *testing.T, pool *pgxpool.Pool, oldest time.Time, n int) {
	t.Helper()
	exec(t, pool, `INSERT INTO lagged (at) SELECT $1::timestamptz + i * interval '1 minute' FROM generate_series(0, $2 - 1) AS i`, oldest, n)
}

// TestRetentionVerdict runs a sweep an hour apart on a fake clock, each run capped at one batch
// of batch rows, and judges its history after each run as the status page does.
func TestRetentionVerdict(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// rows one a minute, the oldest overdue by overdue; each tick adds perTick more rows
		// overdue by up to the tick's hour.
		rows      int
		overdue   time.Duration
		perTick   int
		batch     int
		unindexed bool
		// idle is how long after the last run the history is judged.
		idle time.Duration
		want []wire.Verdict
	}{
		{name: "drained table is bounded", rows: 100, overdue: 3 * time.Hour, batch: 1000,
			want: []wire.Verdict{wire.VerdictBounded, wire.VerdictBounded}},
		{name: "budget-limited backlog drains then is bounded", rows: 600, overdue: 10 * time.Hour, batch: 200,
			want: []wire.Verdict{wire.VerdictBehind, wire.VerdictDraining, wire.VerdictBounded, wire.VerdictBounded}},
		{name: "rows piling up faster than deleted is behind", rows: 600, overdue: 10 * time.Hour, perTick: 120, batch: 20,
			want: []wire.Verdict{wire.VerdictBehind, wire.VerdictBehind, wire.VerdictBehind}},
		{name: "no run for three intervals is stale", rows: 10, overdue: time.Hour, batch: 1000, idle: 4 * time.Hour,
			want: []wire.Verdict{wire.VerdictStale, wire.VerdictStale}},
		{name: "unindexed pass with rows left is behind", rows: 600, overdue: 10 * time.Hour, batch: 200, unindexed: true,
			want: []wire.Verdict{wire.VerdictBehind, wire.VerdictBehind, wire.VerdictBounded}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			base := dbNow(t, pool).UTC().Truncate(time.Second)
			seedLag(t, pool, base, tc.rows, tc.overdue, tc.unindexed)
			clock := newFakeClock()
			clock.t = base
			st := settings()
			st.BatchSize, st.MinBatchSize, st.MaxBatchSize, st.MaxBatches = tc.batch, tc.batch, tc.batch, 1
			store := history.New(pool, 30*24*time.Hour)
			cfg := sweep.Config{Pool: pool, Specs: []policy.Spec{lagSpec(tc.unindexed)}, Settings: st,
				Now: clock.Now, AsOf: func(context.Context) (time.Time, error) { return clock.Now(), nil }, History: store}
			// The cases mean a batch of the oldest rows, the unindexed one too (which the lag's
			// source is about, whatever the path): on the heap path a batch is a range of blocks,
			// which may hold more than a batch of rows where the planner's estimate is off (it was
			// on PostgreSQL 14), and the rows added later land in freed pages.
			cfg = sweep.WithTestKnobs(cfg, sweep.PathIndex, 0, 0, false)
			r := newRunner(t, cfg)
			for i, want := range tc.want {
				if i > 0 {
					clock.Advance(time.Hour)
					if tc.perTick > 0 {
						addLagRows(t, pool, clock.Now().Add(-25*time.Hour), tc.perTick)
					}
				}
				res := run(t, r, "lagged")
				lag := res.Passes[0].Lag
				if lag == nil {
					t.Fatalf("run %d: no lag in %+v", i+1, res.Passes[0])
				}
				if tc.unindexed != (lag.Source == wire.LagSeen) {
					t.Fatalf("run %d: lag source %s (unindexed %v)", i+1, lag.Source, tc.unindexed)
				}
				if lag.Source == wire.LagRead && lag.Seconds == nil {
					t.Fatalf("run %d: a lag read without seconds", i+1)
				}
				// The history's started_at is the database's clock; the fake clock's hours apart
				// are what the runs mean, so each run's start is moved to its tick.
				exec(t, pool, `UPDATE sweeprail.run SET started_at = $1 WHERE run_id = $2`, clock.Now(), res.RunID)
				runs, err := store.List(ctx, "lagged", 20)
				if err != nil {
					t.Fatal(err)
				}
				got := wire.Judge(runs, clock.Now().Add(tc.idle+time.Minute), time.Hour)
				if got.Verdict != want {
					t.Fatalf("after run %d (%s, lag %v): verdict %s (%s), want %s", i+1, res.StopReason, lagText(lag), got.Verdict, got.Reason, want)
				}
			}
		})
	}
}

func lagText(l *wire.Lag) any {
	if l.Seconds == nil {
		return "unknown"
	}
	return time.Duration(*l.Seconds * float64(time.Second))
}

// TestLagReadLocks checks the lag read against other sessions' locks: a writer holding the
// oldest row's lock does not hold the read back (it takes no row lock), and a DDL's lock on the
// table makes it give up within its lock timeout rather than queue, where every writer would
// queue behind it.
func TestLagReadLocks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		hold string
		// code is the SQLSTATE the read fails with, "" when it answers.
		code string
	}{
		{"writer holds the oldest row", `UPDATE lagged SET at = at WHERE id = 1`, ""},
		{"writer deletes the oldest row", `DELETE FROM lagged WHERE id = 1`, ""},
		{"migration holds the table", `LOCK TABLE lagged IN ACCESS EXCLUSIVE MODE`, "55P03"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			base := dbNow(t, pool)
			seedLag(t, pool, base, 10, time.Hour, false)
			r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{lagSpec(false)}, Settings: settings()})
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, tc.hold); err != nil {
				t.Fatal(err)
			}
			secs, err := sweep.ReadLag(ctx, r, "lagged", 0, base.Add(-24*time.Hour))
			var pgErr *pgconn.PgError
			switch {
			case tc.code == "" && err != nil:
				t.Fatalf("read waited on the writer: %v", err)
			case tc.code == "" && (secs == nil || *secs < 3590 || *secs > 3610):
				t.Fatalf("lag %v, want about an hour (the writer's change is not committed)", secs)
			case tc.code != "" && (!errors.As(err, &pgErr) || pgErr.Code != tc.code):
				t.Fatalf("read answered %v, %v; want SQLSTATE %s within %s", secs, err, tc.code, sweep.LagLockTimeout)
			}
		})
	}
}

// TestLagReadWrites: the lag read runs under the batches' wal_compression and
// backend_flush_after, since its first walk over a drain's dead rows prunes every page the drain
// emptied. The pass's condition holds only where the read sees the settings it should, so a
// read under others finds no eligible row.
func TestLagReadWrites(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		compression string
		flushAfter  int64
		// wantWAL is wal_compression as the read shows it (on is pglz from PostgreSQL 15); wantFlush
		// its backend_flush_after.
		wantWAL   string
		wantFlush string
	}{
		{"by default, the session's", "", 0, "'off'", "'0'"},
		{"with the batches' settings, theirs", "on", 256 << 10, "'on', 'pglz'", "'256kB'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			base := dbNow(t, pool)
			seedLag(t, pool, base, 10, time.Hour, false)
			exec(t, pool, `CREATE FUNCTION lag_writes_seen() RETURNS boolean LANGUAGE sql STABLE AS $$
				SELECT current_setting('wal_compression') IN (`+tc.wantWAL+`)
				   AND current_setting('backend_flush_after') = `+tc.wantFlush+` $$`)
			spec := lagSpec(false)
			spec.Passes[0].Where = "lag_writes_seen()"
			st := settings()
			st.WALCompression, st.FlushAfter = tc.compression, tc.flushAfter
			r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec}, Settings: st})
			secs, err := sweep.ReadLag(ctx, r, "lagged", 0, base.Add(-24*time.Hour))
			if err != nil || secs == nil || *secs < 3590 || *secs > 3610 {
				t.Fatalf("lag %v, %v; want about an hour, read under wal_compression in (%s), backend_flush_after %s",
					secs, err, tc.wantWAL, tc.wantFlush)
			}
		})
	}
}
