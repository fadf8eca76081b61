package check

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
)

// volatilityFixtures are user objects a hostile or careless policy may reach: a volatile function
// behind an operator, a cast, a view, an aggregate, a row-level security policy, a domain.
const volatilityFixtures = `
CREATE FUNCTION vol_eq(integer, integer) RETURNS boolean LANGUAGE sql VOLATILE AS 'SELECT $1 = $2';
CREATE OPERATOR === (LEFTARG = integer, RIGHTARG = integer, FUNCTION = vol_eq);
CREATE FUNCTION stable_eq(integer, integer) RETURNS boolean LANGUAGE sql STABLE AS 'SELECT $1 = $2';
CREATE OPERATOR ==== (LEFTARG = integer, RIGHTARG = integer, FUNCTION = stable_eq);

CREATE TYPE delivery_state AS ENUM ('success', 'dead_letter');
CREATE FUNCTION vol_state(text) RETURNS delivery_state LANGUAGE sql VOLATILE AS $$ SELECT 'success'::delivery_state $$;
CREATE CAST (text AS delivery_state) WITH FUNCTION vol_state(text);

CREATE VIEW accounts_wiped AS SELECT id FROM accounts WHERE wipe_account(id);

CREATE FUNCTION vol_add(bigint, integer) RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT $1 + $2';
CREATE AGGREGATE vol_total(integer) (SFUNC = vol_add, STYPE = bigint, INITCOND = '0');

CREATE FUNCTION vol_check(bigint) RETURNS boolean LANGUAGE sql VOLATILE AS 'SELECT true';
CREATE TABLE guarded (id bigint PRIMARY KEY);
ALTER TABLE guarded ENABLE ROW LEVEL SECURITY;
CREATE POLICY guarded_rows ON guarded USING (vol_check(id));

CREATE DOMAIN checked_int AS integer CHECK (vol_check(VALUE::bigint));
`

// TestVolatileCalls: every VOLATILE function a condition resolves to is named, however it is
// reached; STABLE and IMMUTABLE ones are not.
func TestVolatileCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	if _, err := pool.Exec(ctx, volatilityFixtures); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, table, condition string
		want                   []string
	}{
		// A per-row erasure in a subquery would erase accounts in a dry run's count.
		{"wipe_account in a subquery", "accounts",
			`(SELECT count(*) FROM accounts a WHERE wipe_account(a.id)) >= 0`, []string{"wipe_account(uuid)"}},
		// A session setting would be left on a pooled connection.
		{"set_config", "notifications",
			`set_config('default_transaction_read_only', 'on', false) IS NOT NULL`, []string{"set_config(text,text,boolean)"}},
		{"random()", "notifications", `random() < 0.5`, []string{"random()"}},
		{"now() is stable", "notifications", `t.read_at < now() - interval '1 day'`, nil},
		{"clock_timestamp() is volatile", "notifications", `t.read_at < clock_timestamp()`, []string{"clock_timestamp()"}},
		{"nextval in a CASE", "notifications", `CASE WHEN t.kind = 'x' THEN nextval('notifications_id_seq') > 0 ELSE true END`,
			[]string{"nextval(regclass)"}},
		{"a volatile user operator", "email_messages", `t.attempts === 3`, []string{"vol_eq(integer,integer)"}},
		{"a stable user operator", "email_messages", `t.attempts ==== 3`, nil},
		{"a volatile operator in IN and ANY", "email_messages", `t.attempts === ANY (ARRAY[1, 2])`, []string{"vol_eq(integer,integer)"}},
		{"a volatile cast", "webhook_deliveries", `t.status::delivery_state = 'success'`, []string{"vol_state(text)"}},
		{"through a view", "notifications", `NOT EXISTS (SELECT 1 FROM accounts_wiped w WHERE w.id = t.account_id)`,
			[]string{"wipe_account(uuid)"}},
		{"an aggregate's transition function", "email_messages", `(SELECT vol_total(attempts) FROM email_messages) >= 0`,
			[]string{"vol_add(bigint,integer)"}},
		{"a row-level security policy of a table read", "notifications", `EXISTS (SELECT 1 FROM guarded)`,
			[]string{"vol_check(bigint)"}},
		{"a domain's check", "email_messages", `t.attempts::checked_int > 0`, []string{"vol_check(bigint)"}},
		{"two at once, sorted", "notifications", `random() < 0.5 OR t.read_at < clock_timestamp()`,
			[]string{"clock_timestamp()", "random()"}},
		{"plain comparisons", "email_messages",
			`t.status = 'sent' AND t.attempts > 3 AND t.status IN ('sent', 'failed') AND t.subject LIKE 'x%' AND lower(t.to_address) <> ''`, nil},
		{"count(*) in a subquery", "outbox_events",
			`(SELECT count(*) FROM webhook_deliveries d WHERE d.outbox_event_id = t.id) = 0`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := volatileIn(t, pool, tc.table, tc.condition)
			if !slices.Equal(got, tc.want) {
				t.Errorf("volatileCalls(%s, %q) = %q, want %q", tc.table, tc.condition, got, tc.want)
			}
		})
	}

	t.Run("the bundled catalog calls none", func(t *testing.T) {
		t.Parallel()
		for _, s := range policy.Catalog() {
			for _, p := range s.Passes {
				if strings.TrimSpace(p.Where) == "" {
					continue
				}
				if got := volatileIn(t, pool, p.Table, p.Where); len(got) > 0 {
					t.Errorf("%s.%s: where %q calls %q", s.Name, p.Name, p.Where, got)
				}
			}
		}
	})
}

// volatileIn runs volatileCalls in a transaction it rolls back, as the caller will.
func volatileIn(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, table, condition string) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	got, err := volatileCalls(ctx, tx, table, condition)
	if err != nil {
		t.Fatalf("volatileCalls(%s, %q): %v", table, condition, err)
	}
	return got
}

// TestVolatileCallsRunsNothing: the condition is resolved, never run, and never more than one
// statement; a condition that does not resolve is an error that leaves the caller's transaction
// usable and no probe view behind.
func TestVolatileCallsRunsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO accounts (email) VALUES ('a@example.com')`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()

	// Resolved, not run: the account is not erased.
	got, err := volatileCalls(ctx, tx, "accounts", `wipe_account(t.id)`)
	if err != nil || !slices.Equal(got, []string{"wipe_account(uuid)"}) {
		t.Fatalf("volatileCalls = %q, %v", got, err)
	}
	// In order, in the one transaction.
	for _, tc := range []struct{ name, condition, mention string }{
		{"a second statement", `true); DELETE FROM accounts; SELECT (1`, "42601"},
		{"a syntax error", `t.email = `, "42601"},
		{"an unknown column", `t.nope = 1`, "42703"},
		{"a parameter", `t.created_at < $1`, "42P02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := volatileCalls(ctx, tx, "accounts", tc.condition)
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("err = %v, want one naming %s", err, tc.mention)
			}
		})
	}
	var erased, accounts, views int
	err = tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM accounts WHERE deleted_at IS NOT NULL),
		(SELECT count(*) FROM accounts),
		(SELECT count(*) FROM pg_class WHERE relname LIKE 'sweeprail_volatility_%')`).Scan(&erased, &accounts, &views)
	if err != nil {
		t.Fatalf("the caller's transaction is not usable after the errors: %v", err)
	}
	if erased != 0 || accounts != 1 || views != 0 {
		t.Errorf("%d accounts erased, %d left, %d probe views left: want 0, 1, 0", erased, accounts, views)
	}
}
