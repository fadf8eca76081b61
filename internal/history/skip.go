package history

import (
	"context"
	"fmt"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// coalesced reports whether res is an answer the history keeps per sweep and minute rather than
// per request: one that ran nothing because another run held the lease. There are as many of
// those as requests, and a key holder sends as many requests as it likes; the runs they met are
// recorded in full.
func coalesced(res *wire.Result) bool {
	return res.Skipped && res.StopReason == wire.StopLeaseHeld && res.Error == nil
}

// skip records a lease-held answer on its sweep's row of the current minute (the database's
// clock): the first answer of the minute writes the row, with its run id and start; each later
// one adds one to its requests, moves its end and keeps its request id, so the row says how many
// answers were skipped, from when to when, and the last one to look for in the logs.
func (s *Store) skip(ctx context.Context, res *wire.Result, requestID string) error {
	_, err := s.pool.Exec(ctx, `
INSERT INTO sweeprail.run AS r (run_id, sweep, started_at, finished_at, stop_reason, skipped, request_id, skip_minute)
VALUES ($1, $2, now(), now(), $3, true, $4, date_bin('1 minute', now(), timestamptz '2000-01-01 00:00:00+00'))
ON CONFLICT (sweep, skip_minute) WHERE skip_minute IS NOT NULL DO UPDATE
SET requests = r.requests + 1, finished_at = greatest(r.finished_at, EXCLUDED.finished_at), request_id = EXCLUDED.request_id`,
		res.RunID, res.Sweep, string(res.StopReason), requestID)
	if err != nil {
		return &WriteError{Err: fmt.Errorf("record a skipped answer: %w", err)}
	}
	return nil
}
