package partition_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/partition"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.daily("events", "timestamptz", 3, 0, true)
	d.daily("ledger", "date", 2, 0, false)
	d.exec("CREATE TABLE plain (at timestamptz)")
	d.exec("CREATE VIEW a_view AS SELECT * FROM plain")
	d.exec("CREATE TABLE by_list (at timestamptz, region text) PARTITION BY LIST (region)")
	d.exec("CREATE TABLE by_hash (at timestamptz, id int) PARTITION BY HASH (id)")
	d.exec("CREATE TABLE two_cols (at timestamptz, seq int) PARTITION BY RANGE (at, seq)")
	d.exec("CREATE TABLE by_expr (at timestamp) PARTITION BY RANGE ((date_trunc('day', at)))")
	d.exec("CREATE TABLE by_text (at text) PARTITION BY RANGE (at)")
	d.exec("CREATE TABLE other_col (at timestamptz, created_at timestamptz) PARTITION BY RANGE (created_at)")
	d.exec("CREATE TABLE sub (at timestamptz, region text) PARTITION BY RANGE (at)")
	d.exec("CREATE TABLE sub_1 PARTITION OF sub FOR VALUES FROM ('2026-01-01') TO ('2026-02-01') PARTITION BY LIST (region)")
	d.exec("CREATE TABLE sub_2 PARTITION OF sub FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')")

	t.Run("accepted", func(t *testing.T) {
		for _, tc := range []struct {
			table      string
			key        partition.KeyType
			n          int
			hasDefault bool
		}{
			{"events", partition.KeyTimestamptz, 4, true},
			{"public.ledger", partition.KeyDate, 2, false},
		} {
			info, err := partition.Describe(ctx, d.pool, tc.table, "at")
			if err != nil {
				t.Fatalf("%s: %v", tc.table, err)
			}
			if info.Key != tc.key || info.Partitions != tc.n || info.HasDefault != tc.hasDefault || info.Column != "at" {
				t.Errorf("%s: %+v", tc.table, info)
			}
		}
	})

	for _, tc := range []struct {
		name, table, column, want string
	}{
		{"missing", "nope", "at", `table "nope" does not exist`},
		{"not partitioned", "plain", "at", `table "plain" is not partitioned: `},
		{"a view", "a_view", "at", `table "a_view" is a view, not a table`},
		{"list", "by_list", "at", "is partitioned by LIST (region), not by RANGE"},
		{"hash", "by_hash", "at", "is partitioned by HASH (id), not by RANGE"},
		{"two columns", "two_cols", "at", "is partitioned by RANGE (at, seq), on 2 columns"},
		{"expression", "by_expr", "at", "on an expression"},
		{"another column", "other_col", "at", `is partitioned by RANGE (created_at), not on the age column "at"`},
		{"text key", "by_text", "at", "a column of type text: mode partitions needs a timestamptz, timestamp or date key (or an integer of Unix time, with age_unit)"},
		{"sub-partitioned", "sub", "at", "has partitions that are themselves partitioned (public.sub_1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := partition.Describe(ctx, d.pool, tc.table, tc.column)
			var refused *partition.RefusedError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal containing %q", err, tc.want)
			}
			t.Log(err)
		})
	}

	// Roles are the cluster's, not the test database's: unique names, dropped at the end.
	t.Run("owner", func(t *testing.T) {
		suffix := strings.ToLower(rand.Text()[:10])
		sweeper, owner := "sweeper_"+suffix, "owner_"+suffix
		for _, r := range []string{sweeper, owner} {
			d.exec("CREATE ROLE " + r)
			t.Cleanup(func() {
				d.exec("DROP OWNED BY " + r)
				d.exec("DROP ROLE " + r)
			})
		}
		d.exec(fmt.Sprintf("GRANT USAGE ON SCHEMA public TO %s", sweeper))
		as := func(t *testing.T) *pgxpool.Pool {
			cfg, err := pgxpool.ParseConfig(d.url)
			if err != nil {
				t.Fatal(err)
			}
			cfg.AfterConnect = func(c2 context.Context, c *pgx.Conn) error {
				_, err := c.Exec(c2, "SET ROLE "+sweeper)
				return err
			}
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return pool
		}(t)

		d.exec("ALTER TABLE ledger OWNER TO " + owner)
		d.exec("ALTER TABLE ledger_d0 OWNER TO " + owner)
		d.exec("ALTER TABLE ledger_d1 OWNER TO " + owner)
		_, err := partition.Describe(ctx, as, "ledger", "at")
		if want := fmt.Sprintf(`is owned by %q, and role %q is not a member of it`, owner, sweeper); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("not owned: %v, want %q", err, want)
		}

		// A member of the owner role has its privileges: the parent is now fine, not a partition
		// owned by someone else.
		d.exec(fmt.Sprintf("GRANT %s TO %s", owner, sweeper))
		d.exec("ALTER TABLE ledger_d1 OWNER TO postgres")
		_, err = partition.Describe(ctx, as, "ledger", "at")
		if want := fmt.Sprintf(`has 1 partitions that role %q does not own (nor is a member of their owner): public.ledger_d1 (owner postgres)`, sweeper); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("partition not owned: %v, want %q", err, want)
		}

		d.exec("ALTER TABLE ledger_d1 OWNER TO " + owner)
		if _, err := partition.Describe(ctx, as, "ledger", "at"); err != nil {
			t.Fatalf("member of the owner: %v", err)
		}
	})
}
