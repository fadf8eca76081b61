package partition_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/partition"
)

// TestDefinerGuards holds what the drop function promises beyond its cutoff, each observed in
// the database: who may run it, what it calls, and names that try to leave their quotes.
func TestDefinerGuards(t *testing.T) {
	t.Parallel()

	t.Run("another login role may not execute it", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		d.daily("events", "timestamptz", 3, 0, false)
		role, _ := d.asRole(`GRANT SELECT, UPDATE, DELETE ON "events" TO @ROLE@`)
		d.exec(partition.DefinerSQL("events", role, windowTo(day(2))))
		_, other := d.asRole(`GRANT SELECT ON "events" TO @ROLE@`)
		if err := callAs(t, other, "public.sweeprail_drop_events", "events_d0", "1s"); pgCode(err) != "42501" {
			t.Errorf("a role without the grant: %v, want 42501", err)
		}
		if got := d.attached("events_d0"); got != "attached" {
			t.Errorf("events_d0 is %s, want attached", got)
		}
	})

	t.Run("a caller's own function on its search_path does not run as the owner", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		d.daily("events", "timestamptz", 3, 0, false)
		role, r := d.asRole(`GRANT SELECT, UPDATE, DELETE ON "events" TO @ROLE@`, `CREATE SCHEMA shadow AUTHORIZATION @ROLE@`)
		d.exec(partition.DefinerSQL("events", role, windowTo(day(2))))
		// Each stand-in raises naming the role it runs as: the function must call pg_catalog's.
		for _, sig := range []string{"regexp_match(text, text)", "pg_get_expr(pg_node_tree, oid)", "left(text, integer)", "current_setting(text)", "now()"} {
			r.exec(fmt.Sprintf(`CREATE FUNCTION shadow.%s RETURNS %s LANGUAGE plpgsql AS $f$
BEGIN RAISE EXCEPTION 'shadow ran as %%', current_user; END $f$`, sig, map[bool]string{true: "timestamptz", false: "text[]"}[sig == "now()"]))
		}
		tx, err := r.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SET LOCAL search_path = shadow, pg_catalog, public; SET LOCAL lock_timeout = '1s'`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT regexp_match('a', 'a')`); err == nil || !strings.Contains(err.Error(), "shadow ran as") {
			t.Fatalf("the stand-in is not on the caller's path: %v", err)
		}
		_ = tx.Rollback(ctx)
		tx, err = r.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SET LOCAL search_path = shadow, pg_catalog, public; SET LOCAL lock_timeout = '1s'`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT public.sweeprail_drop_events('public.events_d0'::regclass)`); err != nil {
			t.Fatalf("the drop with stand-ins on the path: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if got := d.attached("events_d0"); got != "gone" {
			t.Errorf("events_d0 is %s, want gone", got)
		}
	})

	t.Run("a role named with a quote", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		d.daily("events", "timestamptz", 3, 0, false)
		role := fmt.Sprintf(`o'brien "%d"; DROP TABLE events; --`, time.Now().UnixNano())
		d.exec(`CREATE ROLE ` + pgx.Identifier{role}.Sanitize() + ` LOGIN PASSWORD 'change-me'`)
		t.Cleanup(func() {
			_, _ = d.pool.Exec(ctx, `DROP OWNED BY `+pgx.Identifier{role}.Sanitize())
			_, _ = d.pool.Exec(ctx, `DROP ROLE `+pgx.Identifier{role}.Sanitize())
		})
		d.exec(`GRANT SELECT, UPDATE, DELETE ON events TO ` + pgx.Identifier{role}.Sanitize())
		d.exec(partition.DefinerSQL("events", role, windowTo(day(2))))
		if n := d.int(`SELECT count(*) FROM pg_class WHERE relname = 'events'`); n != 1 {
			t.Fatalf("events is gone: the role's name ran")
		}
		u, err := url.Parse(d.url)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(role, "change-me")
		pool, err := dbpool.NewPool(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if err := callAs(t, &db{t: t, url: u.String(), pool: pool}, "public.sweeprail_drop_events", "events_d0", "1s"); err != nil {
			t.Fatalf("the drop as %q: %v", role, err)
		}
		if got := d.attached("events_d0"); got != "gone" {
			t.Errorf("events_d0 is %s, want gone", got)
		}
	})

	t.Run("a table named to end the block early", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		for _, name := range []string{
			`ev$do$;CREATE TABLE pwned_by_name();--`,
			`ev$fn$', 'x'); CREATE TABLE pwned_by_name();--`,
			`ev$body$ $sweeprail_grant$;CREATE TABLE pwned_by_name();--`,
			`ev$sweeprail_body$');CREATE TABLE pwned_by_name();--`,
			`ev";CREATE TABLE pwned_by_name();--`,
		} {
			q := pgx.Identifier{name}.Sanitize()
			d.exec(fmt.Sprintf(`CREATE TABLE %s (at timestamptz NOT NULL) PARTITION BY RANGE (at)`, q))
			d.exec(fmt.Sprintf(`CREATE TABLE %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')`,
				pgx.Identifier{name[:8] + "_p"}.Sanitize(), q, day(0).Format(time.DateOnly), day(1).Format(time.DateOnly)))
			role, r := d.asRole(`GRANT SELECT, UPDATE, DELETE ON ` + q + ` TO @ROLE@`)
			d.exec(partition.DefinerSQL(name, role, windowTo(day(2))))
			if n := d.int(`SELECT count(*) FROM pg_class WHERE relname = 'pwned_by_name'`); n != 0 {
				t.Fatalf("%s: the name's statement ran", name)
			}
			def, err := partition.FindDefiner(ctx, r.pool, name)
			if err != nil || !def.Usable {
				t.Fatalf("%s: FindDefiner: %+v, %v", name, def, err)
			}
			if err := callAs(t, r, def.Function, pgx.Identifier{name[:8] + "_p"}.Sanitize(), "1s"); err != nil {
				t.Errorf("%s: the drop: %v", name, err)
			}
		}
	})
}
