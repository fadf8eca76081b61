package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/migrations"
)

// publicTables counts the tables in schema public: the demo schema's home, and an operator's.
func publicTables(t *testing.T, u string) int {
	t.Helper()
	pool, err := dbpool.NewPool(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMigrate(t *testing.T) {
	u := dbtest.EmptyURL(t)
	env := map[string]string{"DATABASE_URL": u}
	ctx := context.Background()

	var out bytes.Buffer
	if err := run(ctx, []string{"api", "migrate", "status"}, env, &out, &out); err != nil {
		t.Fatalf("status before: %v", err)
	}
	latest, err := migrations.Sweeprail.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(strings.TrimSpace(out.String()), fmt.Sprintf("sweeprail migrations: %d pending", latest)) {
		t.Fatalf("status of an empty database:\n%s", out.String())
	}

	t.Run("up applies sweeprail's own set, nothing else", func(t *testing.T) {
		out.Reset()
		if err := run(ctx, []string{"api", "migrate", "up"}, env, &out, &out); err != nil {
			t.Fatalf("up: %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "applied sweeprail/00001_sweep_lock.sql") || strings.Contains(out.String(), "demo/") {
			t.Fatalf("up printed:\n%s", out.String())
		}
		if n := publicTables(t, u); n != 0 {
			t.Fatalf("up created %d tables in public, want none", n)
		}
		out.Reset()
		if err := run(ctx, []string{"api", "migrate", "status"}, env, &out, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(strings.TrimSpace(out.String()), "sweeprail migrations: 0 pending") {
			t.Fatalf("status after up:\n%s", out.String())
		}
	})

	t.Run("up twice changes nothing", func(t *testing.T) {
		out.Reset()
		if err := run(ctx, []string{"api", "migrate"}, env, &out, &out); err != nil {
			t.Fatalf("second up: %v", err)
		}
		if strings.Contains(out.String(), "applied ") {
			t.Fatalf("second up applied again:\n%s", out.String())
		}
	})

	t.Run("--demo adds the demo schema", func(t *testing.T) {
		out.Reset()
		if err := run(ctx, []string{"api", "migrate", "status", "--demo"}, env, &out, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "sweeprail migrations: 0 pending\n") || !strings.Contains(out.String(), "demo migrations: 17 pending\n") {
			t.Fatalf("status --demo:\n%s", out.String())
		}
		out.Reset()
		if err := run(ctx, []string{"api", "migrate", "up", "--demo"}, env, &out, &out); err != nil {
			t.Fatalf("up --demo: %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "applied demo/00001_schema.sql") || strings.Contains(out.String(), "applied sweeprail/") {
			t.Fatalf("up --demo printed:\n%s", out.String())
		}
		if n := publicTables(t, u); n != 10 { // nine demo tables and goose_db_version
			t.Fatalf("%d tables in public after up --demo, want 10", n)
		}
	})

	t.Run("seed-demo fills every table, once with --if-empty", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			out.Reset()
			if err := run(ctx, []string{"api", "seed-demo", "--rows", "2000", "--if-empty"}, env, &out, &out); err != nil {
				t.Fatalf("seed %d: %v\n%s", i, err, out.String())
			}
		}
		pool, err := dbpool.NewPool(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		for _, table := range []string{"accounts", "email_messages", "outbox_events", "webhook_deliveries",
			"audit_log", "consent_records", "notifications", "refresh_tokens", "idempotency_records"} {
			var n int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Errorf("%s is empty after seed-demo", table)
			}
		}
		var accounts int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM accounts").Scan(&accounts); err != nil {
			t.Fatal(err)
		}
		if accounts != 40 { // max(2000/50, 20), seeded once
			t.Errorf("accounts = %d after seeding twice with --if-empty, want 40", accounts)
		}
	})

	t.Run("seed-demo creates the demo schema when missing", func(t *testing.T) {
		u := dbtest.SweeprailURL(t)
		out.Reset()
		if err := run(ctx, []string{"api", "seed-demo", "--rows", "500"}, map[string]string{"DATABASE_URL": u}, &out, &out); err != nil {
			t.Fatalf("seed-demo: %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "applied demo/00017_") || publicTables(t, u) != 10 {
			t.Fatalf("seed-demo on a database without the demo schema printed:\n%s", out.String())
		}
	})

	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"missing DATABASE_URL", []string{"api", "migrate"}, nil, "DATABASE_URL"},
		{"unknown subcommand", []string{"api", "migrate", "down"}, env, `unknown subcommand "down"`},
		{"unknown flag", []string{"api", "migrate", "up", "--demos"}, env, "flag provided but not defined: -demos"},
		{"extra argument", []string{"api", "migrate", "up", "now"}, env, `unexpected arguments ["now"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(ctx, tc.args, tc.env, &out, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}
