package migrations_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/migrations"
)

var ctx = context.Background()

func newPool(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := dbpool.NewPool(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(ctx, sql); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
}

// schemas lists the database's schemas that are not PostgreSQL's own, and public's relations.
func contents(t *testing.T, pool *pgxpool.Pool) (schemas, public []string) {
	t.Helper()
	if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(nspname::text ORDER BY nspname), '{}') FROM pg_namespace
		WHERE nspname NOT IN ('public', 'information_schema') AND nspname NOT LIKE 'pg\_%'`).Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(relname::text ORDER BY relname), '{}') FROM pg_class
		WHERE relnamespace = 'public'::regnamespace`).Scan(&public); err != nil {
		t.Fatal(err)
	}
	return schemas, public
}

func TestSweeprailUp(t *testing.T) {
	t.Run("only schema sweeprail, and only once", func(t *testing.T) {
		u := dbtest.EmptyURL(t)
		pool := newPool(t, u)
		exec(t, pool, `CREATE TABLE public.jobs (id bigint PRIMARY KEY)`)
		var out bytes.Buffer
		if err := migrations.Sweeprail.Up(ctx, u, &out); err != nil {
			t.Fatalf("up: %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "applied sweeprail/00001_sweep_lock.sql") {
			t.Fatalf("up printed:\n%s", out.String())
		}
		schemas, public := contents(t, pool)
		if strings.Join(schemas, ",") != "sweeprail" || strings.Join(public, ",") != "jobs,jobs_pkey" {
			t.Fatalf("schemas %v, public %v; want only schema sweeprail added", schemas, public)
		}
		out.Reset()
		if err := migrations.Sweeprail.Up(ctx, u, &out); err != nil || out.Len() != 0 {
			t.Fatalf("second up: %v, printed %q", err, out.String())
		}
	})

	// Replicas migrate at boot together: each creates the schema only when it is missing, under
	// the set's advisory lock, and goose queues them on the same lock.
	t.Run("eight at once on an empty database", func(t *testing.T) {
		u := dbtest.EmptyURL(t)
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = migrations.Sweeprail.Up(ctx, u, io.Discard)
			}()
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent up: %v", err)
		}
		var applied int
		if err := newPool(t, u).QueryRow(ctx, `SELECT count(*) FROM sweeprail.goose_db_version WHERE version_id > 0`).Scan(&applied); err != nil {
			t.Fatal(err)
		}
		if latest, _ := migrations.Sweeprail.Latest(); int64(applied) != latest {
			t.Fatalf("%d versions recorded, want each migration once", applied)
		}
	})

	// Init containers migrate at once through a transaction pooler, which hands each
	// transaction to any server connection: a session's advisory lock did not hold there, and
	// two could both run migration 1. Eight at once, through PgBouncer of four server
	// connections, in each pool mode; every set, and every migration applied once.
	for _, mode := range []string{"transaction", "session"} {
		t.Run("eight at once through PgBouncer in "+mode+" mode", func(t *testing.T) {
			u := dbtest.EmptyURL(t)
			pooled := dbtest.PoolerURL(t, mode, u)
			const n = 8
			errs := make([]error, n)
			outs := make([]bytes.Buffer, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for _, set := range migrations.Sets() {
						if err := set.Up(ctx, pooled, &outs[i]); err != nil {
							errs[i] = err
							return
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("concurrent up: %v", err)
			}
			var all strings.Builder
			for i := range outs {
				all.WriteString(outs[i].String())
			}
			if c := strings.Count(all.String(), "applied sweeprail/00001_sweep_lock.sql"); c != 1 {
				t.Errorf("migration 1 applied %d times, want once:\n%s", c, all.String())
			}
			pool := newPool(t, u)
			for _, set := range migrations.Sets() {
				var applied, distinct int
				if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT version_id) FROM `+set.VersionTable+` WHERE version_id > 0`).Scan(&applied, &distinct); err != nil {
					t.Fatal(err)
				}
				if latest, _ := set.Latest(); int64(applied) != latest || distinct != applied {
					t.Errorf("%s: %d versions recorded (%d distinct), want each of %d once", set.Name, applied, distinct, latest)
				}
				if _, err := set.Check(ctx, pool); err != nil {
					t.Error(err)
				}
			}
		})
	}

	// A DBA created the schema for the migrating role, which may not create schemas itself.
	t.Run("a schema created beforehand, by a role without CREATE on the database", func(t *testing.T) {
		role := newRole(t)
		u := dbtest.EmptyURL(t)
		admin := newPool(t, u)
		as := asRole(t, u, role)

		err := migrations.Sweeprail.Up(ctx, as, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "CREATE SCHEMA sweeprail AUTHORIZATION") {
			t.Fatalf("up without the schema nor the right to create it: %v, want the CREATE SCHEMA hint", err)
		}
		exec(t, admin, `CREATE SCHEMA sweeprail AUTHORIZATION `+pgx.Identifier{role}.Sanitize())
		if err := migrations.Sweeprail.Up(ctx, as, io.Discard); err != nil {
			t.Fatalf("up into the schema made for it: %v", err)
		}
		if _, err := migrations.Sweeprail.Check(ctx, newPool(t, as)); err != nil {
			t.Fatal(err)
		}
	})
}

// newRole creates a login role that may connect but not create schemas, dropped at cleanup
// (after the databases the test creates later, which are dropped first).
func newRole(t *testing.T) string {
	t.Helper()
	server := newPool(t, dbtest.ServerURL(t))
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	role := "mig_" + hex.EncodeToString(b)
	exec(t, server, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'pw'`, role))
	t.Cleanup(func() {
		if _, err := server.Exec(context.Background(), `DROP ROLE `+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	return role
}

func asRole(t *testing.T, u, role string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p.User = url.UserPassword(role, "pw")
	return p.String()
}

func TestCheck(t *testing.T) {
	latest, err := migrations.Sweeprail.Latest()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		// prepare turns a database with sweeprail's set into the case's.
		prepare string
		empty   bool
		// want is a part of the NotReadyError's message; "" means ready.
		want string
	}{
		{name: "installed", want: ""},
		{name: "nothing installed", empty: true, want: "sweeprail's own schema is not installed (no table sweeprail.goose_db_version): run api migrate up"},
		{name: "one migration behind", prepare: `DELETE FROM sweeprail.goose_db_version WHERE version_id = (SELECT max(version_id) FROM sweeprail.goose_db_version)`,
			want: fmt.Sprintf("sweeprail's own schema is at migration %[1]d, this build needs %[2]d: run api migrate up", latest-1, latest)},
		{name: "ahead of the build", prepare: `INSERT INTO sweeprail.goose_db_version (version_id, is_applied) VALUES (99999, true)`, want: ""},
		{name: "lease table dropped by hand", prepare: `DROP TABLE sweeprail.sweep_lock`,
			want: "table sweeprail.sweep_lock does not exist although sweeprail.goose_db_version records every migration"},
		{name: "the demo set's table does not count", empty: true, prepare: `CREATE TABLE goose_db_version (version_id bigint, is_applied boolean);
			INSERT INTO goose_db_version VALUES (1, true)`, want: "not installed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := dbtest.SweeprailURL(t)
			if tc.empty {
				u = dbtest.EmptyURL(t)
			}
			pool := newPool(t, u)
			if tc.prepare != "" {
				exec(t, pool, tc.prepare)
			}
			_, err := migrations.Sweeprail.Check(ctx, pool)
			var nr *migrations.NotReadyError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("check: %v, want ready", err)
			case tc.want != "" && (!errors.As(err, &nr) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("check: %v, want a NotReadyError saying %q", err, tc.want)
			}
		})
	}

	t.Run("unreachable database: not a NotReadyError", func(t *testing.T) {
		pool := newPool(t, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
		_, err := migrations.Sweeprail.Check(ctx, pool)
		var nr *migrations.NotReadyError
		if err == nil || errors.As(err, &nr) {
			t.Fatalf("check: %v, want the connection's error", err)
		}
	})
}

func TestStatus(t *testing.T) {
	u := dbtest.EmptyURL(t)
	var out bytes.Buffer
	pending, err := migrations.Sweeprail.Status(ctx, u, &out)
	latest, _ := migrations.Sweeprail.Latest()
	if err != nil || int64(pending) != latest || !strings.Contains(out.String(), "sweeprail/00001_sweep_lock.sql") {
		t.Fatalf("status of an empty database: %d pending, %v\n%s", pending, err, out.String())
	}
	if schemas, public := contents(t, newPool(t, u)); len(schemas)+len(public) != 0 {
		t.Fatalf("status wrote to the database: schemas %v, public %v", schemas, public)
	}
	if err := migrations.Sweeprail.Up(ctx, u, io.Discard); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if pending, err := migrations.Sweeprail.Status(ctx, u, &out); err != nil || pending != 0 || !strings.Contains(out.String(), "applied 20") {
		t.Fatalf("status after up: %d pending, %v\n%s", pending, err, out.String())
	}
}

func TestDemoUp(t *testing.T) {
	t.Run("beside sweeprail's set, each in its own version table", func(t *testing.T) {
		u := dbtest.SweeprailURL(t)
		if err := migrations.Demo.Up(ctx, u, io.Discard); err != nil {
			t.Fatal(err)
		}
		pool := newPool(t, u)
		for _, set := range migrations.Sets() {
			if _, err := set.Check(ctx, pool); err != nil {
				t.Errorf("%s: %v", set.Name, err)
			}
		}
		var leaseTables int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname = 'sweep_lock'`).Scan(&leaseTables); err != nil {
			t.Fatal(err)
		}
		if leaseTables != 1 {
			t.Fatalf("%d sweep_lock tables; the demo set must not create one of its own", leaseTables)
		}
	})

	// goose's default version table of an application that migrates with goose itself.
	t.Run("refuses a goose_db_version of someone else's", func(t *testing.T) {
		u := dbtest.EmptyURL(t)
		pool := newPool(t, u)
		exec(t, pool, `CREATE TABLE goose_db_version (id serial PRIMARY KEY, version_id bigint NOT NULL, is_applied boolean NOT NULL, tstamp timestamp DEFAULT now());
			INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, true), (1, true), (20240101120000, true)`)
		err := migrations.Demo.Up(ctx, u, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "versions 20240101120000") {
			t.Fatalf("demo up over a foreign version table: %v", err)
		}
		if _, public := contents(t, pool); strings.Join(public, ",") != "goose_db_version,goose_db_version_id_seq,goose_db_version_pkey" {
			t.Fatalf("demo up created %v", public)
		}
	})
}

// TestLatest: every set embeds migrations numbered from 1 without a gap.
func TestLatest(t *testing.T) {
	for _, set := range migrations.Sets() {
		latest, err := set.Latest()
		if err != nil || latest < 1 {
			t.Fatalf("%s: latest %d, %v", set.Name, latest, err)
		}
		var out bytes.Buffer
		if _, err := set.Status(ctx, dbtest.EmptyURL(t), &out); err != nil {
			t.Fatal(err)
		}
		if lines := strings.Count(out.String(), "\n"); int64(lines) != latest {
			t.Errorf("%s: %d migrations, numbered up to %d", set.Name, lines, latest)
		}
	}
}
