package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// The archive run (sweepbench archive): what archive_to costs per row against a plain delete, on
// fresh copies of the seeded notifications table, in-process at fixed batches, no foreground:
//
//	delete   the notifications sweep as it ships
//	local    archive_to a keyed table in the same database
//	foreign  archive_to a postgres_fdw table in sweepbench_cold, over loopback (no network trips)

// archiveColdDB is the database that plays the cold server.
const archiveColdDB = "sweepbench_cold"

// archiveTableSQL makes an archive table with notifications' columns, keyed like it (a second copy
// of a row is refused: docs/POLICY.md), and an archived_at of its own. Written out rather than
// LIKE notifications: the cold database has no notifications table.
const archiveTableSQL = `CREATE TABLE %s (
    id          bigint PRIMARY KEY,
    account_id  uuid NOT NULL,
    kind        text NOT NULL,
    body        text NOT NULL,
    created_at  timestamptz NOT NULL,
    read_at     timestamptz,
    archived_at timestamptz NOT NULL DEFAULT now()
)`

type archiveResult struct {
	rows      int
	eligible  int64
	batchSize int
	rounds    rounds
}

// archiveContestants are the keys and names of the archive run's contestants, in order.
var archiveContestants = []struct{ key, name string }{
	{"delete", "plain delete (the notifications sweep)"},
	{"local", "archive_to a table in the same database"},
	{"foreign", "archive_to a postgres_fdw foreign table (another database, loopback)"},
}

func (b *bench) archiveRun(ctx context.Context) (archiveResult, error) {
	defaults, err := apiDefaults()
	if err != nil {
		return archiveResult{}, err
	}
	res := archiveResult{rows: b.s.rows, batchSize: defaults.BatchSize}
	tpl, eligible, err := b.template(ctx, dense, b.s.rows)
	if err != nil {
		return res, err
	}
	res.eligible = eligible
	if err := b.drop(ctx, archiveColdDB); err != nil {
		return res, err
	}
	if _, err := b.admin.Exec(ctx, "CREATE DATABASE "+quoteIdent(archiveColdDB)); err != nil {
		return res, fmt.Errorf("create %s: %w", archiveColdDB, err)
	}
	defer b.drop(context.WithoutCancel(ctx), archiveColdDB) //nolint:errcheck // best effort; the next run drops it too
	var cs []contestant
	for _, c := range archiveContestants {
		cs = append(cs, contestant{key: c.key, db: "archive_" + c.key, name: c.name, setup: b.archiveSetup(defaults.BatchSize, c.key)})
	}
	for n := 1; n <= b.s.rounds; n++ {
		rd := round{n: n}
		if err := b.play(ctx, fmt.Sprintf("archive round %d", n), &rd, cs, tpl, probe{}, eligible); err != nil {
			return res, err
		}
		res.rounds = append(res.rounds, rd)
	}
	return res, b.drop(ctx, tpl)
}

// archiveSetup prepares one contestant's copy: the archive table (local or on the cold database,
// with the foreign table over it), and the engine with every batch at size rows. Its sweep then
// checks that the archive holds exactly the rows deleted, and that the answers said so.
func (b *bench) archiveSetup(size int, key string) setupFunc {
	return func(ctx context.Context, dbURL string) (sweepFunc, func(), error) {
		pool, err := pgxpool.New(ctx, dbURL)
		if err != nil {
			return nil, nil, err
		}
		var archive string
		switch key {
		case "local":
			archive = "archive.notifications"
			_, err = pool.Exec(ctx, "CREATE SCHEMA archive; "+fmt.Sprintf(archiveTableSQL, archive))
		case "foreign":
			archive = "cold.notifications_archive"
			err = b.coldArchive(ctx, pool, size)
		}
		if err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("make the archive: %w", err)
		}
		spec := catalogSpec("notifications")
		for i := range spec.Passes {
			spec.Passes[i].ArchiveTo = archive
		}
		engine, cleanup, err := b.engineSetup([]policy.Spec{spec}, "", fixedBatches(size))(ctx, dbURL)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		run := func(ctx context.Context) (outcome, error) {
			o, err := engine(ctx)
			if err != nil || archive == "" {
				return o, err
			}
			var n int64
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+archive).Scan(&n); err != nil {
				return o, fmt.Errorf("count the archive: %w", err)
			}
			if n != o.deleted || o.archived != o.deleted {
				return o, fmt.Errorf("deleted %d rows, answered %d archived, and the archive holds %d", o.deleted, o.archived, n)
			}
			return o, nil
		}
		return run, func() { cleanup(); pool.Close() }, nil
	}
}

// coldArchive makes a fresh archive table on the cold database and, in the contestant's, the
// foreign table over it: postgres_fdw inserting in batches of one engine batch.
func (b *bench) coldArchive(ctx context.Context, pool *pgxpool.Pool, size int) error {
	cold, err := pgx.Connect(ctx, b.dbURL(archiveColdDB))
	if err != nil {
		return err
	}
	defer cold.Close(context.WithoutCancel(ctx))
	if _, err := cold.Exec(ctx, "DROP TABLE IF EXISTS notifications_archive; "+fmt.Sprintf(archiveTableSQL, "notifications_archive")); err != nil {
		return err
	}
	host, port := b.base.Hostname(), b.base.Port()
	if port == "" {
		port = "5432"
	}
	user := b.base.User.Username()
	_, err = pool.Exec(ctx, fmt.Sprintf(`CREATE EXTENSION postgres_fdw;
CREATE SERVER cold FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host %s, port %s, dbname %s, batch_size '%d');
CREATE USER MAPPING FOR CURRENT_USER SERVER cold OPTIONS (user %s);
CREATE SCHEMA cold;
IMPORT FOREIGN SCHEMA public LIMIT TO (notifications_archive) FROM SERVER cold INTO cold;
ALTER FOREIGN TABLE cold.notifications_archive ALTER COLUMN archived_at SET DEFAULT now()`,
		quoteLiteral(host), quoteLiteral(port), quoteLiteral(archiveColdDB), size, quoteLiteral(user)))
	return err
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func (b *bench) renderArchive(r archiveResult) string {
	var w strings.Builder
	b.header(&w, "Archive: archive_to against a plain delete")
	fmt.Fprintf(&w, "Table: %s notifications rows, %s eligible; every batch at BATCH_SIZE=%d, postgres_fdw's batch_size %d; %d rounds, medians.\n\n",
		fmtCount(int64(r.rows)), fmtCount(r.eligible), r.batchSize, r.batchSize, len(r.rounds))
	// Every round counts: the run says how busy the machine was instead.
	as := acrossAll(r.rounds)
	pooled := func(x across) []batch {
		var bs []batch
		for _, o := range x.rounds {
			bs = append(bs, o.batches...)
		}
		return bs
	}
	contestantTable(&w, as, []column{{"contestant", func(x across) string { return x.key + ": " + x.name }}, colTime, colRate,
		{"time ÷ delete>", func(x across) string {
			return fmt.Sprintf("%.2f", x.vs(as[0], func(o outcome) float64 { return o.elapsed.Seconds() }))
		}},
		{"batch p50>", func(x across) string { return fmtDuration(percentile(x.batches(), 0.5)) }}, colP99, {"longest batch>", colLongest.cell},
		{"µs/row p50>", func(x across) string { return fmt.Sprintf("%.2f", perRowMedian(pooled(x))) }}, colWAL})
	others := 0.0
	for _, rd := range r.rounds {
		others = max(others, rd.maxForeign())
	}
	fmt.Fprintf(&w, "Other tenants of the machine took up to %.0f%% of it during a contestant (above %.0f%%, the side-by-side run would call a round disturbed).\n",
		100*others, 100*maxForeign)
	return w.String()
}
