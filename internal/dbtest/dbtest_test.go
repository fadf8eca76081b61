package dbtest_test

import (
	"context"
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/migrations"
)

func TestPool(t *testing.T) {
	t.Run("migrated", func(t *testing.T) {
		pool := dbtest.Pool(t)
		latest, err := migrations.Latest()
		if err != nil {
			t.Fatal(err)
		}
		var applied int64
		if err := pool.QueryRow(context.Background(),
			"SELECT max(version_id) FROM goose_db_version WHERE is_applied").Scan(&applied); err != nil {
			t.Fatal(err)
		}
		if applied != latest || latest < 2 {
			t.Fatalf("template at version %d, migrations reach %d", applied, latest)
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
