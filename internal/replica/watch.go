package replica

import (
	"context"
	"sync"
	"time"
)

// Peak is the most any standby was behind during a Watch, as the primary saw it.
type Peak struct {
	// Bytes is the most WAL a standby had left to replay.
	Bytes int64
	// Replay is the largest replay_lag of a standby that had WAL left to replay (the rule of
	// Limits.Over: a caught-up standby's stale replay_lag does not count).
	Replay time.Duration
	// Samples is how many reads the peak is taken over.
	Samples int
}

// Watch reads the standbys' lag in the background and keeps the sampled peak, as the primary sees
// it: a benchmark runs one around a workload. Slots are left out (they measure what the primary
// keeps), and so is a replay lag already shown when the watch started, until the standby reports
// again: PostgreSQL keeps showing the last burst's replay_lag for a while.
type Watch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	peak Peak
	err  error
}

// StartWatch starts reading every interval through q, until Stop.
func StartWatch(ctx context.Context, q Querier, every time.Duration) *Watch {
	ctx, cancel := context.WithCancel(ctx)
	w := &Watch{cancel: cancel, done: make(chan struct{})}
	go w.run(ctx, q, every)
	return w
}

func (w *Watch) run(ctx context.Context, q Querier, every time.Duration) {
	defer close(w.done)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	// before holds each standby's report as the first read found it.
	var before map[string]time.Time
	for {
		lags, err := Read(ctx, q)
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		if err != nil {
			w.err = err
			w.mu.Unlock()
			return
		}
		if before == nil {
			before = map[string]time.Time{}
			for _, l := range lags {
				before[l.Name] = l.Reported
			}
		}
		w.peak.Samples++
		for _, l := range lags {
			if l.Kind != KindStandby {
				continue
			}
			w.peak.Bytes = max(w.peak.Bytes, l.Bytes)
			if at, seen := before[l.Name]; l.Bytes > 0 && (!seen || !l.Reported.Equal(at)) {
				w.peak.Replay = max(w.peak.Replay, l.Replay)
			}
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Stop ends the watch and returns the peak, or the error that ended it early.
func (w *Watch) Stop() (Peak, error) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak, w.err
}
