package check_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
)

var ctx = context.Background()

// policyYAML wraps one pass (its keys indented for a pass) into a one-sweep policy; the pass
// starts on line 4, its keys on lines 4 to 7 in the order name, table, age_column, retention,
// then extra from line 8.
func policyYAML(pass string) string {
	return "sweeps:\n  - name: s\n    passes:\n" + pass
}

func passYAML(table, ageColumn string, extra ...string) string {
	s := "      - name: p\n        table: " + table + "\n        age_column: " + ageColumn + "\n        retention: 30d\n"
	for _, e := range extra {
		s += "        " + e + "\n"
	}
	return s
}

// checkYAML loads yaml as p.yaml and checks it against pool's database.
func checkYAML(t *testing.T, pool *pgxpool.Pool, yaml string) ([]string, error) {
	t.Helper()
	pol, err := policy.Load("p.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("load: %v\n%s", err, yaml)
	}
	return check.Policy(ctx, pool, pol)
}

// refusals splits the check's joined error into its refusals, each "file:line: pass …: message".
func refusals(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
}

// fixturePool is a fresh database of the reference schema with sql run in it.
func fixturePool(t *testing.T, sql ...string) *pgxpool.Pool {
	t.Helper()
	pool := dbtest.Pool(t)
	for _, s := range sql {
		exec(t, pool, s)
	}
	return pool
}

// asRole is a pool of pool's database whose connections act as a new role of the cluster, made by
// grants (with @ROLE@ for the role's name) and dropped at the end: roles are the cluster's, not
// the test database's.
func asRole(t *testing.T, pool *pgxpool.Pool, prefix, grants string) (*pgxpool.Pool, string) {
	t.Helper()
	role := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	exec(t, pool, "CREATE ROLE "+role)
	t.Cleanup(func() {
		exec(t, pool, "DROP OWNED BY "+role)
		exec(t, pool, "DROP ROLE "+role)
	})
	exec(t, pool, strings.ReplaceAll(grants, "@ROLE@", role))
	cfg := pool.Config().Copy()
	cfg.AfterConnect = func(c context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(c, "SET ROLE "+role)
		return err
	}
	as, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(as.Close)
	return as, role
}

// sameLines fails t unless got and want hold the same lines, in order; what names them.
func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", what, quoteLines(got), quoteLines(want))
	}
}

func quoteLines(lines []string) string {
	if len(lines) == 0 {
		return "  (none)"
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "  %q,\n", l)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// fixtureConn is a connection to u with sql run in it, closed at the end.
func fixtureConn(t *testing.T, u string, sql ...string) *pgx.Conn {
	t.Helper()
	c := dbtest.Conn(t, u)
	for _, s := range sql {
		if _, err := c.Exec(ctx, s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
	return c
}
