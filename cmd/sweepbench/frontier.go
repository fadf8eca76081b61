package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The frontier run: on the dense notifications table, each contestant (B, the rail at its
// defaults, at 1 ms batches, under MAX_WAL_RATE of 8, 16 and 32 MiB/s, and batches that flush
// their own WAL, compressed, with writeback hints: 1 and 1.5 ms ones alone, 2 ms ones under
// 64 MiB/s, and those again without the hints) drains beside the foreground for -window
// (30 s: 12,000 operations) or until nothing is left; the idle baseline is the foreground alone
// for as long. Each p99 gets a block-bootstrap 95% interval
// (frontier_stats.go); the server's WAL is sampled every 100 ms for its one-second windows;
// frontier_report.go picks the gentle setting from them.

// frontierSetting is one setting of the rail the frontier run measures: its key, the
// environment it adds to the API's defaults, what it is, and its WAL budget (0: none).
type frontierSetting struct {
	key    string
	env    []string
	what   string
	budget int64
}

// method is the wal_compression the setting's BATCH_WAL_COMPRESSION names, without which the
// server refuses it; "" for none.
func (s frontierSetting) method() string {
	for _, kv := range s.env {
		if m, ok := strings.CutPrefix(kv, "BATCH_WAL_COMPRESSION="); ok {
			return m
		}
	}
	return ""
}

const mib = 1 << 20

// frontierSettings are the rail's settings on the frontier, from the defaults to the gentlest.
var frontierSettings = []frontierSetting{
	{"C", nil, "defaults", 0},
	{"C·1", []string{"BATCH_TARGET=1ms", "BATCH_SIZE=100"}, "1 ms batches, from 100 rows", 0},
	{"W32", []string{"MAX_WAL_RATE=32MiB"}, "at most 32 MiB/s of WAL", 32 * mib},
	{"W16", []string{"MAX_WAL_RATE=16MiB"}, "at most 16 MiB/s of WAL", 16 * mib},
	{"W8", []string{"MAX_WAL_RATE=8MiB"}, "at most 8 MiB/s of WAL", 8 * mib},
	{"C·1 SZF", gentleEnv("1ms", ""), "1 ms batches, " + gentleWhat, 0},
	{"C·1.5 SZF", gentleEnv("1500us", ""), "1.5 ms batches, " + gentleWhat, 0},
	{"C·2 SZF W64", gentleEnv("2ms", "64MiB"), "2 ms batches, " + gentleWhat + ", at most 64 MiB/s of WAL", 64 * mib},
	// The same without the writeback hints, beside it: what they are worth.
	{"C·2 SZ W64", slices.DeleteFunc(gentleEnv("2ms", "64MiB"), isFlushAfter),
		"2 ms batches, " + gentleSZ + ", at most 64 MiB/s of WAL", 64 * mib},
}

// isFlushAfter reports whether kv sets BATCH_FLUSH_AFTER.
func isFlushAfter(kv string) bool { return strings.HasPrefix(kv, "BATCH_FLUSH_AFTER=") }

// gentleWhat says what gentleEnv sets besides the batch target and the budget; gentleSZ is it
// without the writeback hints.
const (
	gentleSZ   = "each flushing its own WAL (S), lz4 page images (Z)"
	gentleWhat = gentleSZ + ", the pages it writes hinted to the kernel every 256 KiB (F)"
)

// gentleEnv is a gentle candidate's environment: batches of target from 100 rows, each waiting
// for its own WAL flush rather than leaving it to the foreground's next commit, their full-page
// images compressed with lz4, the pages their backend writes out handed to the kernel's
// writeback as they go rather than in one burst, under a WAL budget ("": none).
func gentleEnv(target, budget string) []string {
	env := []string{"BATCH_TARGET=" + target, "BATCH_SIZE=100", "BATCH_SYNC_COMMIT=true", "BATCH_WAL_COMPRESSION=lz4",
		"BATCH_FLUSH_AFTER=256KiB"}
	if budget != "" {
		env = append(env, "MAX_WAL_RATE="+budget)
	}
	return env
}

// The frontier's targets: a setting's foreground p99 (its interval's upper end) within
// gentleOverIdle × the idle p99, at gentleVsBatched × B's rows/s or more, in the same rounds.
const (
	gentleOverIdle  = 1.3
	gentleVsBatched = 5.0
	// frontierWALEvery is how often the WAL position is sampled during a window.
	frontierWALEvery = 100 * time.Millisecond
)

// frontierResult is the frontier run: rounds of every contestant, back to back, and the WAL
// each wrote in every one-second window of its windows, by key.
type frontierResult struct {
	rows      int
	eligible  int64
	batchSize int
	window    time.Duration
	rounds    rounds
	budgets   map[string]int64
	walRates  map[string][]float64
}

func (b *bench) frontierRun(ctx context.Context) (frontierResult, error) {
	defaults, err := apiDefaults()
	if err != nil {
		return frontierResult{}, err
	}
	res := frontierResult{rows: b.s.rows, batchSize: defaults.BatchSize, window: b.s.window,
		budgets: map[string]int64{}, walRates: map[string][]float64{}}
	seed := b.template
	if b.s.keepTemplate {
		seed = b.keptTemplate
	}
	tpl, eligible, err := seed(ctx, dense, b.s.rows)
	if err != nil {
		return res, err
	}
	res.eligible = eligible
	contestants := []contestant{{key: "B", db: "f_b", name: fmt.Sprintf("`id IN (… LIMIT %d)` loop, for %s at most", res.batchSize, fmtDuration(res.window)),
		setup: windowedBatches(res.batchSize, res.window)}}
	// One run of the rail, as long as the window: the budget ends it, or the backlog does, never
	// the batch cap (1 ms batches reach the default's 1000 in a few seconds).
	windowEnv := []string{"SWEEP_DEADLINE=" + res.window.String(), "MAX_BATCHES=1000000"}
	methods, err := b.walCompressions(ctx)
	if err != nil {
		return res, err
	}
	for i, s := range frontierSettings {
		if len(b.s.only) > 0 && !slices.Contains(b.s.only, s.key) {
			continue
		}
		if m := s.method(); m != "" && !slices.Contains(methods, m) {
			b.logf("frontier: %s left out: the server takes no wal_compression %s (it takes %s)", s.key, m, strings.Join(methods, ", "))
			continue
		}
		name := "the rail, " + s.what
		if len(s.env) > 0 {
			name += ": `" + strings.Join(s.env, " ") + "`"
		}
		res.budgets[s.key] = s.budget
		contestants = append(contestants, contestant{key: s.key, db: fmt.Sprintf("f_c%d", i), name: name,
			setup: b.onceSetup(b.railSetup(b.s.binDir, "notifications", slices.Concat(windowEnv, s.env)))})
	}
	if v, ok := b.variant("f_variant", "notifications", windowEnv); ok {
		v.setup = b.onceSetup(v.setup)
		contestants = append(contestants, v)
	}
	// Last in each round, the foreground alone once more, measured as a contestant is: what the
	// measurement moves by itself, against which the targets' 1.3 × is read.
	contestants = append(contestants, contestant{key: idleAgainKey, db: "f_idle",
		name: "the foreground alone again, at the round's end: no sweep", setup: idleSetup(res.window)})
	for n := 1; n <= b.s.rounds; n++ {
		what := fmt.Sprintf("frontier round %d", n)
		rd := round{n: n}
		// As long as a contestant's window: the idle p99 the targets divide by is estimated
		// from as many operations as the p99s divided.
		b.logf("%s: foreground alone for %s (the idle baseline)", what, res.window)
		idle, err := b.idleFor(ctx, tpl, res.window)
		if err != nil {
			return res, err
		}
		rd.baseline, rd.baselineForeign, rd.baselineWaits = idle.fg, idle.foreign, idle.waits
		for _, c := range contestants {
			o, err := b.contest(ctx, what, c, tpl, b.walProbe(res.walRates, c.key), -1)
			if err != nil {
				return res, err
			}
			rd.contestants = append(rd.contestants, o)
		}
		res.rounds = append(res.rounds, rd)
	}
	if b.s.keepTemplate {
		return res, nil
	}
	return res, b.drop(ctx, tpl)
}

// walCompressions are the wal_compression values the server takes: PostgreSQL 14's is a
// boolean; from 15 it lists the methods the server was built with.
func (b *bench) walCompressions(ctx context.Context) ([]string, error) {
	var methods []string
	err := b.admin.QueryRow(ctx, `SELECT coalesce(enumvals, '{on,off}') FROM pg_settings WHERE name = 'wal_compression'`).Scan(&methods)
	if err != nil {
		return nil, fmt.Errorf("read the server's wal_compression methods: %w", err)
	}
	return methods, nil
}

// onceSetup makes a rail contestant stop after one sweepcron run, truncated or not: the window
// is that run's budget.
func (b *bench) onceSetup(setup setupFunc) setupFunc {
	return func(ctx context.Context, dbURL string) (sweepFunc, func(), error) {
		sweep, cleanup, err := setup(ctx, dbURL)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context) (outcome, error) { return sweep(withOneRun(ctx)) }, cleanup, nil
	}
}

// oneRunKey marks a context whose rail contestant stops after one sweepcron run.
type oneRunKey struct{}

func withOneRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, oneRunKey{}, true)
}

// oneRun reports whether ctx asks sweepRail for one run only.
func oneRun(ctx context.Context) bool { v, _ := ctx.Value(oneRunKey{}).(bool); return v }

// idleAgainKey labels the frontier's last contestant of each round: the foreground alone again.
const idleAgainKey = "I′"

// idleFor runs the foreground alone for d on a fresh copy of tpl: the idle baseline.
func (b *bench) idleFor(ctx context.Context, tpl string, d time.Duration) (outcome, error) {
	return b.measure(ctx, contestant{db: "baseline", setup: idleSetup(d)}, tpl, probe{fg: true, writeback: true})
}

// idleSetup is a contestant that deletes nothing for d: the foreground alone.
func idleSetup(d time.Duration) setupFunc {
	return func(context.Context, string) (sweepFunc, func(), error) {
		return func(ctx context.Context) (outcome, error) {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
			return outcome{elapsed: d}, ctx.Err()
		}, func() {}, nil
	}
}

// windowedBatches is B, stopped after window (0: never) if rows are left: the loop of other
// tools, committing synchronously, as they do.
func windowedBatches(size int, window time.Duration) setupFunc {
	return sqlSetup(cutoffSQL, func(ctx context.Context, c *pgx.Conn, cutoff []any) (outcome, error) {
		var o outcome
		began := time.Now()
		for window == 0 || time.Since(began) < window {
			t0 := time.Now()
			var n int64
			err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
				tag, err := tx.Exec(ctx, orderedBatchSQL, cutoff[0], size)
				n = tag.RowsAffected()
				return err
			})
			if err != nil {
				return o, fmt.Errorf("batch %d: %w", len(o.batches)+1, err)
			}
			o.batches = append(o.batches, batch{size: size, rows: n, took: time.Since(t0)})
			o.deleted += n
			if n < int64(size) {
				break
			}
		}
		o.elapsed = time.Since(began)
		return o, nil
	})
}

// walProbe samples the server's WAL position every frontierWALEvery through a connection of
// its own during the window, and adds the WAL of each one-second window to rates[key].
func (b *bench) walProbe(rates map[string][]float64, key string) probe {
	return probe{fg: true, writeback: true, watch: func(ctx context.Context) (func(*outcome) error, error) {
		c, err := pgx.Connect(ctx, b.s.databaseURL)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan []int64)
		go func() {
			var pos []int64
			tick := time.NewTicker(frontierWALEvery)
			defer tick.Stop()
			for {
				var p int64
				if err := c.QueryRow(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&p); err == nil {
					pos = append(pos, p)
				}
				select {
				case <-ctx.Done():
					done <- pos
					return
				case <-tick.C:
				}
			}
		}()
		return func(*outcome) error {
			cancel()
			pos := <-done
			c.Close(context.Background())
			rates[key] = append(rates[key], secondWindows(pos, int(time.Second/frontierWALEvery))...)
			return nil
		}, nil
	}}
}
