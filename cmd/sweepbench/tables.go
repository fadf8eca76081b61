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

// The runs' tables: the dense notifications table, a sparse one, River's job table and the
// crossover run's. Each is a template database migrated as an operator's is (`api migrate up
// --demo`: the foreground needs notifications and accounts in every one), seeded
// deterministically, then VACUUM ANALYZEd; every contestant gets a copy of it.

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

// tableSpec is a template the runs copy: its table's DDL (beyond the migrations), its seed, its
// indexes, and how its eligible rows are counted.
type tableSpec struct {
	name      string
	ddl       func() (string, error)
	seed      string
	seedArgs  []any
	post      string
	tables    string
	eligibles string
}

// The templates.
var (
	// dense is today's notifications: 80% eligible, the heap in age order.
	dense = tableSpec{name: "tpl", seed: seedSQL, seedArgs: []any{denseRead, denseOf}, tables: "accounts, notifications", eligibles: eligibleSQL}
	// sparse is notifications with 1% of rows eligible, scattered.
	sparse = tableSpec{name: "sparse", seed: seedSQL, seedArgs: []any{sparseRead, sparseOf}, tables: "accounts, notifications", eligibles: eligibleSQL}
	// queue is River's river_job with a backlog of completed jobs.
	queue = tableSpec{name: "queue", ddl: func() (string, error) {
		ddl, err := os.ReadFile(riverSchemaFile)
		if err != nil {
			return "", fmt.Errorf("read River's schema: %w (run the bench from the repository's root)", err)
		}
		return string(ddl), nil
	}, seed: queueSeedSQL, tables: "accounts, notifications, river_job", eligibles: queueEligibleSQL}
)

// createMigrated creates database name, migrated by `api migrate up` with flags, and connects.
func (b *bench) createMigrated(ctx context.Context, name string, flags ...string) (*pgx.Conn, error) {
	if err := b.drop(ctx, name); err != nil {
		return nil, err
	}
	if _, err := b.admin.Exec(ctx, "CREATE DATABASE "+quoteIdent(name)); err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	if err := b.migrate(ctx, name, flags...); err != nil {
		return nil, err
	}
	return pgx.Connect(ctx, b.dbURL(name))
}

// migrate runs `api migrate up` with flags on database name.
func (b *bench) migrate(ctx context.Context, name string, flags ...string) error {
	mig := exec.CommandContext(ctx, filepath.Join(b.s.binDir, "api"), append([]string{"migrate", "up"}, flags...)...)
	mig.Env = []string{"DATABASE_URL=" + b.dbURL(name)}
	if out, err := mig.CombinedOutput(); err != nil {
		return fmt.Errorf("api migrate up: %w\n%s", err, out)
	}
	return nil
}

// keptTemplate is template, reusing the template a run with -keep-template left, migrated up
// to this build: seeding the frontier's 26M rows takes minutes of every run.
func (b *bench) keptTemplate(ctx context.Context, t tableSpec, rows int) (string, int64, error) {
	name := templateName(t, rows)
	var kept bool
	if err := b.admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&kept); err != nil {
		return "", 0, fmt.Errorf("look for a kept %s: %w", name, err)
	}
	if !kept {
		return b.template(ctx, t, rows)
	}
	if err := b.migrate(ctx, name, "--demo"); err != nil {
		return "", 0, err
	}
	conn, err := pgx.Connect(ctx, b.dbURL(name))
	if err != nil {
		return "", 0, err
	}
	// The template must have no session when it is copied.
	defer conn.Close(context.WithoutCancel(ctx))
	var eligible int64
	if err := conn.QueryRow(ctx, t.eligibles).Scan(&eligible); err != nil {
		return "", 0, fmt.Errorf("count eligible: %w", err)
	}
	b.logf("%s: kept by a run before, %d eligible", name, eligible)
	return name, eligible, nil
}

// templateName names the template of t with rows rows.
func templateName(t tableSpec, rows int) string { return fmt.Sprintf("sweepbench_%s_%d", t.name, rows) }

// template builds the seeded, migrated, vacuumed template of t with rows rows, named after its
// size, and returns its name and how many rows are eligible.
func (b *bench) template(ctx context.Context, t tableSpec, rows int) (string, int64, error) {
	name := templateName(t, rows)
	conn, err := b.createMigrated(ctx, name, "--demo")
	if err != nil {
		return "", 0, err
	}
	// The template must have no session when it is copied.
	defer conn.Close(context.WithoutCancel(ctx))
	// The 1,000 accounts the foreground picks from, and the reference time of the seed.
	var asOf time.Time
	steps := []string{`INSERT INTO accounts (email, display_name)
		SELECT 'bench-' || a || '@example.com', 'Bench user ' || a FROM generate_series(1, 1000) a`}
	if t.ddl != nil {
		ddl, err := t.ddl()
		if err != nil {
			return "", 0, err
		}
		steps = append(steps, ddl)
	}
	for _, sql := range steps {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return "", 0, fmt.Errorf("%s: %s: %w", name, firstLine(sql), err)
		}
	}
	if err := conn.QueryRow(ctx, "SELECT now()").Scan(&asOf); err != nil {
		return "", 0, err
	}
	// One INSERT per seedChunk rows, so that progress shows and no statement holds 5M rows' locks.
	for lo := 1; lo <= rows; lo += seedChunk {
		hi := min(lo+seedChunk-1, rows)
		b.logf("seeding %s: rows %d..%d of %d", name, lo, hi, rows)
		if _, err := conn.Exec(ctx, t.seed, append([]any{rows, lo, hi, asOf}, t.seedArgs...)...); err != nil {
			return "", 0, fmt.Errorf("seed %s: %w", name, err)
		}
	}
	b.logf("vacuum analyze %s", name)
	for _, sql := range []string{t.post, "VACUUM ANALYZE " + t.tables} {
		if sql == "" {
			continue
		}
		if _, err := conn.Exec(ctx, sql); err != nil {
			return "", 0, fmt.Errorf("%s: %s: %w", name, firstLine(sql), err)
		}
	}
	var eligible int64
	if err := conn.QueryRow(ctx, t.eligibles).Scan(&eligible); err != nil {
		return "", 0, fmt.Errorf("count eligible: %w", err)
	}
	b.logf("%s: %d rows, %d eligible (%.1f%%)", name, rows, eligible, 100*float64(eligible)/float64(rows))
	return name, eligible, nil
}
