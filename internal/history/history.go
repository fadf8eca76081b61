// Package history owns the run history: table sweeprail.run, one row per run, written at the
// run's start and completed at its end, listed by GET /internal/runs and pruned past its
// retention by every run. Answers that ran nothing because the lease was held share one row per
// sweep and minute, which counts them (skip.go), and so do runs that found nothing to do (idle.go).
package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// pruneBatch bounds the rows one prune deletes: the history is swept like any table, in short
// statements, by every run.
const pruneBatch = 1000

// DefaultRetention is how long runs are kept when RUN_HISTORY_RETENTION is unset.
const DefaultRetention = 90 * 24 * time.Hour

// maxUnrecorded bounds the runs a Store remembers it failed to record: the newest are kept.
const maxUnrecorded = 100

// Store reads and writes the run history of one database, and remembers the runs whose end it
// failed to write since the process started: those are missing from the table, or stuck
// unfinished there, and List's caller says so.
type Store struct {
	pool      *pgxpool.Pool
	retention time.Duration

	mu         sync.Mutex
	unrecorded []wire.Unrecorded
	// pending are the unwritten ends of runs holding a batch of unknown outcome, which their
	// sweep's next run writes before it settles them (batch.go).
	pending []pendingEnd
}

// New returns the history of pool's database, keeping runs for retention.
func New(pool *pgxpool.Pool, retention time.Duration) *Store {
	return &Store{pool: pool, retention: retention}
}

// Start records that a run began now (the database's clock).
func (s *Store) Start(ctx context.Context, runID, sweep, requestID string) error {
	if s == nil {
		return nil
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO sweeprail.run (run_id, sweep, request_id) VALUES ($1, $2, $3)`, runID, sweep, requestID)
	if err != nil {
		return fmt.Errorf("record run start: %w", err)
	}
	return nil
}

// Finish records a run's end and answer: it completes the row Start wrote, or writes the whole
// row for a run that never started one (a skipped run, or one whose Start failed). tables maps
// each pass to its table, whose size it keeps with the pass; a size it cannot read leaves the
// pass without one, and the row is still written.
func (s *Store) Finish(ctx context.Context, res *wire.Result, requestID string, tables map[string]string) error {
	if s == nil {
		return nil
	}
	if coalesced(res) {
		return s.skip(ctx, res, requestID)
	}
	var names []string
	for _, p := range res.Passes {
		names = append(names, tables[p.Pass])
	}
	sizes, measureErr := s.measure(ctx, slices.DeleteFunc(names, func(n string) bool { return n == "" }))
	passes := historyPasses(res, tables, sizes)
	// JSON goes as text, never []byte: the exec and simple-protocol query modes send []byte as
	// bytea, which a json column refuses (22P02).
	passJSON, err := json.Marshal(passes)
	if err != nil {
		return fmt.Errorf("record run end: %w", err)
	}
	if idle(res) {
		return errors.Join(measureErr, s.recordIdle(ctx, res, requestID, string(passJSON)))
	}
	var errJSON *string
	if res.Error != nil {
		b, err := json.Marshal(res.Error)
		if err != nil {
			return fmt.Errorf("record run end: %w", err)
		}
		e := string(b)
		errJSON = &e
	}
	_, err = s.pool.Exec(ctx, `
INSERT INTO sweeprail.run (run_id, sweep, started_at, finished_at, stop_reason, truncated, skipped, deleted, archived,
                           partitions_dropped, throttled_ms, passes, error, request_id, reference_time)
VALUES ($1, $2, now(), now(), $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (run_id) DO UPDATE SET finished_at = now(), stop_reason = EXCLUDED.stop_reason, truncated = EXCLUDED.truncated,
    skipped = EXCLUDED.skipped, deleted = EXCLUDED.deleted, archived = EXCLUDED.archived,
    partitions_dropped = EXCLUDED.partitions_dropped, throttled_ms = EXCLUDED.throttled_ms, passes = EXCLUDED.passes,
    error = EXCLUDED.error, reference_time = EXCLUDED.reference_time`,
		res.RunID, res.Sweep, string(res.StopReason), res.Truncated, res.Skipped, res.Deleted, res.Archived,
		res.PartitionsDropped, res.ThrottledMs, string(passJSON), errJSON, requestID, res.ReferenceTime)
	if err != nil {
		return errors.Join(measureErr, &WriteError{Err: fmt.Errorf("record run end: %w", err)})
	}
	return measureErr
}

// WriteError is Finish's error when the run's end was not written (the run is missing from the
// history, or unfinished there), as opposed to a table size it could not read.
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// Unrecorded notes that the end of run res could not be written (err): List's caller reports it.
func (s *Store) Unrecorded(res *wire.Result, at time.Time, err error) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unrecorded = append(s.unrecorded, wire.Unrecorded{RunID: res.RunID, Sweep: res.Sweep, At: at.UTC(), Error: err.Error()})
	if n := len(s.unrecorded); n > maxUnrecorded {
		s.unrecorded = append([]wire.Unrecorded(nil), s.unrecorded[n-maxUnrecorded:]...)
	}
}

// UnrecordedRuns returns the runs of sweep (every sweep when empty) whose end this process failed
// to write, newest first.
func (s *Store) UnrecordedRuns(sweep string) []wire.Unrecorded {
	out := []wire.Unrecorded{}
	if s == nil {
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.unrecorded) - 1; i >= 0; i-- {
		if sweep == "" || s.unrecorded[i].Sweep == sweep {
			out = append(out, s.unrecorded[i])
		}
	}
	return out
}

// Prune deletes at most a batch of the oldest runs past the retention, and reports how many, and
// a batch of the batch records past it.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	if s == nil || s.retention <= 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM sweeprail.run WHERE run_id IN (
  SELECT run_id FROM sweeprail.run WHERE started_at < now() - make_interval(secs => $1) ORDER BY started_at LIMIT $2)`,
		s.retention.Seconds(), pruneBatch)
	if err != nil {
		return 0, fmt.Errorf("prune run history: %w", err)
	}
	return tag.RowsAffected(), s.pruneRecords(ctx)
}

// The statements of List: the columns it scans, newest runs first. One sweep's runs are read by
// its index (sweep, started_at, run_id), which yields them in order: a predicate that also
// matched "every sweep", or a sort the index cannot give, would let the planner walk the newest
// runs of all sweeps to find those of a rare one. ORDER BY names run.run_id, the column, not the
// text the SELECT makes of it.
const (
	listColumns = `run_id::text, sweep, started_at, finished_at, stop_reason, truncated, skipped, deleted, archived,
       partitions_dropped, throttled_ms, passes, error, request_id, requests, reference_time`
	listAll   = `SELECT ` + listColumns + ` FROM sweeprail.run ORDER BY started_at DESC, run.run_id DESC LIMIT $1`
	listSweep = `SELECT ` + listColumns + ` FROM sweeprail.run WHERE sweep = $2 ORDER BY started_at DESC, run.run_id DESC LIMIT $1`
)

// List returns up to limit runs, newest first, of sweep (every sweep when empty).
func (s *Store) List(ctx context.Context, sweep string, limit int) ([]wire.HistoryRun, error) {
	if s == nil {
		return nil, errors.New("list runs: no history")
	}
	query, args := listAll, []any{limit}
	if sweep != "" {
		query, args = listSweep, []any{limit, sweep}
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.HistoryRun, error) {
		var h wire.HistoryRun
		var stop *string
		var passes, errJSON []byte
		if err := r.Scan(&h.RunID, &h.Sweep, &h.StartedAt, &h.FinishedAt, &stop, &h.Truncated, &h.Skipped, &h.Deleted,
			&h.Archived, &h.PartitionsDropped, &h.ThrottledMs, &passes, &errJSON, &h.RequestID, &h.Requests, &h.ReferenceTime); err != nil {
			return h, err
		}
		if stop != nil {
			sr := wire.StopReason(*stop)
			h.StopReason = &sr
		}
		h.Passes = []wire.HistoryPass{}
		if err := json.Unmarshal(passes, &h.Passes); err != nil {
			return h, fmt.Errorf("passes of run %s: %w", h.RunID, err)
		}
		if len(errJSON) > 0 {
			h.Error = &wire.ErrorInfo{}
			if err := json.Unmarshal(errJSON, h.Error); err != nil {
				return h, fmt.Errorf("error of run %s: %w", h.RunID, err)
			}
		}
		return h, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}
