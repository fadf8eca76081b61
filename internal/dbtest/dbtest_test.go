package dbtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/migrations"
)

// userObjects lists the schemas and relations of a database that are not PostgreSQL's own.
func userObjects(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	var objs []string
	err := pool.QueryRow(context.Background(), `
SELECT coalesce(array_agg(o ORDER BY o), '{}') FROM (
    SELECT 'schema ' || nspname AS o FROM pg_namespace
     WHERE nspname NOT IN ('public', 'information_schema') AND nspname NOT LIKE 'pg\_%'
    UNION ALL
    SELECT 'relation ' || n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname NOT IN ('information_schema') AND n.nspname NOT LIKE 'pg\_%'
) x`).Scan(&objs)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func newPool(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := dbpool.NewPool(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestPool(t *testing.T) {
	t.Run("both sets migrated", func(t *testing.T) {
		pool := dbtest.Pool(t)
		for _, set := range migrations.Sets() {
			latest, err := set.Latest()
			if err != nil {
				t.Fatal(err)
			}
			applied, err := set.Check(context.Background(), pool)
			if err != nil || applied != latest {
				t.Fatalf("%s set at version %d (%v), migrations reach %d", set.Name, applied, err, latest)
			}
		}
	})

	// Two tests writing the same table at the same time each see only their own rows.
	t.Run("isolated", func(t *testing.T) {
		for _, email := range []string{"a@example.com", "b@example.com"} {
			t.Run(email, func(t *testing.T) {
				t.Parallel()
				pool := dbtest.Pool(t)
				ctx := context.Background()
				if _, err := pool.Exec(ctx, "INSERT INTO accounts (email) VALUES ($1)", email); err != nil {
					t.Fatal(err)
				}
				var n int
				var got string
				if err := pool.QueryRow(ctx, "SELECT count(*), min(email) FROM accounts").Scan(&n, &got); err != nil {
					t.Fatal(err)
				}
				if n != 1 || got != email {
					t.Fatalf("saw %d accounts (first %q); want only %q", n, got, email)
				}
			})
		}
	})
}

// TestSweeprailURL: a database with sweeprail's own set holds schema sweeprail and nothing else.
func TestSweeprailURL(t *testing.T) {
	pool := newPool(t, dbtest.SweeprailURL(t))
	if _, err := migrations.Sweeprail.Check(context.Background(), pool); err != nil {
		t.Fatalf("sweeprail set: %v", err)
	}
	if _, err := migrations.Demo.Check(context.Background(), pool); err == nil {
		t.Fatal("the demo set is installed too")
	}
	for _, o := range userObjects(t, pool) {
		// Everything in schema sweeprail, nothing anywhere else.
		if o != "schema sweeprail" && !strings.HasPrefix(o, "relation sweeprail.") {
			t.Errorf("unexpected %s", o)
		}
	}
}

// TestEmptyURL: an empty database holds nothing of either set.
func TestEmptyURL(t *testing.T) {
	pool := newPool(t, dbtest.EmptyURL(t))
	if objs := userObjects(t, pool); len(objs) != 0 {
		t.Fatalf("an empty database holds %v", objs)
	}
}
