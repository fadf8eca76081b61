package status_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/status"
)

// TestPageReadsAreBounded checks what a page view costs the database: over a history of 30,000
// runs, one index scan of sweeprail.run per sweep of the catalog, no sequential scan, and no
// more rows fetched than the page shows, for a sweep that runs often, one whose runs are all
// old ("old") and one never run.
func TestPageReadsAreBounded(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t)
	const perSweep = 60
	sweeps := []string{"a", "b", "old", "never"}

	setup := open(t, u)
	exec(t, setup, `INSERT INTO sweeprail.run (run_id, sweep, started_at, finished_at, stop_reason, deleted, passes)
		SELECT gen_random_uuid(), (ARRAY['a','b','c','d'])[g % 4 + 1], now() - g * interval '1 minute',
		       now() - g * interval '1 minute' + interval '2 seconds', 'exhausted', g,
		       jsonb_build_array(jsonb_build_object('pass', 'p', 'deleted', g, 'stopReason', 'exhausted',
		                                            'tableRows', 1000, 'tableBytes', 65536))
		FROM generate_series(1, 30000) g`)
	exec(t, setup, `INSERT INTO sweeprail.run (run_id, sweep, started_at, stop_reason)
		SELECT gen_random_uuid(), 'old', now() - interval '60 days' - g * interval '1 minute', 'exhausted'
		FROM generate_series(1, 30000) g`)
	exec(t, setup, `ANALYZE sweeprail.run`)
	setup.Close()

	// Each session's table counters reach the statistics when it ends; a session's end is seen
	// in pg_stat_activity (and, before PostgreSQL 15, in the counters a moment later).
	admin := open(t, u)
	waitSessionsGone(t, admin)
	seq0, idx0, fetched0 := runScans(t, admin)

	var specs []policy.Spec
	for _, s := range sweeps {
		specs = append(specs, policy.Spec{Name: s, Passes: []policy.Pass{{Name: "p", Table: "t_" + s, Retention: 24 * time.Hour}}})
	}
	pagePool := open(t, u)
	h := status.NewHandler(status.Deps{Specs: specs, History: history.New(pagePool, history.DefaultRetention), Runs: perSweep})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, status.Route, nil))
	if body, _ := io.ReadAll(rec.Result().Body); rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, body)
	}
	pagePool.Close()

	var seq, idx, fetched int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		seq, idx, fetched = runScans(t, admin)
		if idx-idx0 >= int64(len(sweeps)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if seq != seq0 {
		t.Errorf("%d sequential scans of sweeprail.run, want none", seq-seq0)
	}
	if idx-idx0 != int64(len(sweeps)) {
		t.Errorf("%d index scans of sweeprail.run, want one per sweep (%d)", idx-idx0, len(sweeps))
	}
	if n := fetched - fetched0; n > int64(len(sweeps)*perSweep) {
		t.Errorf("%d rows fetched, want at most %d: the page shows %d runs of each sweep", n, len(sweeps)*perSweep, perSweep)
	}
}

func open(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := dbpool.NewPool(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// waitSessionsGone waits until no session but admin's is connected to its database.
func waitSessionsGone(t *testing.T, admin *pgxpool.Pool) {
	t.Helper()
	conn, err := admin.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for range 2000 {
		var others int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&others); err != nil {
			t.Fatal(err)
		}
		if others == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the other sessions did not end within 10s")
}

// runScans reads sweeprail.run's scan counters.
func runScans(t *testing.T, admin *pgxpool.Pool) (seq, idx, fetched int64) {
	t.Helper()
	if _, err := admin.Exec(context.Background(), `SELECT pg_stat_clear_snapshot()`); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(context.Background(), `SELECT seq_scan, coalesce(idx_scan, 0), coalesce(idx_tup_fetch, 0)
		FROM pg_stat_user_tables WHERE relid = 'sweeprail.run'::regclass`).Scan(&seq, &idx, &fetched); err != nil {
		t.Fatal(err)
	}
	return seq, idx, fetched
}
