package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
)

func TestMigrate(t *testing.T) {
	u := dbtest.EmptyURL(t)
	env := map[string]string{"DATABASE_URL": u}
	ctx := context.Background()

	var out bytes.Buffer
	if err := run(ctx, []string{"api", "migrate", "status"}, env, &out, &out); err != nil {
		t.Fatalf("status before: %v", err)
	}
	if !strings.Contains(out.String(), "pending") || strings.Contains(out.String(), "0 pending") {
		t.Fatalf("status of an empty database shows nothing pending:\n%s", out.String())
	}

	t.Run("up applies all", func(t *testing.T) {
		out.Reset()
		if err := run(ctx, []string{"api", "migrate", "up"}, env, &out, &out); err != nil {
			t.Fatalf("up: %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "applied 00001_schema.sql") {
			t.Fatalf("up printed no applied schema:\n%s", out.String())
		}
		out.Reset()
		if err := run(ctx, []string{"api", "migrate", "status"}, env, &out, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(strings.TrimSpace(out.String()), "migrations: 0 pending") {
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

	t.Run("seed-demo fills every table, once with --if-empty", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			out.Reset()
			if err := run(ctx, []string{"api", "seed-demo", "--rows", "2000", "--if-empty"}, env, &out, &out); err != nil {
				t.Fatalf("seed %d: %v\n%s", i, err, out.String())
			}
		}
		pool, err := pgxpool.New(ctx, u)
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

	t.Run("missing DATABASE_URL", func(t *testing.T) {
		err := run(ctx, []string{"api", "migrate"}, nil, &out, &out)
		if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") {
			t.Fatalf("err = %v, want one naming DATABASE_URL", err)
		}
	})
}
