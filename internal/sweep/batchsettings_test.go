package sweep_test

import (
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// TestBatchSettings: every batch transaction runs under its own timeouts, commit mode and
// custom plans (a generic plan of the prepared batch statement can be the wrong one; see
// Runner.batch), set locally, so the pool's connections come back with the server's defaults.
// A batch commits asynchronously unless Settings.SyncCommit asks it to wait for its own WAL
// flush. A per-row function reads the settings from inside the batch.
func TestBatchSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		syncCommit bool
		wantCommit string
	}{
		{"by default, asynchronous commit", false, "off"},
		{"with SyncCommit, the server's synchronous commit", true, "on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			exec(t, pool, `CREATE TABLE probe (id bigint PRIMARY KEY, at timestamptz NOT NULL)`)
			exec(t, pool, `CREATE TABLE probe_seen (plan_cache_mode text, synchronous_commit text, statement_timeout text,
				lock_timeout text, idle_timeout text)`)
			exec(t, pool, `CREATE FUNCTION probe_settings(k bigint) RETURNS boolean LANGUAGE sql AS $$
				INSERT INTO probe_seen VALUES (current_setting('plan_cache_mode'), current_setting('synchronous_commit'),
					current_setting('statement_timeout'), current_setting('lock_timeout'),
					current_setting('idle_in_transaction_session_timeout'));
				DELETE FROM probe WHERE id = k;
				SELECT true $$`)
			exec(t, pool, `INSERT INTO probe VALUES (1, now() - interval '2 days')`)

			specs := []policy.Spec{{Name: "probe", Passes: []policy.Pass{{
				Name: "old", Table: "probe", AgeColumn: "at", Retention: 24 * time.Hour,
				Mode: policy.ModePerRow, Function: "probe_settings",
			}}}}
			st := settings()
			st.SyncCommit = tc.syncCommit
			r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Settings: st})
			if res := run(t, r, "probe"); res.Processed != 1 || res.Deleted != 0 || res.Error != nil {
				t.Fatalf("processed %d, deleted %d, error %+v; want 1 key processed", res.Processed, res.Deleted, res.Error)
			}
			var plan, commit, stmt, lock, idle string
			if err := pool.QueryRow(ctx, `SELECT * FROM probe_seen`).Scan(&plan, &commit, &stmt, &lock, &idle); err != nil {
				t.Fatal(err)
			}
			if plan != "force_custom_plan" || commit != tc.wantCommit || stmt != "5s" || lock != "2s" || idle != "10s" {
				t.Errorf("inside the batch: plan_cache_mode %s, synchronous_commit %s, statement_timeout %s, lock_timeout %s, "+
					"idle_in_transaction_session_timeout %s; want force_custom_plan, %s, 5s, 2s, 10s", plan, commit, stmt, lock, idle, tc.wantCommit)
			}
			// SET LOCAL: gone with the transaction.
			if err := pool.QueryRow(ctx, `SELECT current_setting('plan_cache_mode'), current_setting('synchronous_commit')`).Scan(&plan, &commit); err != nil {
				t.Fatal(err)
			}
			if plan != "auto" || commit != "on" {
				t.Errorf("after the run: plan_cache_mode %s, synchronous_commit %s; want the defaults auto, on", plan, commit)
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
