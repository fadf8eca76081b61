package sweep_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// TestBatchRole: a per-row function that switches the session's role for good
// (set_config('role', …, false), which RESET ALL leaves alone) must not carry it into the next
// batch on the same session: each batch runs as the pool's own user, as the database sees it.
func TestBatchRole(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t)
	cfg, err := dbpool.ParseConfig(u, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("batch_role_%d", time.Now().UnixNano())
	exec(t, pool, "CREATE ROLE "+role)
	t.Cleanup(func() {
		exec(t, pool, "DROP OWNED BY "+role)
		exec(t, pool, "DROP ROLE "+role)
		pool.Close()
	})
	exec(t, pool, `CREATE TABLE probe (id bigint PRIMARY KEY, at timestamptz NOT NULL)`)
	exec(t, pool, `CREATE TABLE probe_seen (id bigint, who text)`)
	exec(t, pool, "GRANT ALL ON probe, probe_seen TO "+role)
	exec(t, pool, strings.ReplaceAll(`CREATE FUNCTION probe_role(k bigint) RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO probe_seen VALUES (k, current_user);
			PERFORM set_config('role', '@ROLE@', false);
			DELETE FROM probe WHERE id = k;
			RETURN true;
		END $$`, "@ROLE@", role))
	exec(t, pool, `INSERT INTO probe SELECT g, now() - interval '2 days' FROM generate_series(1, 3) g`)
	var user string
	if err := pool.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil {
		t.Fatal(err)
	}
	specs := []policy.Spec{{Name: "probe", Passes: []policy.Pass{{
		Name: "old", Table: "probe", AgeColumn: "at", Retention: 24 * time.Hour,
		Mode: policy.ModePerRow, Function: "probe_role",
	}}}}
	st := settings()
	st.BatchSize, st.MinBatchSize, st.MaxBatchSize = 1, 1, 1 // one key a batch, on one session
	r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Settings: st})
	if res := run(t, r, "probe"); res.Processed != 3 || res.Error != nil {
		t.Fatalf("run: processed %d, error %+v; want 3 keys, one a batch", res.Processed, res.Error)
	}
	var who string
	if err := pool.QueryRow(ctx, `SELECT string_agg(who, ',' ORDER BY id) FROM probe_seen`).Scan(&who); err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat(user+",", 2) + user; who != want {
		t.Errorf("the batches ran as %s; want each as %s (a role a batch's function set was carried into the next)", who, user)
	}
}
