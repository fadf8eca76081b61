package reliability

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// archivePolicy sweeps audit_log's operational rows after 90 days into a postgres_fdw foreign
// table on a second server (docs/POLICY.md's worked example).
const archivePolicy = `sweeps:
  - name: audit-archive
    passes:
      - name: operational
        table: audit_log
        age_column: occurred_at
        where: t.retention_bucket = 'operational'
        retention: 90d
        archive_to: cold.audit_log_archive
`

// TestKillMidArchive: kill -9 of the api in the middle of a sweep that moves its rows to a cold
// server. Every row is in exactly one of audit_log and the cold archive, unchanged, after the
// kill and after the next process finishes; the archive holds whole batches, and in the end
// exactly the eligible rows.
func TestKillMidArchive(t *testing.T) {
	t.Parallel()
	const (
		eligible = 3000
		fresh    = 500
		batch    = 100
		deadline = 2 * time.Second // lease TTL 4s
	)
	u := dbtest.URL(t)
	pool := openPool(t, u)
	cold := dbtest.StartColdServer(t)
	coldURL := cold.Database(t, "cold")
	coldPool := openPool(t, coldURL)
	exec1(t, coldPool, `CREATE TABLE audit_log_archive (id bigint PRIMARY KEY, actor_account_id uuid, action text NOT NULL,
  retention_bucket text NOT NULL, details jsonb NOT NULL, occurred_at timestamptz NOT NULL, archived_at timestamptz NOT NULL DEFAULT now())`)
	exec1(t, pool, fmt.Sprintf(`CREATE EXTENSION postgres_fdw;
CREATE SERVER cold FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '%d', dbname 'cold', batch_size '100');
CREATE USER MAPPING FOR CURRENT_USER SERVER cold OPTIONS (user 'postgres');
CREATE SCHEMA cold;
IMPORT FOREIGN SCHEMA public LIMIT TO (audit_log_archive) FROM SERVER cold INTO cold;
ALTER FOREIGN TABLE cold.audit_log_archive ALTER COLUMN archived_at SET DEFAULT now()`, cold.Port))
	exec1(t, pool, `INSERT INTO audit_log (actor_account_id, action, retention_bucket, details, occurred_at)
SELECT gen_random_uuid(), 'old ' || i, 'operational', jsonb_build_object('i', i), now() - interval '91 days' - i * interval '1 second'
FROM generate_series(1, $1::int) i`, eligible)
	exec1(t, pool, `INSERT INTO audit_log (actor_account_id, action, retention_bucket, details, occurred_at)
SELECT gen_random_uuid(), 'fresh ' || i, CASE WHEN i % 2 = 0 THEN 'operational' ELSE 'compliance' END, '{}',
       CASE WHEN i % 2 = 0 THEN now() - interval '89 days' ELSE now() - interval '200 days' END
FROM generate_series(1, $1::int) i`, fresh)
	const rowsSQL = `SELECT coalesce(md5(string_agg(r, ',' ORDER BY id)), ''), count(*), count(DISTINCT id) FROM (
  SELECT id, ROW(id, actor_account_id, action, retention_bucket, details, occurred_at)::text AS r FROM audit_log
  UNION ALL
  SELECT id, ROW(id, actor_account_id, action, retention_bucket, details, occurred_at)::text FROM cold.audit_log_archive) x`
	var before string
	if err := pool.QueryRow(ctx, `SELECT md5(string_agg(ROW(id, actor_account_id, action, retention_bucket, details, occurred_at)::text, ',' ORDER BY id)) FROM audit_log`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	// every row in exactly one place, unchanged; and how many the archive holds, all eligible.
	judge := func(when string) int64 {
		t.Helper()
		var sum string
		var rows, ids int64
		if err := pool.QueryRow(ctx, rowsSQL).Scan(&sum, &rows, &ids); err != nil {
			t.Fatal(err)
		}
		if sum != before || rows != ids || rows != eligible+fresh {
			t.Fatalf("%s: audit_log and the archive hold %d rows (%d ids), checksum %s; want the %d rows as they were (checksum %s)",
				when, rows, ids, sum, eligible+fresh, before)
		}
		archived := scalar[int64](t, coldPool, `SELECT count(*) FROM audit_log_archive`)
		if n := scalar[int64](t, coldPool, `SELECT count(*) FROM audit_log_archive WHERE action NOT LIKE 'old %'`); n != 0 {
			t.Fatalf("%s: %d rows archived that were not eligible", when, n)
		}
		return archived
	}

	policyFile := filepath.Join(t.TempDir(), "sweeps.yaml")
	if err := os.WriteFile(policyFile, []byte(archivePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	// As TestKillMidSweep: batches pinned at 100 rows, and a pause that keeps the run mid-sweep.
	env := map[string]string{
		"SWEEP_POLICY_FILE":       policyFile,
		"SWEEP_DEADLINE":          deadline.String(),
		"BATCH_STATEMENT_TIMEOUT": "1s",
		"BATCH_LOCK_TIMEOUT":      "1s",
		"COUNT_TIMEOUT":           "1s",
		"SERVER_WRITE_TIMEOUT":    "4s",
		"SHUTDOWN_GRACE":          "2s",
		"BATCH_SIZE":              fmt.Sprint(batch),
		"BATCH_TARGET":            "1us",
		"BATCH_PAUSE":             "100ms",
	}
	first := startAPI(t, "reliability-archive-first", u, env)
	req := signed{path: "/internal/sweep-audit-archive", body: fmt.Sprintf(`{"batchSize": %d}`, batch)}.request(t, first.url)
	answered := make(chan answer, 1)
	go func() { answered <- send(req) }()
	// A run that answers first (its budget spent, a batch failed) is a failure, not a wait.
	waitFor(t, "the run to hold its lease and archive three batches", 15*time.Second, func() bool {
		select {
		case a := <-answered:
			t.Fatalf("the run answered before it archived three batches: HTTP %d %v: %s", a.status, a.err, a.body)
		default:
		}
		return scalar[int64](t, pool, `SELECT count(*) FROM sweeprail.sweep_lock WHERE label = 'audit-archive'`) == 1 &&
			scalar[int64](t, coldPool, `SELECT count(*) FROM audit_log_archive`) >= 3*batch
	})
	first.kill9(t)
	if a := <-answered; a.err == nil {
		t.Fatalf("the killed process answered HTTP %d: %s", a.status, a.body)
	}
	waitFor(t, "the killed process's sessions to end", 10*time.Second, func() bool {
		return sessions(t, pool, first.app) == 0
	})
	archived := judge("after the kill")
	t.Logf("killed after %d of %d eligible rows were archived", archived, eligible)
	if archived == 0 || archived == eligible || archived%batch != 0 {
		t.Fatalf("%d rows archived: want a whole number of %d-row batches, short of all %d", archived, batch, eligible)
	}

	// The next process drains the rest, its runs archiving each row once: a foreign archive's
	// batch is read back through the foreign server twice (the proof, and after the commit the
	// loss check), so the rest may take more than one run's budget.
	env["BATCH_PAUSE"], env["BATCH_TARGET"], env["BATCH_SIZE"] = "0s", "", "1000"
	second := startAPI(t, "reliability-archive-second", u, env)
	waitFor(t, "the dead run's lease to expire on the database clock", 10*time.Second, func() bool {
		return scalar[bool](t, pool, `SELECT coalesce(bool_and(locked_until < now()), true) FROM sweeprail.sweep_lock WHERE label = 'audit-archive'`)
	})
	var rest int64
	for run := 1; ; run++ {
		a := second.post(t, "audit-archive", `{}`)
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("run %d: HTTP %d %v: %s", run, a.status, a.err, a.body)
		}
		res := a.result(t)
		if res.Deleted != res.Archived {
			t.Fatalf("run %d: answer %s, want every deleted row archived", run, a.body)
		}
		rest += res.Archived
		if res.StopReason == wire.StopExhausted {
			break
		}
		if res.StopReason != wire.StopBudget || res.Archived == 0 || run == 5 {
			t.Fatalf("run %d: answer %s, want budget with rows archived, then exhausted", run, a.body)
		}
	}
	if rest != eligible-archived {
		t.Errorf("the next process's runs archived %d rows, want the %d left", rest, eligible-archived)
	}
	if n := judge("after the next process"); n != eligible {
		t.Errorf("archive holds %d rows, want all %d eligible", n, eligible)
	}
	if err := second.terminate(t, 10*time.Second); err != nil {
		t.Errorf("second api exited with %v, want 0", err)
	}
}
