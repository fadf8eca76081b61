package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// The tables of the paths run beyond today's dense notifications (cluster.go's template): a
// sparse notifications table, River's job table, and the tables of the crossover run. Each is a
// template database migrated as an operator's is (`api migrate up --demo`: the foreground needs
// notifications and accounts in every one), seeded deterministically, then VACUUM ANALYZEd.

// riverSchemaFile is River's job table as its migrations leave it, kept for the adoption tests.
const riverSchemaFile = "cmd/api/testdata/river.sql"

// queueSeedSQL fills river_job rows $2..$3 of $1, as of $4: created over the last 10 days in id
// order (the heap in age order, as a queue's is), each finalized within 30 seconds of creation.
// The last 5 minutes are still in flight (available, running, scheduled); of the rest 2% were
// cancelled, 3% discarded, 2% wait to be retried, and 93% completed. The jobs created between 26
// and 22 hours before are all still scheduled: no job crosses the 24-hour cutoff while the bench
// runs, so every contestant's eligible rows are the same.
const queueSeedSQL = `
INSERT INTO river_job (state, attempt, attempted_at, created_at, finalized_at, scheduled_at, args, kind, queue, attempted_by)
SELECT s.state, 1, c.at, c.at,
       CASE WHEN s.state IN ('completed', 'cancelled', 'discarded') THEN c.at + ((i * 40503) % 30) * interval '1 second' END,
       c.at, jsonb_build_object('user_id', i * 7919 % 100000, 'template', 'welcome', 'locale', 'en'),
       (ARRAY['email.send', 'webhook.deliver', 'report.build'])[1 + (i % 3)::int], 'default', ARRAY['worker-' || (i % 8)]
FROM generate_series($2::bigint, $3::bigint) i
CROSS JOIN LATERAL (SELECT $4::timestamptz - interval '10 days' + (i::float8 / $1::bigint) * interval '10 days' AS at) c
CROSS JOIN LATERAL (SELECT CASE
         WHEN c.at > $4::timestamptz - interval '5 minutes' THEN (ARRAY['available', 'running', 'scheduled'])[1 + (i % 3)::int]::river_job_state
         WHEN c.at BETWEEN $4::timestamptz - interval '26 hours' AND $4::timestamptz - interval '22 hours' THEN 'scheduled'::river_job_state
         WHEN (i * 2654435761) % 100 < 2 THEN 'cancelled'::river_job_state
         WHEN (i * 2654435761) % 100 < 5 THEN 'discarded'::river_job_state
         WHEN (i * 2654435761) % 100 < 7 THEN 'retryable'::river_job_state
         ELSE 'completed'::river_job_state END AS state) s`

// The queue's sweep: River's completed jobs after 24 hours, as docs/POLICY.md's river.yaml says.
const (
	queueSweep  = "river-jobs"
	queuePolicy = `sweeps:
  - name: river-jobs
    passes:
      - name: completed
        table: river_job
        age_column: finalized_at
        where: t.state = 'completed'
        retention: 24h
`
	queueEligibleSQL   = `SELECT count(*) FROM river_job WHERE state = 'completed' AND finalized_at < now() - interval '24 hours'`
	queueMonolithicSQL = `DELETE FROM river_job WHERE state = 'completed' AND finalized_at < now() - interval '24 hours'`
	queueBoundSQL      = `DELETE FROM river_job WHERE state = 'completed' AND finalized_at < $1`
	queueCutoffSQL     = `SELECT now() - interval '24 hours'`
)

// newTemplate creates database name, migrated (sweeprail's and the demo schema) with the 1,000
// accounts the foreground picks from, and returns a connection to it and the reference time of
// the seed (the database's now()).
func (b *bench) newTemplate(ctx context.Context, name string) (*pgx.Conn, time.Time, error) {
	if err := b.drop(ctx, name); err != nil {
		return nil, time.Time{}, err
	}
	if _, err := b.admin.Exec(ctx, "CREATE DATABASE "+quoteIdent(name)); err != nil {
		return nil, time.Time{}, fmt.Errorf("create %s: %w", name, err)
	}
	u := b.dbURL(name)
	mig := exec.CommandContext(ctx, filepath.Join(b.s.binDir, "api"), "migrate", "up", "--demo")
	mig.Env = []string{"DATABASE_URL=" + u}
	if out, err := mig.CombinedOutput(); err != nil {
		return nil, time.Time{}, fmt.Errorf("api migrate up: %w\n%s", err, out)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return nil, time.Time{}, err
	}
	if _, err := conn.Exec(ctx, `INSERT INTO accounts (email, display_name)
		SELECT 'bench-' || a || '@example.com', 'Bench user ' || a FROM generate_series(1, 1000) a`); err != nil {
		conn.Close(ctx)
		return nil, time.Time{}, fmt.Errorf("seed accounts: %w", err)
	}
	var asOf time.Time
	if err := conn.QueryRow(ctx, "SELECT now()").Scan(&asOf); err != nil {
		conn.Close(ctx)
		return nil, time.Time{}, err
	}
	return conn, asOf, nil
}

// seedChunks runs seed for rows 1..rows in chunks of seedChunk, as (rows, lo, hi, asOf, extra...).
func (b *bench) seedChunks(ctx context.Context, conn *pgx.Conn, what, seed string, rows int, asOf time.Time, extra ...any) error {
	for lo := 1; lo <= rows; lo += seedChunk {
		hi := min(lo+seedChunk-1, rows)
		b.logf("seeding %s: rows %d..%d of %d", what, lo, hi, rows)
		if _, err := conn.Exec(ctx, seed, append([]any{rows, lo, hi, asOf}, extra...)...); err != nil {
			return fmt.Errorf("seed %s: %w", what, err)
		}
	}
	return nil
}

// finishTemplate vacuums and analyzes the template's tables and counts the eligible rows.
func (b *bench) finishTemplate(ctx context.Context, conn *pgx.Conn, name, tables, eligibleSQL string, rows int) (int64, error) {
	b.logf("vacuum analyze %s", name)
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+tables); err != nil {
		return 0, fmt.Errorf("vacuum analyze: %w", err)
	}
	var eligible int64
	if err := conn.QueryRow(ctx, eligibleSQL).Scan(&eligible); err != nil {
		return 0, fmt.Errorf("count eligible: %w", err)
	}
	b.logf("%s: %d rows, %d eligible (%.1f%%)", name, rows, eligible, 100*float64(eligible)/float64(rows))
	return eligible, nil
}

// sparseTemplate is notifications with 1% of rows eligible, scattered.
func (b *bench) sparseTemplate(ctx context.Context, rows int) (string, int64, error) {
	name := fmt.Sprintf("sweepbench_sparse_%d", rows)
	conn, asOf, err := b.newTemplate(ctx, name)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := b.seedChunks(ctx, conn, name, seedSQL, rows, asOf, sparseRead, sparseOf); err != nil {
		return "", 0, err
	}
	eligible, err := b.finishTemplate(ctx, conn, name, "accounts, notifications", eligibleSQL, rows)
	return name, eligible, err
}

// queueTemplate is River's river_job with a backlog of completed jobs.
func (b *bench) queueTemplate(ctx context.Context, rows int) (string, int64, error) {
	ddl, err := os.ReadFile(riverSchemaFile)
	if err != nil {
		return "", 0, fmt.Errorf("read River's schema: %w (run the bench from the repository's root)", err)
	}
	name := fmt.Sprintf("sweepbench_queue_%d", rows)
	conn, asOf, err := b.newTemplate(ctx, name)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, string(ddl)); err != nil {
		return "", 0, fmt.Errorf("create river_job: %w", err)
	}
	if err := b.seedChunks(ctx, conn, name, queueSeedSQL, rows, asOf); err != nil {
		return "", 0, err
	}
	eligible, err := b.finishTemplate(ctx, conn, name, "accounts, notifications, river_job", queueEligibleSQL, rows)
	return name, eligible, err
}
