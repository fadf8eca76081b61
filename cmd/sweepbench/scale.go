package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/sweep"
)

// scalePoint is the scale run at one table size.
type scalePoint struct {
	rows     int
	eligible int64
	// rail is C end to end (adaptive batches); fixed is the engine in-process with every batch
	// at BATCH_SIZE, so batch durations compare directly across sizes.
	rail, fixed outcome
}

type scaleResult struct {
	fixedSize int
	points    []scalePoint
	elapsed   time.Duration
}

// scaleRun measures the rail's per-batch cost at 1M and at 5M rows: O(batch) means the same
// batch costs the same whatever the table's size and however much of it was already deleted.
// No foreground runs: the question is the engine's own cost.
func (b *bench) scaleRun(ctx context.Context) (scaleResult, error) {
	defaults, err := apiDefaults()
	if err != nil {
		return scaleResult{}, err
	}
	res := scaleResult{fixedSize: defaults.BatchSize}
	for _, rows := range []int{scaleSmall, scaleLarge} {
		tpl, eligible, err := b.template(ctx, rows)
		if err != nil {
			return res, err
		}
		pt := scalePoint{rows: rows, eligible: eligible}
		for _, m := range []struct {
			c   contestant
			dst *outcome
		}{
			{contestant{key: "C", db: "scale_rail", name: "the rail, end to end", setup: b.railSetup(b.s.binDir, nil)}, &pt.rail},
			{contestant{key: "engine", db: "scale_fixed", name: "the engine, fixed batches", setup: b.engineSetup(defaults.BatchSize)}, &pt.fixed},
		} {
			b.logf("scale %d rows: %s", rows, m.c.name)
			o, err := b.measure(ctx, m.c, tpl, false)
			if err != nil {
				return res, fmt.Errorf("scale %d rows, %s: %w", rows, m.c.name, err)
			}
			if o.deleted != eligible {
				return res, fmt.Errorf("scale %d rows, %s: deleted %d rows, but %d were eligible", rows, m.c.name, o.deleted, eligible)
			}
			b.logf("scale %d rows: %s: %d rows in %s, %d batches, p50 %s", rows, m.c.name, o.deleted,
				o.elapsed.Round(time.Millisecond), len(o.batches), fmtDuration(percentile(o.batchDurations(), 0.5)))
			*m.dst = o
		}
		res.points = append(res.points, pt)
		if err := b.drop(ctx, tpl); err != nil {
			return res, err
		}
	}
	return res, nil
}

// engineSetup runs the sweep engine in this process with the API's default settings, except
// that every batch is size rows: adaptive sizing would move the batch toward BATCH_TARGET and
// hide a per-batch cost that grows with the table.
func (b *bench) engineSetup(size int) setupFunc {
	return func(ctx context.Context, dbURL string) (sweepFunc, func(), error) {
		cfg, err := apiDefaults()
		if err != nil {
			return nil, nil, err
		}
		pool, err := pgxpool.New(ctx, dbURL)
		if err != nil {
			return nil, nil, err
		}
		settings := sweep.Settings{
			Deadline: cfg.SweepDeadline, StatementTimeout: cfg.BatchStatementTimeout, LockTimeout: cfg.BatchLockTimeout,
			CountTimeout: cfg.CountTimeout, BatchSize: size, MinBatchSize: size, MaxBatchSize: size,
			BatchTarget: cfg.BatchTarget, MaxBatches: cfg.MaxBatches, Pause: cfg.BatchPause,
		}
		var logs lockedBuffer
		logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		runner, err := sweep.NewRunner(sweep.Config{Pool: pool, Specs: sweep.Catalog(), Settings: settings, Logger: logger})
		if err != nil {
			return nil, nil, err
		}
		run := func(ctx context.Context) (outcome, error) {
			var o outcome
			began := time.Now()
			// Again while truncated (MAX_BATCHES), as the rail's next ticks would.
			for o.runs = 1; ; o.runs++ {
				res, err := runner.Run(ctx, "notifications", sweep.Options{})
				if err != nil {
					return o, err
				}
				o.deleted += res.Deleted
				if res.Error != nil {
					return o, fmt.Errorf("run %d: %s: %s", o.runs, res.Error.Code, res.Error.Message)
				}
				if !res.Truncated || o.runs == maxCronRuns {
					break
				}
			}
			o.elapsed = time.Since(began)
			sc := bufio.NewScanner(bytes.NewReader(logs.bytes()))
			for sc.Scan() {
				if bt, ok := parseBatchLine(sc.Bytes()); ok {
					o.batches = append(o.batches, bt)
				}
			}
			return o, nil
		}
		return run, pool.Close, nil
	}
}

// lockedBuffer is a bytes.Buffer that a logger may write to from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf.Bytes())
}
