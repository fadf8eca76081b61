package sweep

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// lagBudget bounds every lag read of one run together, and each read's statement timeout: the
// reads come after the run's budget, so they stretch its answer by at most this much. The read
// answers from the age index's first entries in milliseconds (docs/BENCHMARKS.md); past its
// timeout the pass's lag is what the run saw.
const lagBudget = time.Second

// lagLockTimeout is how long a read waits for its table's ACCESS SHARE lock. Only a DDL's
// ACCESS EXCLUSIVE lock holds it back, and a read queued behind one would queue every writer
// behind itself: it gives up first, and the lag is what the run saw.
const lagLockTimeout = 20 * time.Millisecond

// measureLags sets each pass's Lag in res at the end of the run: read from its age index where
// one serves it, what the run saw otherwise. sts are the passes' statements, ref the run's
// reference time.
func (r *Runner) measureLags(db context.Context, log *slog.Logger, spec *policy.Spec, sts []statement.Set, ref time.Time, res *wire.Result) {
	ctx, cancel := context.WithTimeout(db, lagBudget)
	defer cancel()
	for i := range res.Passes {
		p, out := spec.Passes[i], &res.Passes[i]
		lag := &wire.Lag{Source: wire.LagSeen}
		if indexed(p) {
			secs, err := r.readLag(ctx, sts[i].Lag, ref.Add(-p.Retention))
			if err == nil {
				if secs == nil { // no eligible row left
					secs = new(float64)
				}
				lag.Seconds, lag.Source = secs, wire.LagRead
			} else {
				log.Warn("retention lag read", "pass", p.Name, "err", err)
				lag.Error = errorInfo(err, p.Name).Code
			}
		}
		if lag.Source == wire.LagSeen && out.StopReason == wire.StopExhausted {
			zero := 0.0
			lag.Seconds = &zero
		}
		lag.MeasuredAt = r.cfg.Now().UTC()
		out.Lag = lag
		if lag.Seconds != nil {
			r.cfg.Metrics.RetentionLag(res.Sweep, p.Name, *lag.Seconds, lag.MeasuredAt)
		}
	}
}

// indexed reports whether an age index serves pass p's lag read: the policy check refuses a
// pass no index serves unless it allows that, and a partitions-mode pass that keeps its
// boundary is never checked, since its batches never run.
func indexed(p policy.Pass) bool {
	return !p.AllowUnindexed && !(p.Mode == policy.ModePartitions && p.Boundary == policy.BoundaryKeep)
}

// readLag runs the lag read f for cutoff in a read-only transaction of its own, under its own
// statement and lock timeouts: it takes no row lock, so no writer waits on it. Its first walk
// over what a drain deleted prunes each page the drain emptied (a dirty page and WAL per page,
// a second's worth in a burst), so it writes them under the batches' wal_compression and
// backend_flush_after.
func (r *Runner) readLag(ctx context.Context, f statement.Form, cutoff time.Time) (*float64, error) {
	tx, err := r.cfg.Pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("read retention lag: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	limits := statement.Timeouts{Statement: min(lagBudget, r.cfg.Settings.StatementTimeout), Lock: lagLockTimeout,
		WALCompression: r.cfg.Settings.WALCompression, FlushAfter: r.cfg.Settings.FlushAfter}
	if err := limits.Set(ctx, tx); err != nil {
		return nil, fmt.Errorf("read retention lag: %w", err)
	}
	var secs *float64
	if err := tx.QueryRow(ctx, f.SQL, f.Params.Bind(statement.Args{Cutoff: cutoff})...).Scan(&secs); err != nil {
		return nil, fmt.Errorf("read retention lag: %w", err)
	}
	return secs, nil
}
