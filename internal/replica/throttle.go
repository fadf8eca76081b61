package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Defaults of Config's optional fields.
const (
	// DefaultRecheck is how often a waiting throttle reads the lag again: four reads a second
	// keep the wait within a quarter second of the standbys' recovery, for a query of a
	// millisecond on the primary.
	DefaultRecheck = 250 * time.Millisecond
	// DefaultQueryTimeout bounds one read of the lag.
	DefaultQueryTimeout = 5 * time.Second
)

// Limits are the most a standby may be behind before work waits. A zero field is off.
type Limits struct {
	// MaxLag is the most replay lag (pg_stat_replication.replay_lag) a standby may show.
	MaxLag time.Duration
	// MaxLagBytes is the most WAL a standby may have left to replay, or a physical slot may
	// hold for its consumer.
	MaxLagBytes int64
}

// Off reports whether neither limit is set.
func (l Limits) Off() bool { return l.MaxLag <= 0 && l.MaxLagBytes <= 0 }

// Over returns the lag furthest over the limits (the most bytes behind, among those over), and
// whether any is over. Replay lag counts only while a standby has WAL left to replay: PostgreSQL
// keeps showing a caught-up standby's last replay_lag for a while. A slot counts against
// MaxLagBytes only.
func (l Limits) Over(lags []Lag) (Lag, bool) {
	var (
		worst Lag
		over  bool
	)
	for _, g := range lags {
		byBytes := l.MaxLagBytes > 0 && g.Bytes > l.MaxLagBytes
		byTime := l.MaxLag > 0 && g.Kind == KindStandby && g.Bytes > 0 && max(g.Replay, g.Behind, g.CatchUp) > l.MaxLag
		if (byBytes || byTime) && (!over || g.Bytes > worst.Bytes) {
			worst, over = g, true
		}
	}
	return worst, over
}

// Config configures a Throttle. Pool is required unless both limits are off; the rest defaults.
type Config struct {
	Limits
	// Pool reaches the primary; its role needs pg_monitor (or pg_read_all_stats).
	Pool Querier
	// Recheck is how long the throttle sleeps between reads while a standby is over; 0 is
	// DefaultRecheck.
	Recheck time.Duration
	// QueryTimeout bounds each read of the lag; 0 is DefaultQueryTimeout.
	QueryTimeout time.Duration
	// Logger says when a wait starts and ends; nil discards.
	Logger *slog.Logger
	// Now is the clock that measures waits and compares them with Wait's until; nil is time.Now.
	Now func() time.Time
	// Sleep pauses for d or until ctx is done; nil is a timer.
	Sleep func(ctx context.Context, d time.Duration)
}

// Throttle holds work on the primary back while a standby is too far behind. A nil or Off
// Throttle never waits and never reads. It is safe for concurrent use.
type Throttle struct {
	limits       Limits
	pool         Querier
	recheck      time.Duration
	queryTimeout time.Duration
	logger       *slog.Logger
	now          func() time.Time
	sleep        func(ctx context.Context, d time.Duration)
	// clock dates the WAL positions of the throttle's reads; shared by WithLogger's copies.
	clock *walClock
}

// New returns the Throttle of cfg.
func New(cfg Config) *Throttle {
	t := &Throttle{
		limits: cfg.Limits, pool: cfg.Pool, recheck: cfg.Recheck, queryTimeout: cfg.QueryTimeout,
		logger: cfg.Logger, now: cfg.Now, sleep: cfg.Sleep, clock: &walClock{},
	}
	if t.recheck <= 0 {
		t.recheck = DefaultRecheck
	}
	if t.queryTimeout <= 0 {
		t.queryTimeout = DefaultQueryTimeout
	}
	if t.logger == nil {
		t.logger = slog.New(slog.DiscardHandler)
	}
	if t.now == nil {
		t.now = time.Now
	}
	if t.sleep == nil {
		t.sleep = sleepCtx
	}
	return t
}

// Enabled reports whether the throttle has a limit to enforce.
func (t *Throttle) Enabled() bool { return t != nil && !t.limits.Off() }

// Limits returns the throttle's limits.
func (t *Throttle) Limits() Limits {
	if t == nil {
		return Limits{}
	}
	return t.limits
}

// WithLogger returns a copy of the throttle that logs to logger: a run's logger, which names
// its sweep and run. A wait logs at debug when it starts and ends, and at info when it reaches
// its until with a standby still over.
func (t *Throttle) WithLogger(logger *slog.Logger) *Throttle {
	if t == nil || logger == nil {
		return t
	}
	c := *t
	c.logger = logger
	return &c
}

// Check tells whether the throttle can read the lag (see the package's Check); a throttle that
// is off has nothing to read and always passes.
func (t *Throttle) Check(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return Check(ctx, t.pool)
}

// Wait waits, reading the lag every Recheck, while a standby or slot is over the limits, until ctx
// is done or until; it never sleeps past until, and returns the time waited (0 when nothing was
// over). The error is ctx's, or a failed read (ErrNoPrivilege, ErrNotPrimary, the database's): a
// throttle that cannot read the lag fails closed. A nil error may mean until was reached, so the
// caller checks its own deadline before another batch.
func (t *Throttle) Wait(ctx context.Context, until time.Time) (waited time.Duration, err error) {
	if !t.Enabled() {
		return 0, nil
	}
	start := t.now()
	for reads := 0; ; reads++ {
		lags, err := t.read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return t.since(start, reads), ctx.Err()
			}
			return t.since(start, reads), fmt.Errorf("throttle on replica lag: %w", err)
		}
		worst, over := t.limits.Over(lags)
		now := t.now()
		if !over {
			if reads > 0 {
				t.logger.Debug("replica lag back within limits", "waited_ms", now.Sub(start).Milliseconds(),
					"max_lag", t.limits.MaxLag, "max_lag_bytes", t.limits.MaxLagBytes)
			}
			return t.since(start, reads), nil
		}
		if reads == 0 {
			t.logger.Debug("throttled: a standby is over the replica lag limits", "kind", worst.Kind, "name", worst.Name,
				"lag_bytes", worst.Bytes, "replay_lag", worst.Replay, "max_lag", t.limits.MaxLag, "max_lag_bytes", t.limits.MaxLagBytes)
		}
		left := until.Sub(now)
		if left <= 0 {
			t.logger.Info("throttled until the deadline: a standby is still over the replica lag limits", "kind", worst.Kind,
				"name", worst.Name, "lag_bytes", worst.Bytes, "replay_lag", worst.Replay, "waited_ms", now.Sub(start).Milliseconds())
			return t.since(start, reads+1), nil
		}
		t.sleep(ctx, min(t.recheck, left))
		if err := ctx.Err(); err != nil {
			return t.now().Sub(start), err
		}
	}
}

// since is the time waited after reads reads that found a standby over: none, none waited, even
// though the first read itself took time.
func (t *Throttle) since(start time.Time, reads int) time.Duration {
	if reads == 0 {
		return 0
	}
	return t.now().Sub(start)
}

func (t *Throttle) read(ctx context.Context) ([]Lag, error) {
	ctx, cancel := context.WithTimeout(ctx, t.queryTimeout)
	defer cancel()
	lags, err := Read(ctx, t.pool)
	if err != nil {
		return nil, err
	}
	t.clock.date(lags, t.now())
	return lags, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// isRecovery reports whether err is PostgreSQL refusing pg_current_wal_lsn() during recovery.
func isRecovery(err error) bool {
	var pgErr *pgconn.PgError
	// 55000 object_not_in_prerequisite_state: "recovery is in progress".
	return errors.As(err, &pgErr) && pgErr.Code == "55000"
}
