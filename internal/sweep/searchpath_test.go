package sweep_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// searchPathSchema is a swept table of 600 old rows over four heap blocks, and a where condition
// that looks up an unqualified function on the search_path and records the search_path each
// batch ran under.
const searchPathSchema = `
CREATE TABLE sp_rows (id bigint PRIMARY KEY, at timestamptz NOT NULL);
INSERT INTO sp_rows SELECT g, now() - interval '2 days' FROM generate_series(1, 600) g;
CREATE TABLE sp_seen (search_path text);
CREATE FUNCTION public.sp_keep(bigint) RETURNS boolean LANGUAGE sql VOLATILE AS $$
	INSERT INTO sp_seen SELECT current_setting('search_path') WHERE NOT EXISTS (
		SELECT 1 FROM sp_seen WHERE search_path = current_setting('search_path'));
	SELECT true $$`

// TestBatchSearchPath: a pass's first batch computes its search_path (the session's schemas,
// pg_temp last) and every later batch sets that same path as a constant, however the schemas'
// names must be quoted; a schema created mid-pass never joins the path ahead of the one the
// function a where condition names was found in.
func TestBatchSearchPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// setup runs before the pool connects, on the test's database named by %[1]s.
		setup string
		// want is the search_path every batch ran under.
		want string
	}{
		{"the database's default path", ``, `public, pg_temp`},
		{"schemas whose names need quotes, a quote and a backslash, with standard_conforming_strings off",
			`CREATE SCHEMA "it's"; CREATE SCHEMA "back\slash";
			 ALTER DATABASE %[1]s SET search_path = public, "it's", "back\slash";
			 ALTER DATABASE %[1]s SET standard_conforming_strings = off`,
			`public, "it's", "back\slash", pg_temp`},
		{"a schema named for the role, created mid-pass with a function of the same name",
			`ALTER DATABASE %[1]s SET search_path = "$user", public;
			 CREATE FUNCTION sp_shadow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
				EXECUTE format('CREATE SCHEMA IF NOT EXISTS %%I', current_user);
				EXECUTE format('CREATE OR REPLACE FUNCTION %%I.sp_keep(bigint) RETURNS boolean LANGUAGE sql AS ''SELECT false''', current_user);
				RETURN NULL; END $$;
			 CREATE TRIGGER sp_shadow AFTER DELETE ON sp_rows FOR EACH STATEMENT EXECUTE FUNCTION sp_shadow()`,
			`public, pg_temp`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := dbtest.URL(t)
			setup, err := dbpool.NewPool(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			exec(t, setup, searchPathSchema)
			if tc.setup != "" {
				var db string
				if err := setup.QueryRow(ctx, `SELECT quote_ident(current_database())`).Scan(&db); err != nil {
					t.Fatal(err)
				}
				exec(t, setup, fmt.Sprintf(tc.setup, db))
			}
			setup.Close()
			// A pool connected after ALTER DATABASE: its sessions start from the new default.
			pool, err := dbpool.NewPool(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			specs := []policy.Spec{{Name: "sp", Passes: []policy.Pass{{
				Name: "old", Table: "sp_rows", AgeColumn: "at", Retention: 24 * time.Hour,
				Where: "sp_keep(t.id)", AllowUnindexed: true,
			}}}}
			r := newRunner(t, sweep.WithTestKnobs(sweep.Config{Pool: pool, Specs: specs, Settings: settings()}, sweep.PathHeap, 1, 0, false))
			res := run(t, r, "sp")
			if res.Error != nil || res.Deleted != 600 || res.Passes[0].BatchCount < 4 {
				t.Fatalf("deleted %d rows in %d batches, error %+v; want all 600, a batch a block", res.Deleted, res.Passes[0].BatchCount, res.Error)
			}
			var paths []string
			rows, err := pool.Query(ctx, `SELECT search_path FROM sp_seen ORDER BY 1`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var p string
				if err := rows.Scan(&p); err != nil {
					t.Fatal(err)
				}
				paths = append(paths, p)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if len(paths) != 1 || paths[0] != tc.want {
				t.Errorf("the batches ran under search_path %q, want %q in every batch", paths, tc.want)
			}
		})
	}
}
