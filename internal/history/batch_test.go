package history_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestBatchRecords checks a batch's outcome as Outcome settles it, and that Prune prunes the
// records past the retention with the runs.
func TestBatchRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	store := history.New(pool, 24*time.Hour)
	const run = "00000000-0000-0000-0000-0000000000aa"
	_, tx := batchTx(t, pool)
	if err := store.CommitBatch(ctx, tx, run, "read", 1, 100); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		batch int
		want  wire.BatchOutcome
	}{
		{"a recorded batch committed", 1, wire.BatchCommitted},
		{"an unrecorded batch rolled back", 2, wire.BatchRolledBack},
		{"asked again, a rolled-back batch stays rolled back", 2, wire.BatchRolledBack},
	}
	// In order, not in parallel: the third asks again what the second settled.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := store.Outcome(ctx, run, "read", tc.batch, 100)
			if err != nil || got != tc.want {
				t.Fatalf("%s %v, want %s", got, err, tc.want)
			}
		})
	}
	if _, err := pool.Exec(ctx, `UPDATE sweeprail.run_batch SET recorded_at = now() - interval '2 days' WHERE batch = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	var left []int
	rows, err := pool.Query(ctx, `SELECT batch FROM sweeprail.run_batch ORDER BY batch`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var b int
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		left = append(left, b)
	}
	if len(left) != 1 || left[0] != 2 {
		t.Fatalf("records left %v, want batch 2's only: the old one pruned", left)
	}
}

// TestCommitBatch checks how a pipelined record and commit fail: the record's refusal is not
// the commit's (the transaction is left open, aborted, for the caller to roll back), and a
// commit the server refuses is a *CommitError over the server's error.
func TestCommitBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	store := history.New(pool, 24*time.Hour)
	const run = "00000000-0000-0000-0000-0000000000bb"
	if _, err := pool.Exec(ctx, `CREATE TABLE parent (id int PRIMARY KEY);
CREATE TABLE child (parent_id int REFERENCES parent DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		// in runs in the transaction before CommitBatch.
		in     string
		batch  int
		record bool
		commit bool
		status byte
	}{
		{"recorded and committed", "SELECT 1", 1, false, false, 'I'},
		{"a record the table refuses leaves the transaction to roll back", "SELECT 1", 1, true, false, 'E'},
		{"a commit the server refuses is the commit's error", "INSERT INTO child VALUES (1)", 2, false, true, 'I'},
	}
	// In order: the second records the first's batch again.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, tx := batchTx(t, pool)
			if _, err := tx.Exec(ctx, tc.in); err != nil {
				t.Fatal(err)
			}
			err := store.CommitBatch(ctx, tx, run, "read", tc.batch, 10)
			var cerr *history.CommitError
			var pgErr *pgconn.PgError
			switch {
			case tc.record && (err == nil || errors.As(err, &cerr) || !errors.As(err, &pgErr) || pgErr.Code != "23505"):
				t.Errorf("CommitBatch = %v, want the record's unique violation, not a commit error", err)
			case tc.commit && (!errors.As(err, &cerr) || !errors.As(err, &pgErr) || pgErr.Code != "23503"):
				t.Errorf("CommitBatch = %v, want a *CommitError over the deferred key's violation", err)
			case !tc.record && !tc.commit && err != nil:
				t.Errorf("CommitBatch = %v", err)
			}
			if got := conn.Conn().PgConn().TxStatus(); got != tc.status {
				t.Errorf("transaction status %q after CommitBatch, want %q", got, tc.status)
			}
			if tc.status != 'I' {
				_ = tx.Rollback(ctx)
			}
		})
	}
	got, err := store.Outcome(ctx, run, "read", 2, 10)
	if err != nil || got != wire.BatchRolledBack {
		t.Fatalf("the refused commit's batch: %s %v, want rolled back", got, err)
	}
}

// batchTx begins a transaction on a connection held for it until the test ends, as a pass's
// batches run: CommitBatch commits with a COMMIT of its own, so a pool's transaction would never
// give its connection back.
func batchTx(t *testing.T, pool *pgxpool.Pool) (*pgxpool.Conn, pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return conn, tx
}

// TestCommitBatchAfter checks the reads sent behind a batch's COMMIT: each runs after the commit
// (it sees the batch's record), with or without a Store; one that fails is its own failure, not
// the commit's; and none is read when the commit fails.
func TestCommitBatchAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE parent (id int PRIMARY KEY);
CREATE TABLE child (parent_id int REFERENCES parent DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	// seen counts, outside the batch's transaction, the records and child rows it wrote.
	const seen = `SELECT (SELECT count(*) FROM sweeprail.run_batch WHERE run_id = $1::uuid) + (SELECT count(*) FROM child)`
	cases := []struct {
		name  string
		store *history.Store
		in    string
		read  string
		// want is what the read scans; -1: it failed; -2: it was never read.
		want    int64
		commits bool
	}{
		{"a read behind the commit sees the batch", history.New(pool, time.Hour), "SELECT 1", seen, 1, true},
		{"without a store it reads behind the plain commit", nil, "INSERT INTO parent VALUES (7); INSERT INTO child VALUES (7)", seen, 1, true},
		{"a read that fails is not the commit's", history.New(pool, time.Hour), "SELECT 1", "SELECT 1/0", -1, true},
		{"no read behind a commit the server refuses", history.New(pool, time.Hour), "INSERT INTO child VALUES (8)", seen, -2, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := fmt.Sprintf("00000000-0000-0000-0000-0000000001%02d", i)
			if _, err := pool.Exec(ctx, `TRUNCATE child, parent`); err != nil {
				t.Fatal(err)
			}
			conn, tx := batchTx(t, pool)
			if _, err := tx.Exec(ctx, tc.in); err != nil {
				t.Fatal(err)
			}
			got := int64(-2)
			scan := func(row pgx.Row) {
				got = -1
				var n int64
				if row.Scan(&n) == nil {
					got = n
				}
			}
			sql := strings.ReplaceAll(tc.read, "$1::uuid", "'"+run+"'::uuid")
			err := tc.store.CommitBatch(ctx, tx, run, "read", 1, 10, history.After{SQL: sql, Scan: scan})
			var cerr *history.CommitError
			if committed := !errors.As(err, &cerr); committed != tc.commits || (tc.commits && err != nil) {
				t.Fatalf("CommitBatch = %v, want committed %v", err, tc.commits)
			}
			if got != tc.want {
				t.Errorf("the read behind the commit scanned %d, want %d", got, tc.want)
			}
			if s := conn.Conn().PgConn().TxStatus(); s != 'I' && tc.commits {
				t.Errorf("transaction status %q after CommitBatch, want idle", s)
			}
		})
	}
}
