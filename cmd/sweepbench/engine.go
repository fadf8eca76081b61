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

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// The adaptive bounds `api serve` gives the runner (cmd/api's adaptiveMinBatchSize and
// adaptiveMaxBatchSize; docs/DESIGN.md's BATCH_TARGET row).
const (
	apiMinBatchSize = 100
	apiMaxBatchSize = 20_000
)

// riverSpec is queuePolicy as the engine takes it.
var riverSpec = policy.Spec{Name: queueSweep, Passes: []policy.Pass{{
	Name: "completed", Table: "river_job", AgeColumn: "finalized_at", Where: "t.state = 'completed'",
	Retention: 24 * time.Hour, Mode: policy.ModeBatched,
}}}

// engineSetup runs the sweep engine in this process on specs[0] with the API's default settings,
// adaptive batches included, on the access path path ("" chooses, as the API does), and change,
// when set, applied to the runner's configuration (fixedBatches, another clock): each path
// measured as the rail would run it, without the HTTP round trips and process starts around it.
func (b *bench) engineSetup(specs []policy.Spec, path sweep.Path, change func(*sweep.Config)) setupFunc {
	name := specs[0].Name
	return func(ctx context.Context, dbURL string) (sweepFunc, func(), error) {
		settings, err := engineSettings()
		if err != nil {
			return nil, nil, err
		}
		pool, err := pgxpool.New(ctx, dbURL)
		if err != nil {
			return nil, nil, err
		}
		var logs lockedBuffer
		logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		rc := sweep.Config{Pool: pool, Specs: specs, Settings: settings, Logger: logger, AccessPath: path}
		if change != nil {
			change(&rc)
		}
		runner, err := sweep.NewRunner(rc)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		// A first connection, so that the window does not time a connection setup the API's
		// warm pool would not pay either.
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, nil, err
		}
		run := func(ctx context.Context) (outcome, error) {
			var o outcome
			began := time.Now()
			// Again while truncated, as the rail's next ticks would.
			for o.runs = 1; ; o.runs++ {
				res, err := runner.Run(ctx, name, sweep.Options{})
				if err != nil {
					return o, err
				}
				o.deleted += res.Deleted
				o.archived += res.Archived
				for i, p := range res.Passes {
					o.lockRetries += p.LockRetries
					if i == 0 {
						o.path = p.Path
					}
				}
				if res.Error != nil {
					return o, fmt.Errorf("run %d: %s: %s", o.runs, res.Error.Code, res.Error.Message)
				}
				if !res.Truncated || o.runs == maxCronRuns {
					break
				}
			}
			o.elapsed = time.Since(began)
			sc := bufio.NewScanner(bytes.NewReader(logs.bytes()))
			sc.Buffer(make([]byte, 64<<10), 1<<20)
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

// engineSettings are the API's default settings as the runner takes them, adaptive batches
// included.
func engineSettings() (sweep.Settings, error) {
	cfg, err := apiDefaults()
	if err != nil {
		return sweep.Settings{}, err
	}
	return sweep.Settings{
		Deadline: cfg.SweepDeadline, StatementTimeout: cfg.BatchStatementTimeout, LockTimeout: cfg.BatchLockTimeout,
		CountTimeout: cfg.CountTimeout, BatchSize: cfg.BatchSize, MinBatchSize: apiMinBatchSize, MaxBatchSize: apiMaxBatchSize,
		BatchTarget: cfg.BatchTarget, MaxBatches: cfg.MaxBatches, Pause: cfg.BatchPause,
	}, nil
}

// fixedBatches makes every batch size rows: adaptive sizing would move the batch toward
// BATCH_TARGET and hide a per-batch cost that grows with the table.
func fixedBatches(size int) func(*sweep.Config) {
	return func(c *sweep.Config) {
		c.Settings.BatchSize, c.Settings.MinBatchSize, c.Settings.MaxBatchSize = size, size, size
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
