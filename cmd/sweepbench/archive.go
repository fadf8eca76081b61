package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// The archive run (sweepbench archive): what archive_to costs against a plain delete of the same
// rows. Three contestants, each on a fresh copy of the seeded notifications table, swept by the
// engine in-process with every batch at BATCH_SIZE, so that batch durations compare directly:
//
//	delete   the notifications sweep as it ships
//	local    the same pass with archive_to: archive.notifications, a table in the same database
//	         keyed like the swept one
//	foreign  archive_to: a postgres_fdw foreign table over such a table in another database
//	         (sweepbench_cold) of the bench cluster, reached over loopback TCP: postgres_fdw's own
//	         cost without a network's round trips, which a real cold server adds (one per
//	         postgres_fdw batch of inserts, and the remote COMMIT)
//
// No foreground runs: the question is the engine's own cost per row.

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
	// rounds holds, per round, the outcome of each contestant in archiveContestants' order.
	rounds  [][]outcome
	elapsed time.Duration
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
	tpl, eligible, err := b.template(ctx, b.s.rows)
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
	for n := 1; n <= b.s.rounds; n++ {
		var round []outcome
		for _, c := range archiveContestants {
			b.logf("archive round %d: %s", n, c.name)
			o, err := b.measure(ctx, contestant{key: c.key, db: "archive_" + c.key, name: c.name,
				setup: b.archiveSetup(defaults.BatchSize, c.key)}, tpl, false)
			if err != nil {
				return res, fmt.Errorf("archive round %d, %s: %w", n, c.key, err)
			}
			if o.deleted != eligible {
				return res, fmt.Errorf("archive round %d, %s: deleted %d rows, but %d were eligible", n, c.key, o.deleted, eligible)
			}
			b.logf("archive round %d: %s: %d rows in %s (%.0f rows/s), %d batches, p50 %s", n, c.key, o.deleted,
				o.elapsed.Round(time.Millisecond), o.rowsPerSec(), len(o.batches), fmtDuration(percentile(o.batchDurations(), 0.5)))
			round = append(round, o)
		}
		res.rounds = append(res.rounds, round)
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
		var specs []policy.Spec
		for _, s := range policy.Catalog() {
			if s.Name == "notifications" {
				for i := range s.Passes {
					s.Passes[i].ArchiveTo = archive
				}
				specs = append(specs, s)
			}
		}
		engine, cleanup, err := b.engineSetupWith(specs, "notifications", "", fixedBatches(size))(ctx, dbURL)
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

func renderArchive(m machine, s settings, r archiveResult) string {
	var w strings.Builder
	header(&w, "Archive: archive_to against a plain delete", m, s, r.elapsed)
	fmt.Fprintf(&w, "Table: %s notifications rows, %s eligible; each contestant on a fresh copy, swept by the engine in-process with every batch at BATCH_SIZE=%d, "+
		"no foreground; %d rounds, medians. The archive is keyed like the swept table (`PRIMARY KEY (id)`) and adds an `archived_at` default. "+
		"The foreign archive is a postgres_fdw foreign table (batch_size %d) over a table in another database of the same cluster, over loopback TCP: "+
		"postgres_fdw's cost without a network; a cold server elsewhere adds a round trip per postgres_fdw batch and one for the remote COMMIT. "+
		"Archiving batches commit synchronously (a WAL flush each), the plain delete's do not.\n\n",
		fmtCount(int64(r.rows)), fmtCount(r.eligible), r.batchSize, len(r.rounds), r.batchSize)
	w.WriteString("| contestant | time | rows/s | time ÷ delete | batch p50 | batch p99 | longest batch | µs/row p50 | WAL |\n")
	w.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	med := func(i int, f func(o outcome) float64) float64 {
		xs := make([]float64, len(r.rounds))
		for j, rd := range r.rounds {
			xs[j] = f(rd[i])
		}
		return median(xs)
	}
	for i, c := range archiveContestants {
		var ds []time.Duration
		var bs []batch
		for _, rd := range r.rounds {
			ds = append(ds, rd[i].batchDurations()...)
			bs = append(bs, rd[i].batches...)
		}
		ratio := med(i, func(o outcome) float64 { return o.elapsed.Seconds() })
		if d := med(0, func(o outcome) float64 { return o.elapsed.Seconds() }); d > 0 {
			xs := make([]float64, len(r.rounds))
			for j, rd := range r.rounds {
				xs[j] = rd[i].elapsed.Seconds() / rd[0].elapsed.Seconds()
			}
			ratio = median(xs)
		}
		fmt.Fprintf(&w, "| %s: %s | %s | %s | %.2f | %s | %s | %s | %.2f | %.0f MB |\n", c.key, c.name,
			fmtDuration(time.Duration(med(i, func(o outcome) float64 { return float64(o.elapsed) }))),
			fmtRate(med(i, func(o outcome) float64 { return o.rowsPerSec() })), ratio,
			fmtDuration(percentile(ds, 0.5)), fmtDuration(percentile(ds, 0.99)), fmtDuration(maxDuration(ds)),
			perRowMedian(bs), med(i, func(o outcome) float64 { return float64(o.wal) / 1e6 }))
	}
	others := 0.0
	for _, rd := range r.rounds {
		for _, o := range rd {
			others = max(others, o.foreign)
		}
	}
	w.WriteString("\nTime, rows/s, the ratio (taken within each round) and WAL are medians over the rounds; batch percentiles and µs/row pool every batch of every round. " +
		"WAL is cluster-wide: it includes the archive's inserts, local or in the cold database. ")
	fmt.Fprintf(&w, "Other tenants of the machine took up to %.0f%% of it during a contestant (above %.0f%%, the side-by-side run would call a round disturbed).\n\n", 100*others, 100*maxForeign)
	return w.String()
}

func (b *bench) archiveReport(ctx context.Context) (string, error) {
	res, err := b.archiveRun(ctx)
	if err != nil {
		return "", err
	}
	res.elapsed = time.Since(b.began)
	return renderArchive(b.machine, b.s, res), nil
}
