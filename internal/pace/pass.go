package pace

import (
	"context"
	"log/slog"
	"time"
)

// Waited is what one Wait spent, by cause.
type Waited struct {
	WALRate, ActiveSessions time.Duration
}

// Pass paces the batches of one pass: it learns the WAL its table's rows cost, which sizes its
// batches, and spends the Pacer's shared bucket. Not safe for concurrent use; a nil Pass never
// waits.
type Pass struct {
	p   *Pacer
	log *slog.Logger
	// mark is the WAL position read before the last batch; rows the rows that batch deleted.
	mark int64
	rows int64
	// bytesPerRow is the WAL a row of the pass costs, smoothed over its batches; 0 until known.
	bytesPerRow float64
	// ended is the WAL position read behind the last batch's COMMIT (EndRead), at endedAt; 0
	// once a Wait spent it.
	ended   int64
	endedAt time.Time
}

// Pass starts the pacing of one pass, logging to logger (nil: the Pacer's); nil when the
// pacer is off.
func (p *Pacer) Pass(logger *slog.Logger) *Pass {
	if !p.Enabled() {
		return nil
	}
	if logger == nil {
		logger = p.cfg.Logger
	}
	return &Pass{p: p, log: logger}
}

// Wait waits, before a batch, while other sessions are over MaxSessions and while the server's
// WAL is over the rate, never past until; the caller checks its own deadline after. The error is
// ctx's, a failed read (a pacer that cannot read fails closed), or a *CriticalError.
func (ps *Pass) Wait(ctx context.Context, q Querier, until time.Time) (Waited, error) {
	var w Waited
	if ps == nil {
		return w, nil
	}
	l := ps.p.cfg.Limits
	var err error
	if l.MaxSessions > 0 || l.CriticalSessions > 0 {
		if w.ActiveSessions, err = ps.sessionWait(ctx, q, until); err != nil {
			return w, err
		}
	}
	if l.WALRate <= 0 {
		return w, nil
	}
	waited, first, last, err := ps.walWait(ctx, q, until)
	w.WALRate = waited
	if err != nil {
		return w, err
	}
	ps.learn(first, last)
	if waited > 0 {
		ps.log.Debug("throttled on the WAL rate", "waited_ms", waited.Milliseconds(), "max_wal_rate", l.WALRate)
	}
	return w, nil
}

// learn takes the WAL written from the last batch's beginning to ended as that batch's, per row
// it deleted, and marks next as where the next one begins. Other writers' WAL is in it too,
// which sizes the rail's batches smaller beside a busy application, not larger.
func (ps *Pass) learn(ended, next int64) {
	if ps.mark > 0 && ps.rows > 0 && ended > ps.mark {
		sample := float64(ended-ps.mark) / float64(ps.rows)
		if ps.bytesPerRow == 0 {
			ps.bytesPerRow = sample
		} else {
			ps.bytesPerRow = (ps.bytesPerRow + sample) / 2
		}
	}
	ps.mark, ps.rows = next, 0
}

// Batch tells the pass a batch deleted rows, which the next Wait prices.
func (ps *Pass) Batch(rows int64) {
	if ps != nil {
		ps.rows += rows
	}
}

// MaxRows is the most rows the next batch may delete, within hi, for its WAL to stay within the
// bucket's burst; hi while the pass's WAL per row is not known, or the rate is off.
func (ps *Pass) MaxRows(hi int) int {
	if ps == nil {
		return hi
	}
	return ps.p.wal.rowsFor(ps.bytesPerRow, hi)
}
