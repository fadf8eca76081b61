package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// The statements of the batch records, sweeprail.run_batch: a committed batch's row, written in
// its own transaction; the settling insert, which waits for that transaction if it is still open
// (the primary key's uniqueness check) and leaves a row saying it never committed when it did
// not, so a late commit can never turn the answer around; and the read of what was there.
const (
	recordBatch = `INSERT INTO sweeprail.run_batch (run_id, pass, batch, rows) VALUES ($1, $2, $3, $4)`
	settleBatch = `INSERT INTO sweeprail.run_batch (run_id, pass, batch, rows, committed) VALUES ($1, $2, $3, $4, false)
ON CONFLICT (run_id, pass, batch) DO NOTHING`
	readBatch     = `SELECT committed FROM sweeprail.run_batch WHERE run_id = $1 AND pass = $2 AND batch = $3`
	markUnsettled = `UPDATE sweeprail.run SET unsettled = true WHERE run_id = $1`
	// The runs of one sweep with a batch to settle, locked for the settling.
	unsettledRuns = `SELECT run_id::text, passes FROM sweeprail.run WHERE sweep = $1 AND unsettled ORDER BY started_at FOR UPDATE`
	settleRun     = `UPDATE sweeprail.run SET unsettled = false, deleted = deleted + $2, passes = $3 WHERE run_id = $1`
	pruneBatches  = `DELETE FROM sweeprail.run_batch WHERE ctid = ANY (ARRAY(
  SELECT ctid FROM sweeprail.run_batch WHERE recorded_at < now() - make_interval(secs => $1) ORDER BY recorded_at LIMIT $2))`
)

// CommitBatch writes batch's record in tx, the batch's own transaction, so that it commits
// exactly when the batch does, and commits tx: both in one round trip, since a batch beside
// live traffic lasts a millisecond or two and a round trip is a tenth of that. Each of after
// is sent behind the COMMIT in the same round trip, outside the transaction. The record's
// refusal is a "record the batch" error, and tx is left for the caller to roll back; any other
// error of the record or the COMMIT is a *CommitError. A nil Store records nothing and only
// commits.
//
// tx is committed by a COMMIT of its own, so pgx still takes it for open: tx must be begun on a
// connection the caller holds (a pool's transaction would never give its connection back), and
// the caller must not roll it back after a nil error, which would cost a round trip.
func (s *Store) CommitBatch(ctx context.Context, tx pgx.Tx, runID, pass string, batch int, rows int64, after ...After) error {
	b := &pgx.Batch{}
	if s != nil {
		b.Queue(recordBatch, runID, pass, batch, rows)
	}
	b.Queue("COMMIT")
	for _, a := range after {
		b.Queue(a.SQL)
	}
	br := tx.SendBatch(ctx, b)
	if s != nil {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				return fmt.Errorf("record the batch: %w", err)
			}
			return &CommitError{Err: err}
		}
	}
	tag, err := br.Exec()
	if err == nil && tag.String() != "COMMIT" {
		// An aborted transaction's COMMIT answers ROLLBACK.
		err = pgx.ErrTxCommitRollback
	}
	if err != nil {
		_ = br.Close()
		return &CommitError{Err: err}
	}
	// The COMMIT's reply came: the batch committed, whatever becomes of the reads behind it. A
	// connection that broke since is the caller's to see (it is closed), not a lost commit.
	for _, a := range after {
		a.Scan(br.QueryRow())
	}
	_ = br.Close()
	return nil
}

// After is a read sent behind a batch's COMMIT in the same round trip. Scan takes its row, and
// owns its failure: a failed read is never the commit's.
type After struct {
	SQL  string
	Scan func(pgx.Row)
}

// CommitError is a batch's failed COMMIT. When Err is the server's own (a deferred constraint, a
// serialization failure) the batch rolled back; otherwise its outcome is the server's to tell
// (Outcome).
type CommitError struct{ Err error }

func (e *CommitError) Error() string { return "commit: " + e.Err.Error() }

func (e *CommitError) Unwrap() error { return e.Err }

// Outcome settles whether a batch whose COMMIT's reply was lost committed, on a connection of
// the pool's own: BatchCommitted or BatchRolledBack, final either way. A batch whose
// transaction is still open on the server is waited for, at most until ctx is done.
func (s *Store) Outcome(ctx context.Context, runID, pass string, batch int, rows int64) (wire.BatchOutcome, error) {
	if s == nil {
		return wire.BatchUnknown, errors.New("settle a batch: no history")
	}
	return outcome(ctx, s.pool, runID, pass, batch, rows)
}

// execQuerier is a pool or a transaction.
type execQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func outcome(ctx context.Context, db execQuerier, runID, pass string, batch int, rows int64) (wire.BatchOutcome, error) {
	tag, err := db.Exec(ctx, settleBatch, runID, pass, batch, rows)
	if err != nil {
		return wire.BatchUnknown, fmt.Errorf("settle a batch: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return wire.BatchRolledBack, nil
	}
	var committed bool
	if err := db.QueryRow(ctx, readBatch, runID, pass, batch).Scan(&committed); err != nil {
		return wire.BatchUnknown, fmt.Errorf("read a batch's record: %w", err)
	}
	if committed {
		return wire.BatchCommitted, nil
	}
	return wire.BatchRolledBack, nil
}

// MarkUnsettled flags run res, whose end is written, when a pass of it holds a batch of
// unknown outcome, for the sweep's next run to settle.
func (s *Store) MarkUnsettled(ctx context.Context, res *wire.Result) error {
	if s == nil || !unsettled(res.Passes) {
		return nil
	}
	if _, err := s.pool.Exec(ctx, markUnsettled, res.RunID); err != nil {
		return fmt.Errorf("flag the run's unsettled batch: %w", err)
	}
	return nil
}

func unsettled(passes []wire.PassResult) bool {
	for _, p := range passes {
		if p.LostCommit != nil && p.LostCommit.Outcome == wire.BatchUnknown {
			return true
		}
	}
	return false
}

// pendingEnd is a run's end that Finish could not write, kept to be written again.
type pendingEnd struct {
	res       *wire.Result
	requestID string
	tables    map[string]string
}

// KeepUnwritten keeps the end of run res, which Finish failed to write, when a pass of it holds a
// batch of unknown outcome: the sweep's next run in this process writes it, then settles it. The
// newest maxUnrecorded are kept.
func (s *Store) KeepUnwritten(res *wire.Result, requestID string, tables map[string]string) {
	if s == nil || !unsettled(res.Passes) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, pendingEnd{res: res, requestID: requestID, tables: tables})
	if n := len(s.pending); n > maxUnrecorded {
		s.pending = append([]pendingEnd(nil), s.pending[n-maxUnrecorded:]...)
	}
}

// writePending writes the kept ends of sweep's runs, flagged unsettled, and forgets those written.
func (s *Store) writePending(ctx context.Context, sweep string) error {
	s.mu.Lock()
	var mine, rest []pendingEnd
	for _, p := range s.pending {
		if p.res.Sweep == sweep {
			mine = append(mine, p)
		} else {
			rest = append(rest, p)
		}
	}
	s.pending = rest
	s.mu.Unlock()
	for i, p := range mine {
		err := s.Finish(ctx, p.res, p.requestID, p.tables)
		if we := (*WriteError)(nil); !errors.As(err, &we) {
			err = s.MarkUnsettled(ctx, p.res)
		}
		if err != nil {
			s.mu.Lock()
			s.pending = append(s.pending, mine[i:]...)
			s.mu.Unlock()
			return err
		}
	}
	return nil
}

// Settled is a batch of an earlier run that Settle found committed: the rows its run now counts.
type Settled struct {
	RunID, Pass string
	Rows        int64
	// Processed says Rows are keys a per-row pass processed, not rows deleted.
	Processed bool
}

// Settle settles every batch of unknown outcome in sweep's earlier runs, in one transaction:
// each becomes committed or rolled back in its run's passes, a committed one's rows counted. The
// caller holds the sweep's lease. perRow says which passes count keys processed.
func (s *Store) Settle(ctx context.Context, sweep string, perRow func(pass string) bool) ([]Settled, error) {
	if s == nil {
		return nil, nil
	}
	if err := s.writePending(ctx, sweep); err != nil {
		return nil, fmt.Errorf("settle the unknown batches: %w", err)
	}
	var out []Settled
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		type run struct {
			id     string
			passes []wire.HistoryPass
		}
		rows, err := tx.Query(ctx, unsettledRuns, sweep)
		if err != nil {
			return err
		}
		runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (run, error) {
			var u run
			var passes []byte
			if err := r.Scan(&u.id, &passes); err != nil {
				return u, err
			}
			return u, json.Unmarshal(passes, &u.passes)
		})
		if err != nil {
			return err
		}
		for _, u := range runs {
			settled, err := settleRunPasses(ctx, tx, u.id, u.passes, perRow)
			if err != nil {
				return err
			}
			out = append(out, settled...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("settle the unknown batches: %w", err)
	}
	return out, nil
}

// settleRunPasses settles the unknown batches of run id's passes, and rewrites the run.
func settleRunPasses(ctx context.Context, tx pgx.Tx, id string, passes []wire.HistoryPass, perRow func(string) bool) ([]Settled, error) {
	var out []Settled
	var deleted int64
	for i := range passes {
		lc := passes[i].LostCommit
		if lc == nil || lc.Outcome != wire.BatchUnknown {
			continue
		}
		o, err := outcome(ctx, tx, id, passes[i].Pass, lc.Batch, lc.Rows)
		if err != nil {
			return nil, err
		}
		lc.Outcome = o
		if o != wire.BatchCommitted {
			continue
		}
		st := Settled{RunID: id, Pass: passes[i].Pass, Rows: lc.Rows, Processed: perRow(passes[i].Pass)}
		if st.Processed {
			passes[i].Processed += lc.Rows
		} else {
			passes[i].Deleted += lc.Rows
			deleted += lc.Rows
		}
		out = append(out, st)
	}
	b, err := json.Marshal(passes)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, settleRun, id, deleted, string(b)); err != nil {
		return nil, err
	}
	return out, nil
}

// pruneRecords deletes at most a batch of the batch records past the retention.
func (s *Store) pruneRecords(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, pruneBatches, s.retention.Seconds(), pruneBatch); err != nil {
		return fmt.Errorf("prune batch records: %w", err)
	}
	return nil
}
