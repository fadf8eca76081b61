package history

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// idle reports whether res is a run the history keeps per sweep and minute: one that ran to its
// end and found nothing to do. A scheduler that fires every second, or a key holder, makes as
// many of those as it likes; a run that did any work, failed, was truncated or stopped early
// keeps its own row.
func idle(res *wire.Result) bool {
	return !res.Skipped && res.StopReason == wire.StopExhausted && res.Error == nil && !res.Truncated &&
		res.Deleted == 0 && res.Archived == 0 && res.Processed == 0 && res.PartitionsDropped == 0
}

// idleDelete removes the row Start wrote for the run: it is counted on its minute's row instead.
const idleDelete = `DELETE FROM sweeprail.run WHERE run_id = $1 AND idle_minute IS NULL RETURNING started_at`

// idleUpsert writes an idle run on its sweep's row of the current minute (the database's clock):
// the first of the minute writes the row with its run id and start; each later one adds one to
// its requests and moves its end, request id, reference time and passes (their table sizes) to
// its own, so the row says how many runs found nothing, from when to when, and the last one's
// cutoffs.
const idleUpsert = `
INSERT INTO sweeprail.run AS r (run_id, sweep, started_at, finished_at, stop_reason, throttled_ms, passes, request_id,
                                reference_time, idle_minute)
VALUES ($1, $2, COALESCE($3, now()), now(), $4, $5, $6, $7, $8, date_bin('1 minute', now(), timestamptz '2000-01-01 00:00:00+00'))
ON CONFLICT (sweep, idle_minute) WHERE idle_minute IS NOT NULL DO UPDATE
SET requests = r.requests + 1, finished_at = greatest(r.finished_at, EXCLUDED.finished_at), request_id = EXCLUDED.request_id,
    reference_time = EXCLUDED.reference_time, passes = EXCLUDED.passes, throttled_ms = r.throttled_ms + EXCLUDED.throttled_ms`

// recordIdle moves an idle run from the row Start wrote onto its minute's row, in one transaction.
func (s *Store) recordIdle(ctx context.Context, res *wire.Result, requestID, passJSON string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var started *time.Time
		if err := tx.QueryRow(ctx, idleDelete, res.RunID).Scan(&started); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		_, err := tx.Exec(ctx, idleUpsert, res.RunID, res.Sweep, started, string(res.StopReason), res.ThrottledMs, passJSON,
			requestID, res.ReferenceTime)
		return err
	})
	if err != nil {
		return &WriteError{Err: fmt.Errorf("record an idle run: %w", err)}
	}
	return nil
}
