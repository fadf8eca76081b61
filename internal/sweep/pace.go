package sweep

import (
	"errors"
	"fmt"
	"time"

	"github.com/sweeprail/sweeprail/internal/pace"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// pace waits before a batch on the pass's budgets (Config.Pacer), at most until the run's
// deadline, and says why the pass must stop, or "" to go on: critical-load past the critical
// level of other sessions, batch-error (with a *paceError) when a read fails, since a batch run
// blind is the load the budgets hold back. Shutdown ends the wait; the caller's next stop
// check says so.
func (pr *passRun) pace() (wire.StopReason, error) {
	if pr.aids.pacing == nil {
		return "", nil
	}
	var q pace.Querier = pr.r.cfg.Pool
	if pr.conn != nil {
		q = pr.conn
	}
	began := pr.r.cfg.Now()
	w, err := pr.aids.pacing.Wait(pr.ctx, q, pr.deadline)
	pr.throttled(pace.CauseActiveSessions, began, w.ActiveSessions)
	pr.throttled(pace.CauseWALRate, began.Add(w.ActiveSessions), w.WALRate)
	var critical *pace.CriticalError
	switch {
	case errors.As(err, &critical):
		pr.log.Info("sweep stopped at the critical level of active sessions", "pass", pr.p.Name, "active", critical.Active,
			"critical", critical.Critical)
		return wire.StopCriticalLoad, nil
	case err != nil && pr.ctx.Err() == nil:
		return wire.StopBatchError, &paceError{err: err}
	}
	// The wait priced the last batch's rows: the next batch is held to them now, not one batch
	// later as adapt would (a heap range is, being sized in blocks there).
	if pr.at.path != PathHeap {
		pr.at.size = min(pr.at.size, max(pr.r.cfg.Settings.MinBatchSize, pr.aids.pacing.MaxRows(pr.at.size)))
	}
	return "", nil
}

// throttled adds a wait of d from began on cause to the pass's answer, the metric and the trace.
func (pr *passRun) throttled(cause pace.Cause, began time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	pr.out.ThrottledMs += d.Milliseconds()
	if pr.out.ThrottledBy == nil {
		pr.out.ThrottledBy = map[string]int64{}
	}
	pr.out.ThrottledBy[string(cause)] += d.Milliseconds()
	pr.r.cfg.Metrics.Throttled(pr.of.sweep, string(cause), d)
	pr.r.cfg.Tracing.Throttled(pr.ctx, string(cause), began, d)
}

// paceError is a failed read of the pacer's budgets before a batch. The run stops at it, as at a
// lagError: the passes after it would run against the same server.
type paceError struct{ err error }

func (e *paceError) Error() string {
	return fmt.Sprintf("no batch runs while the budgets cannot be read (MAX_WAL_RATE, MAX_ACTIVE_SESSIONS): %v", e.err)
}

func (e *paceError) Unwrap() error { return e.err }

// endsRun reports whether a pass that stopped for reason with err ends the run: the server's
// load and the standbys' lag are the run's, not the pass's.
func endsRun(reason wire.StopReason, err error) bool {
	var (
		lagErr  *lagError
		paceErr *paceError
	)
	return reason == wire.StopCriticalLoad || errors.As(err, &lagErr) || errors.As(err, &paceErr)
}

// addThrottled adds a pass's waits by cause to the run's.
func addThrottled(res *wire.Result, out wire.PassResult) {
	for cause, ms := range out.ThrottledBy {
		if res.ThrottledBy == nil {
			res.ThrottledBy = map[string]int64{}
		}
		res.ThrottledBy[cause] += ms
	}
}
