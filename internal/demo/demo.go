// Package demo fills the reference schema with a realistic mix of rows: for every pass of the
// bundled catalog, rows past the retention window (eligible), rows exactly at the cutoff as of the
// seeding, fresh rows, and rows that a keep guard or a status must protect. It is set-based SQL,
// so a million rows take seconds.
package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// aged returns an age-column value for the i-th row of a pass with retention ret: the first five
// rows sit exactly at the cutoff (now() - ret), four in ten of the rest are past it, the others
// are fresh. now() is the transaction's, so "exactly at the cutoff" is exact as of the seeding.
const agedFunc = `
CREATE FUNCTION pg_temp.aged(i bigint, ret interval) RETURNS timestamptz
LANGUAGE sql VOLATILE AS $$
  SELECT CASE
    WHEN i <= 5 THEN now() - ret
    WHEN i % 10 < 4 THEN now() - ret - random() * ret - interval '1 second'
    ELSE now() - random() * (ret - interval '1 minute')
  END
$$`

// statements seed each table; $1 is the number of rows to add to it.
var statements = []struct{ table, sql string }{
	{"accounts", `
INSERT INTO accounts (email, display_name, created_at, deletion_requested_at)
SELECT 'demo-' || gen_random_uuid() || '@example.com', 'Demo user ' || i, now() - interval '400 days',
       CASE WHEN i % 5 = 0 THEN pg_temp.aged(i / 5, interval '30 days') END
FROM generate_series(1, $1::int) i`},
	{"email_messages", `
WITH acc AS (SELECT array_agg(id) ids, count(*) n FROM accounts WHERE deleted_at IS NULL),
rows AS (
  SELECT i, (ARRAY['sent', 'failed', 'queued'])[1 + i % 3] AS status,
         CASE i % 3 WHEN 0 THEN pg_temp.aged(i / 3, interval '7 days')
                    WHEN 1 THEN pg_temp.aged(i / 3, interval '90 days')
                    ELSE now() - interval '200 days' END AS at
  FROM generate_series(1, $1::int) i)
INSERT INTO email_messages (account_id, to_address, subject, body, status, attempts, created_at, sent_at)
SELECT acc.ids[1 + rows.i % acc.n], 'user' || rows.i || '@example.net', 'Your receipt #' || rows.i,
       repeat('Thank you for your order. ', 4), rows.status, 1,
       CASE WHEN rows.status = 'sent' THEN rows.at - interval '1 minute' ELSE rows.at END,
       CASE WHEN rows.status = 'sent' THEN rows.at END
FROM rows, acc`},
	// Nine in ten events are dispatched; every fourth gets a delivery, which the outbox keep
	// guard must protect for as long as the delivery lives.
	{"outbox_events", `
INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, dispatched_at)
SELECT 'order', 'order-' || i, 'order.paid', jsonb_build_object('order', i, 'amount_cents', i * 7 % 100000),
       at - interval '1 second', CASE WHEN i % 10 <> 9 THEN at END
FROM (SELECT i, pg_temp.aged(i, interval '7 days') AS at FROM generate_series(1, $1::int) i) s`},
	{"webhook_deliveries", `
INSERT INTO webhook_deliveries (outbox_event_id, endpoint_url, status, attempts, response_code, created_at, last_attempt_at)
SELECT e.id, 'https://hooks.example.com/orders',
       (ARRAY['success', 'dead_letter', 'pending', 'failed'])[1 + s.i % 4],
       1 + s.i % 5, CASE WHEN s.i % 4 = 0 THEN 200 ELSE 503 END, s.at, s.at
FROM (SELECT id, row_number() OVER (ORDER BY id) AS i FROM outbox_events WHERE id % 4 = 0 ORDER BY id LIMIT $1::int) e0
JOIN outbox_events e ON e.id = e0.id
CROSS JOIN LATERAL (SELECT e0.i AS i, pg_temp.aged(e0.i, interval '30 days') AS at) s`},
	{"audit_log", `
INSERT INTO audit_log (actor_account_id, action, retention_bucket, details, occurred_at)
SELECT gen_random_uuid(), (ARRAY['LOGIN', 'SETTINGS_CHANGED', 'EXPORT_REQUESTED'])[1 + i % 3],
       CASE WHEN i % 2 = 0 THEN 'operational' ELSE 'compliance' END, jsonb_build_object('ip', '192.0.2.' || i % 250),
       CASE WHEN i % 2 = 0 THEN pg_temp.aged(i / 2, interval '90 days') ELSE pg_temp.aged(i / 2, interval '365 days') END
FROM generate_series(1, $1::int) i`},
	// Half the consents belong to erased accounts (user_id NULL) and expire; the others belong to
	// live accounts and are kept however old they are.
	{"consent_records", `
WITH acc AS (SELECT array_agg(id) ids, count(*) n FROM accounts WHERE deleted_at IS NULL)
INSERT INTO consent_records (user_id, purpose, granted, granted_at, expires_at)
SELECT CASE WHEN i % 2 = 1 THEN acc.ids[1 + i % acc.n] END, (ARRAY['marketing', 'analytics'])[1 + i % 2], true,
       now() - interval '3 years',
       CASE WHEN i % 2 = 0 THEN pg_temp.aged(i / 2, interval '365 days') ELSE now() - interval '2 years' END
FROM generate_series(1, $1::int) i, acc`},
	// One in five notifications is unread: kept however old.
	{"notifications", `
WITH acc AS (SELECT array_agg(id) ids, count(*) n FROM accounts WHERE deleted_at IS NULL)
INSERT INTO notifications (account_id, kind, body, created_at, read_at)
SELECT acc.ids[1 + s.i % acc.n], (ARRAY['mention', 'comment', 'invite', 'digest'])[1 + s.i % 4],
       'You have a new ' || (ARRAY['mention', 'comment', 'invite', 'digest'])[1 + s.i % 4],
       s.at - interval '1 hour', CASE WHEN s.i % 5 <> 4 THEN s.at END
FROM (SELECT i, pg_temp.aged(i, interval '30 days') AS at FROM generate_series(1, $1::int) i) s, acc`},
	{"refresh_tokens", `
WITH acc AS (SELECT array_agg(id) ids, count(*) n FROM accounts WHERE deleted_at IS NULL)
INSERT INTO refresh_tokens (account_id, token_hash, created_at, expires_at)
SELECT acc.ids[1 + s.i % acc.n], sha256(convert_to(gen_random_uuid()::text, 'UTF8')), s.at - interval '14 days', s.at
FROM (SELECT i, pg_temp.aged(i, interval '1 day') AS at FROM generate_series(1, $1::int) i) s, acc`},
	// Completed records (half, a tenth of them created long ago but completed just now), abandoned
	// claims (a quarter) and live claims whose lease is still running (a quarter).
	{"idempotency_records", `
WITH acc AS (SELECT array_agg(id) ids, count(*) n FROM accounts WHERE deleted_at IS NULL)
INSERT INTO idempotency_records (account_id, idempotency_key, request_hash, status, created_at, lease_expires_at, completed_at, response_code)
SELECT acc.ids[1 + s.i % acc.n], 'key-' || gen_random_uuid(), sha256(convert_to(s.i::text, 'UTF8')),
       CASE WHEN s.i % 2 = 0 THEN 'completed' ELSE 'in_progress' END,
       CASE WHEN s.i % 20 = 0 THEN now() - interval '10 days' WHEN s.i % 2 = 0 THEN s.at - interval '1 second' ELSE s.at END,
       CASE WHEN s.i % 4 = 3 THEN now() + interval '5 minutes' ELSE s.at + interval '5 minutes' END,
       CASE WHEN s.i % 20 = 0 THEN now() - interval '1 minute' WHEN s.i % 2 = 0 THEN s.at END,
       CASE WHEN s.i % 2 = 0 THEN 201 END
FROM (SELECT i, pg_temp.aged(i / 2, interval '48 hours') AS at FROM generate_series(1, $1::int) i) s, acc`},
}

// Tables returns the tables Seed writes, in the order it writes them.
func Tables() []string {
	out := make([]string, len(statements))
	for i, s := range statements {
		out[i] = s.table
	}
	return out
}

// Seed adds about rows rows across the reference schema in one transaction and reports each table's
// count to w. Running it again adds more rows; it never conflicts with earlier ones.
func Seed(ctx context.Context, pool *pgxpool.Pool, rows int, w io.Writer) error {
	if rows < 100 {
		return fmt.Errorf("seed: rows must be at least 100, got %d", rows)
	}
	accounts := max(rows/50, 20)
	perTable := (rows - accounts) / (len(statements) - 1)
	start := time.Now()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, agedFunc); err != nil {
			return fmt.Errorf("create aged(): %w", err)
		}
		for _, s := range statements {
			n := perTable
			if s.table == "accounts" {
				n = accounts
			}
			tag, err := tx.Exec(ctx, s.sql, n)
			if err != nil {
				return fmt.Errorf("seed %s: %w", s.table, err)
			}
			fmt.Fprintf(w, "seeded %-20s %9d rows\n", s.table, tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Fresh statistics, so the first dry run's estimates and plans are realistic.
	for _, s := range statements {
		if _, err := pool.Exec(ctx, "ANALYZE "+pgx.Identifier{s.table}.Sanitize()); err != nil {
			return fmt.Errorf("analyze %s: %w", s.table, err)
		}
	}
	fmt.Fprintf(w, "seeded in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}
