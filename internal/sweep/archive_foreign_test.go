package sweep_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// coldArchiveTable is the archive on the cold server, keyed like the swept table so that a second
// copy of a row is refused rather than kept.
const coldArchiveTable = `CREATE TABLE audit_log_archive (
    id               bigint PRIMARY KEY,
    actor_account_id uuid,
    action           text NOT NULL,
    retention_bucket text NOT NULL,
    details          jsonb NOT NULL,
    occurred_at      timestamptz NOT NULL,
    archived_at      timestamptz NOT NULL DEFAULT now()
)`

// foreignArchive is the foreign table over it in the swept database, as docs/POLICY.md's worked
// example makes it. A postgres_fdw insert sends every column of the foreign table, so the
// archived_at default must be the foreign table's too, or NULL would be sent.
const foreignArchive = `CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CREATE SERVER cold FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '%d', dbname 'cold', batch_size '100');
CREATE USER MAPPING FOR CURRENT_USER SERVER cold OPTIONS (user 'postgres');
CREATE SCHEMA cold;
IMPORT FOREIGN SCHEMA public LIMIT TO (audit_log_archive) FROM SERVER cold INTO cold;
ALTER FOREIGN TABLE cold.audit_log_archive ALTER COLUMN archived_at SET DEFAULT now()`

const coldArchiveName = "cold.audit_log_archive"

// coldSetup starts a cold server holding the archive and makes it pool's foreign table
// cold.audit_log_archive. It returns the server and its archive database's URL.
func coldSetup(t *testing.T, pool *pgxpool.Pool) (*dbtest.ColdServer, string) {
	t.Helper()
	cold := dbtest.StartColdServer(t)
	coldURL := cold.Database(t, "cold")
	c := dbtest.Conn(t, coldURL)
	if _, err := c.Exec(ctx, coldArchiveTable); err != nil {
		t.Fatal(err)
	}
	exec(t, pool, fmt.Sprintf(foreignArchive, cold.Port))
	return cold, coldURL
}

// freshPool opens a pool of its own on u, closed at cleanup: after a cold server's restart, a
// look at it needs connections of its own.
func freshPool(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	p, err := dbpool.NewPool(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestArchiveForeign archives to a postgres_fdw foreign table on a second server, and stops that
// server between batches and in the middle of one.
func TestArchiveForeign(t *testing.T) {
	t.Parallel()
	spec := auditArchiveSpec(policy.ModeBatched, coldArchiveName)
	yaml := policyYAML(passYAML("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: "+coldArchiveName))

	t.Run("moves exactly the eligible rows to the cold server", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		_, coldURL := coldSetup(t, pool)
		if warnings, err := checkYAML(t, pool, yaml); err != nil || len(warnings) > 0 {
			t.Fatalf("policy check: %v, warnings %v", err, warnings)
		}
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 250, 20)
		o := newAuditOracle(t, pool, at)
		res := run(t, archiveRunner(t, pool, spec, at, 100, nil), "audit-archive")
		if res.StopReason != wire.StopExhausted || res.Deleted != 250 || res.Archived != 250 || res.BatchCount != 3 {
			t.Fatalf("got %s, deleted %d, archived %d in %d batches, error %+v; want exhausted, 250, 250 in 3", res.StopReason, res.Deleted, res.Archived, res.BatchCount, res.Error)
		}
		cp := freshPool(t, coldURL)
		o.check(t, pool, cp, "audit_log_archive", true)
		if n := count(t, cp, `SELECT count(*) FROM audit_log_archive WHERE archived_at > now() - interval '1 hour'`); n != 250 {
			t.Errorf("%d rows with a fresh archived_at, want 250", n)
		}
	})

	// What a remote commit that went through while the local one did not leaves behind (statement/archive.go):
	// the archive holds a row that is still in the swept table. The archive's key refuses the
	// second copy, and the batch heals: the copy is identical, so the row is deleted and counted
	// as recovered, and the sweep goes on with no manual step.
	t.Run("a row already in the cold archive heals", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		_, coldURL := coldSetup(t, pool)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 150, 10)
		o := newAuditOracle(t, pool, at)
		var first int64
		if err := pool.QueryRow(ctx, `SELECT id FROM audit_log WHERE retention_bucket = 'operational' ORDER BY occurred_at, id LIMIT 1`).Scan(&first); err != nil {
			t.Fatal(err)
		}
		exec(t, pool, `INSERT INTO cold.audit_log_archive (id, actor_account_id, action, retention_bucket, details, occurred_at)
			SELECT id, actor_account_id, action, retention_bucket, details, occurred_at FROM audit_log WHERE id = $1`, first)
		res := run(t, archiveRunner(t, pool, spec, at, 100, nil), "audit-archive")
		if res.StopReason != wire.StopExhausted || res.Error != nil || res.Archived != 149 || res.Passes[0].Recovered != 1 {
			t.Fatalf("got %s, archived %d, recovered %d, error %+v; want exhausted, 149 archived, 1 recovered", res.StopReason, res.Archived, res.Passes[0].Recovered, res.Error)
		}
		o.check(t, pool, freshPool(t, coldURL), "audit_log_archive", true)
	})

	t.Run("the cold server stopped between batches", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		cold, coldURL := coldSetup(t, pool)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 450, 10)
		o := newAuditOracle(t, pool, at)
		r := archiveRunner(t, pool, spec, at, 100, func(batches int) {
			if batches == 2 {
				cold.Stop(t)
			}
		})
		res := run(t, r, "audit-archive")
		if res.StopReason != wire.StopBatchError || res.Error == nil || !strings.HasPrefix(res.Error.Code, "08") || res.Deleted != firstBatchesOf450 || res.Archived != firstBatchesOf450 || res.BatchCount != 3 {
			t.Fatalf("got %s, deleted %d, archived %d in %d batches, error %+v; want batch-error 08… in the third batch, after %d",
				res.StopReason, res.Deleted, res.Archived, res.BatchCount, res.Error, firstBatchesOf450)
		}
		t.Logf("the batch after the stop failed with %+v", res.Error)
		// Down at the start of a run: its first batch fails, moving nothing.
		res = run(t, archiveRunner(t, pool, spec, at, 100, nil), "audit-archive")
		if res.StopReason != wire.StopBatchError || res.Deleted != 0 || res.Archived != 0 {
			t.Fatalf("while down: %s, deleted %d; want batch-error, nothing", res.StopReason, res.Deleted)
		}
		// The policy check warns, and does not refuse: the API boots while its cold storage is down.
		warnings, err := checkYAML(t, pool, yaml)
		if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], `the server of foreign archive "cold.audit_log_archive" could not be reached`) {
			t.Errorf("policy check while down: %v, warnings %q; want one warning", err, warnings)
		}
		if n := count(t, pool, `SELECT count(*) FROM audit_log`); n != int64(len(o.rows)-firstBatchesOf450) {
			t.Errorf("audit_log holds %d rows, want all but the %d archived", n, firstBatchesOf450)
		}
		cold.Start(t)
		o.check(t, pool, freshPool(t, coldURL), "audit_log_archive", false)
		res = run(t, archiveRunner(t, pool, spec, at, 100, nil), "audit-archive")
		if res.StopReason != wire.StopExhausted || res.Archived != restOf450 {
			t.Fatalf("after the restart: %s, archived %d, error %+v; want exhausted, the remaining %d", res.StopReason, res.Archived, res.Error, restOf450)
		}
		o.check(t, pool, freshPool(t, coldURL), "audit_log_archive", true)
	})

	// The cold server dies while a batch's rows are on their way: the remote insert waits on a
	// lock another session holds there, and the server is stopped under it.
	t.Run("the cold server killed in the middle of a batch", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		cold, coldURL := coldSetup(t, pool)
		at := dbNow(t, pool)
		seedAudit(t, pool, at, 250, 10)
		o := newAuditOracle(t, pool, at)
		blocker := dbtest.Conn(t, coldURL)
		r := archiveRunner(t, pool, spec, at, 100, func(batches int) {
			if batches == 1 {
				for _, q := range []string{"BEGIN", "LOCK TABLE audit_log_archive IN SHARE MODE"} {
					if _, err := blocker.Exec(ctx, q); err != nil {
						t.Error(err)
					}
				}
			}
		})
		done := make(chan *wire.Result, 1)
		go func() {
			res, err := r.Run(ctx, "audit-archive", sweep.Options{})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		waitBlocked(t, freshPool(t, coldURL), "INSERT INTO public.audit_log_archive")
		cold.Stop(t)
		res := <-done
		if res == nil || res.StopReason != wire.StopBatchError || res.Deleted != firstBatchOf250 || res.Archived != firstBatchOf250 || res.BatchCount != 2 {
			t.Fatalf("got %+v; want batch-error in the second batch, after %d", res, firstBatchOf250)
		}
		t.Logf("the batch under the stop failed with %+v", res.Error)
		cold.Start(t)
		if n := o.check(t, pool, freshPool(t, coldURL), "audit_log_archive", false); n != firstBatchOf250 {
			t.Errorf("cold archive holds %d rows, want the first batch's %d", n, firstBatchOf250)
		}
		res = run(t, archiveRunner(t, pool, spec, at, 100, nil), "audit-archive")
		if res.StopReason != wire.StopExhausted || res.Archived != restOf250 {
			t.Fatalf("after the restart: %s, archived %d, error %+v; want exhausted, the remaining %d", res.StopReason, res.Archived, res.Error, restOf250)
		}
		o.check(t, pool, freshPool(t, coldURL), "audit_log_archive", true)
	})
}

// sqlTrace records the statements a pool sends.
type sqlTrace struct {
	mu  sync.Mutex
	sql []string
}

func (s *sqlTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql = append(s.sql, data.SQL)
	return ctx
}

func (s *sqlTrace) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// tracedPool opens a pool on u whose statements sent on their own trace records; those of a
// pipelined batch it does not see (sqlTrace is no BatchTracer).
func tracedPool(t *testing.T, u string) (*pgxpool.Pool, *sqlTrace) {
	t.Helper()
	trace := &sqlTrace{}
	return poolTracedBy(t, u, trace), trace
}

// poolTracedBy opens a pool on u, as the API does (dbpool), whose connections report to tracer.
func poolTracedBy(t *testing.T, u string, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := dbpool.ParseConfig(u, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestArchivePolicyDoc keeps docs/POLICY.md's worked example of archive_to true: its SQL, run on
// a cold server and the swept database (with the cold server's address, and the API's role
// being the test's), makes an archive the check accepts without a warning; its policy moves the
// rows; and the statement it shows is the one a batch sends.
func TestArchivePolicyDoc(t *testing.T) {
	t.Parallel()
	blocks := policyDoc(t, "Archiving before delete")
	var langs []string
	for _, b := range blocks {
		langs = append(langs, b.lang)
	}
	if !slices.Equal(langs, []string{"sql", "sql", "yaml", "sql"}) {
		t.Fatalf("blocks %v, want the cold side's sql, the hot side's sql, the policy and the statement", langs)
	}
	coldSQL, hotSQL, yaml, statement := blocks[0].text, blocks[1].text, blocks[2].text, blocks[3].text

	u := dbtest.URL(t)
	cold := dbtest.StartColdServer(t)
	coldURL := cold.Database(t, "cold")
	if _, err := dbtest.Conn(t, coldURL).Exec(ctx, coldSQL); err != nil {
		t.Fatalf("the cold side's SQL: %v", err)
	}
	admin := freshPool(t, u)
	exec(t, admin, strings.NewReplacer(
		"host 'cold.internal'", fmt.Sprintf("host '127.0.0.1', port '%d'", cold.Port),
		"FOR sweeprail", "FOR CURRENT_USER",
		"TO sweeprail", "TO CURRENT_USER",
	).Replace(hotSQL))

	if warnings, err := checkYAML(t, admin, yaml); err != nil || len(warnings) > 0 {
		t.Fatalf("the check: %v, warnings %q", err, warnings)
	}
	pol, err := policy.Load("p.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	pool, trace := tracedPool(t, u)
	at := dbNow(t, pool)
	seedAudit(t, pool, at, 40, 5)
	o := newAuditOracle(t, pool, at)
	// Batches of 10 of the 40 rows: the first batches are ranges of ages with an end, as the
	// docs show, the last is the last range.
	r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: fixed(settings(), 10), AsOf: fixedAsOf(at)})
	res := run(t, r, "audit-log")
	if res.StopReason != wire.StopExhausted || res.Passes[0].Archived != 40 || res.Passes[1].Archived != 0 {
		t.Fatalf("answer %+v (error %+v); want exhausted, 40 archived by operational, none by compliance", res, res.Error)
	}
	o.check(t, pool, freshPool(t, coldURL), "audit_log_archive", true)

	words := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	trace.mu.Lock()
	defer trace.mu.Unlock()
	for _, q := range trace.sql {
		if words(q) == words(statement) {
			return
		}
	}
	t.Errorf("no batch sent the statement the docs show:\n%s\nsent:\n%s", statement, strings.Join(trace.sql, "\n---\n"))
}
