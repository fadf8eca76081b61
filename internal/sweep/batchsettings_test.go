package sweep_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// TestBatchSettings: every batch transaction runs under its own timeouts, commit mode, custom
// plans (a generic plan of the prepared batch statement can be the wrong one; see
// Runner.batch) and no JIT (sql/transaction.sql), set locally, so the pool's connections come
// back with the server's defaults.
// A batch commits asynchronously unless Settings.SyncCommit asks it to wait for its own WAL
// flush, and keeps the server's wal_compression and backend_flush_after unless
// Settings.WALCompression and Settings.FlushAfter set them. A per-row function reads the
// settings from inside the batch.
func TestBatchSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		syncCommit  bool
		compression string
		flushAfter  int64
		wantCommit  string
		// wantWAL is wal_compression as the batch shows it: on is pglz from PostgreSQL 15.
		wantWAL   []string
		wantFlush string
	}{
		{"by default, asynchronous commit and the server's WAL compression and flushing", false, "", 0, "off", []string{"off"}, "0"},
		{"with SyncCommit, synchronous commit", true, "", 0, "on", []string{"off"}, "0"},
		{"with WALCompression, the batch's WAL compression", false, "on", 0, "off", []string{"on", "pglz"}, "0"},
		{"with FlushAfter, the batch's writeback hints", false, "", 256 << 10, "off", []string{"off"}, "256kB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			exec(t, pool, `CREATE TABLE probe (id bigint PRIMARY KEY, at timestamptz NOT NULL)`)
			exec(t, pool, `CREATE TABLE probe_seen (plan_cache_mode text, synchronous_commit text, statement_timeout text,
				lock_timeout text, idle_timeout text, jit text, wal_compression text, backend_flush_after text)`)
			exec(t, pool, `CREATE FUNCTION probe_settings(k bigint) RETURNS boolean LANGUAGE sql AS $$
				INSERT INTO probe_seen VALUES (current_setting('plan_cache_mode'), current_setting('synchronous_commit'),
					current_setting('statement_timeout'), current_setting('lock_timeout'),
					current_setting('idle_in_transaction_session_timeout'), current_setting('jit'),
					current_setting('wal_compression'), current_setting('backend_flush_after'));
				DELETE FROM probe WHERE id = k;
				SELECT true $$`)
			exec(t, pool, `INSERT INTO probe VALUES (1, now() - interval '2 days')`)

			specs := []policy.Spec{{Name: "probe", Passes: []policy.Pass{{
				Name: "old", Table: "probe", AgeColumn: "at", Retention: 24 * time.Hour,
				Mode: policy.ModePerRow, Function: "probe_settings",
			}}}}
			st := settings()
			st.SyncCommit, st.WALCompression, st.FlushAfter = tc.syncCommit, tc.compression, tc.flushAfter
			r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Settings: st})
			if res := run(t, r, "probe"); res.Processed != 1 || res.Deleted != 0 || res.Error != nil {
				t.Fatalf("processed %d, deleted %d, error %+v; want 1 key processed", res.Processed, res.Deleted, res.Error)
			}
			var plan, commit, stmt, lock, idle, jit, wal, flush string
			if err := pool.QueryRow(ctx, `SELECT * FROM probe_seen`).Scan(&plan, &commit, &stmt, &lock, &idle, &jit, &wal, &flush); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(tc.wantWAL, wal) {
				t.Errorf("inside the batch: wal_compression %s, want one of %v", wal, tc.wantWAL)
			}
			if flush != tc.wantFlush {
				t.Errorf("inside the batch: backend_flush_after %s, want %s", flush, tc.wantFlush)
			}
			if plan != "force_custom_plan" || commit != tc.wantCommit || stmt != "5s" || lock != "2s" || idle != "10s" || jit != "off" {
				t.Errorf("inside the batch: plan_cache_mode %s, synchronous_commit %s, statement_timeout %s, lock_timeout %s, "+
					"idle_in_transaction_session_timeout %s, jit %s; want force_custom_plan, %s, 5s, 2s, 10s, off",
					plan, commit, stmt, lock, idle, jit, tc.wantCommit)
			}
			// SET LOCAL: gone with the transaction.
			if err := pool.QueryRow(ctx, `SELECT current_setting('plan_cache_mode'), current_setting('synchronous_commit'), current_setting('jit'),
					current_setting('wal_compression'), current_setting('backend_flush_after')`).Scan(&plan, &commit, &jit, &wal, &flush); err != nil {
				t.Fatal(err)
			}
			if plan != "auto" || commit != "on" || jit != "on" || wal != "off" || flush != "0" {
				t.Errorf("after the run: plan_cache_mode %s, synchronous_commit %s, jit %s, wal_compression %s, backend_flush_after %s; "+
					"want the defaults auto, on, on, off, 0", plan, commit, jit, wal, flush)
			}
		})
	}
}

// TestIndexPathPlanSettings: the index path's batches price out sorts and sequential scans, so
// their bound reads the age index in order and their range is read through the index (a batch of
// entries, never the whole backlog or table); the heap path's batches leave both alone. A condition of the pass records the settings from inside.
func TestIndexPathPlanSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path sweep.Path
		want string
	}{{sweep.PathIndex, "off off"}, {sweep.PathHeap, "on on"}} {
		t.Run(string(tc.path), func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			exec(t, pool, `CREATE TABLE probe (id bigint PRIMARY KEY, at timestamptz NOT NULL)`)
			exec(t, pool, `CREATE INDEX ON probe (at)`)
			exec(t, pool, `CREATE TABLE probe_seen (settings text)`)
			exec(t, pool, `CREATE FUNCTION probe_plan() RETURNS boolean LANGUAGE sql VOLATILE AS $$
				INSERT INTO probe_seen VALUES (current_setting('enable_sort') || ' ' || current_setting('enable_seqscan'));
				SELECT true $$`)
			exec(t, pool, `INSERT INTO probe SELECT i, now() - interval '2 days' FROM generate_series(1, 10) i`)
			specs := []policy.Spec{{Name: "probe", Passes: []policy.Pass{{
				Name: "old", Table: "probe", AgeColumn: "at", Retention: 24 * time.Hour, Where: "probe_plan()",
			}}}}
			r := newRunner(t, sweep.WithTestKnobs(sweep.Config{Pool: pool, Specs: specs, Settings: settings()}, tc.path, 0, 0, false))
			if res := run(t, r, "probe"); res.Deleted != 10 || res.Passes[0].Path != string(tc.path) {
				t.Fatalf("run: %+v, want 10 deleted on %s", res.Passes[0], tc.path)
			}
			if n := count(t, pool, `SELECT count(*) FROM probe_seen WHERE settings <> $1`, tc.want); n != 0 || count(t, pool, `SELECT count(*) FROM probe_seen`) == 0 {
				t.Errorf("%d of the batch's evaluations saw other settings than %q", n, tc.want)
			}
			var sortSetting string
			if err := pool.QueryRow(ctx, `SELECT current_setting('enable_sort')`).Scan(&sortSetting); err != nil || sortSetting != "on" {
				t.Errorf("after the run enable_sort = %q (%v), want the default on", sortSetting, err)
			}
		})
	}
}

// TestBatchSession: a pass runs all its batches on one session of the API's resetting pool, so
// the pool's reset runs once, when the pass gives the connection back, not between batches; each
// batch still starts from the session's own settings, whatever the batch before it left; and the
// next run starts from a reset session. A per-row function counts its calls in a temporary table
// (which only the pool's reset drops), and leaves a setting and a read-only default behind.
func TestBatchSession(t *testing.T) {
	t.Parallel()
	cfg, err := dbpool.ParseConfig(dbtest.URL(t), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	exec(t, pool, `CREATE TABLE probe (id bigint PRIMARY KEY, at timestamptz NOT NULL)`)
	exec(t, pool, `CREATE TABLE probe_seen (id bigint, pid int, calls bigint, leak text, read_only text)`)
	exec(t, pool, `CREATE FUNCTION probe_count(k bigint) RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN
			CREATE TEMP TABLE IF NOT EXISTS probe_calls (n int);
			INSERT INTO probe_calls VALUES (1);
			INSERT INTO probe_seen SELECT k, pg_backend_pid(), count(*), coalesce(current_setting('probe.leak', true), ''),
				current_setting('transaction_read_only') FROM probe_calls;
			PERFORM set_config('probe.leak', 'left by ' || k, false);
			PERFORM set_config('default_transaction_read_only', 'on', false);
			DELETE FROM probe WHERE id = k;
			RETURN true;
		END $$`)
	specs := []policy.Spec{{Name: "probe", Passes: []policy.Pass{{
		Name: "old", Table: "probe", AgeColumn: "at", Retention: 24 * time.Hour,
		Mode: policy.ModePerRow, Function: "probe_count",
	}}}}
	st := settings()
	st.BatchSize, st.MinBatchSize, st.MaxBatchSize = 1, 1, 1 // one key a batch
	r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Settings: st})
	for i, first := range []int64{1, 11} {
		exec(t, pool, `INSERT INTO probe SELECT g, now() - interval '2 days' FROM generate_series($1::bigint, $1 + 2) g`, first)
		if res := run(t, r, "probe"); res.Processed != 3 || res.Error != nil {
			t.Fatalf("run %d: processed %d, error %+v; want 3 keys, one a batch", i+1, res.Processed, res.Error)
		}
		var pids int
		var calls, leaks, readOnly string
		if err := pool.QueryRow(ctx, `SELECT count(DISTINCT pid), string_agg(calls::text, ',' ORDER BY id),
				string_agg(leak, ',' ORDER BY id), string_agg(read_only, ',' ORDER BY id) FROM probe_seen WHERE id >= $1`,
			first).Scan(&pids, &calls, &leaks, &readOnly); err != nil {
			t.Fatal(err)
		}
		if pids != 1 || calls != "1,2,3" {
			t.Errorf("run %d: its 3 batches ran on %d sessions, counting %s; want one session counting 1,2,3 "+
				"(a session reset between batches counts 1,1,1; one left unreset by the run before goes on from 4)",
				i+1, pids, calls)
		}
		if leaks != ",," || readOnly != "off,off,off" {
			t.Errorf("run %d: batches saw probe.leak %q and transaction_read_only %q; want nothing left by the batch before, off",
				i+1, leaks, readOnly)
		}
	}
}

// TestNewRunnerRefusesFlushAfter: the value is written into each batch's SQL, so a runner
// refuses one PostgreSQL would round or refuse, whatever its caller checked before.
func TestNewRunnerRefusesFlushAfter(t *testing.T) {
	t.Parallel()
	st := settings()
	st.FlushAfter = 12 << 10
	_, err := sweep.NewRunner(sweep.Config{Pool: dbtest.Pool(t), Specs: []policy.Spec{spec(t, "notifications")}, Settings: st})
	if err == nil || !strings.Contains(err.Error(), "backend_flush_after 12288 bytes") {
		t.Fatalf("NewRunner = %v, want a refusal naming the backend_flush_after", err)
	}
}
