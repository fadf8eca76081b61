package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/config"
)

// batch is one transaction of a contestant: how many rows it deleted and how long it stayed
// open, from BEGIN to the end of COMMIT as the client saw it.
type batch struct {
	size int
	rows int64
	took time.Duration
	// partition names the partition a partitions-mode pass dropped in this step (rows unknown).
	partition string
	// path, blocks and retried are the rail's (its debug line): the batch's access path, a heap
	// batch's range in blocks, and whether it met a held row lock and ran again.
	path    string
	blocks  int
	retried bool
}

// outcome is what one contestant did on its copy of the table.
type outcome struct {
	key, name string
	deleted   int64
	elapsed   time.Duration
	batches   []batch
	// runs is how many sweepcron runs the rail took (C only).
	runs int
	// serverTime is the sum of the rail's answers' durationMs: the elapsed time minus the
	// process starts, discovery and HTTP (C only).
	serverTime time.Duration
	// peakRSS is the API process's VmHWM in bytes (C only).
	peakRSS int64
	fg      []time.Duration
	// wal is the bytes of WAL written during the window.
	wal int64
	// foreign is the share of the machine's CPU that other tenants used during the window.
	foreign float64

	// throttled sums the answers' throttledMs; partitions their partitionsDropped (rail only).
	throttled  time.Duration
	partitions int64
	// path is the access path the rail's answers named (the last run's first pass); lockRetries
	// sums their passes' lockRetries (C, and the engine in-process).
	path        string
	lockRetries int
	// archived sums the answers' archived (the engine in-process).
	archived int64
}

func (o outcome) rowsPerSec() float64 { return float64(o.deleted) / o.elapsed.Seconds() }

func (o outcome) batchDurations() []time.Duration {
	ds := make([]time.Duration, len(o.batches))
	for i, b := range o.batches {
		ds[i] = b.took
	}
	return ds
}

// sweepFunc deletes a contestant's eligible rows: it is what the window times.
type sweepFunc func(context.Context) (outcome, error)

// setupFunc prepares a contestant on its copy of the table before the window opens (connecting,
// booting the API) and returns its sweep and what undoes the setup.
type setupFunc func(ctx context.Context, dbURL string) (sweepFunc, func(), error)

// contestant deletes the eligible rows of one database its own way.
type contestant struct {
	// key labels the report's row; db names its copy of the template.
	key, db, name string
	setup         setupFunc
}

// The statements of A, A′ and B. A is what an operator types in psql; A′ is the same with the
// cutoff bound as a value, as a script or a driver sends it, which lets the planner see the cutoff
// and pick another plan; B is the batched shape of other tools, ordered by age.
const (
	monolithicSQL      = `DELETE FROM notifications WHERE read_at IS NOT NULL AND read_at < now() - interval '30 days'`
	monolithicBoundSQL = `DELETE FROM notifications WHERE read_at IS NOT NULL AND read_at < $1`
	orderedBatchSQL    = `DELETE FROM notifications WHERE id IN (
  SELECT id FROM notifications WHERE read_at IS NOT NULL AND read_at < $1
  ORDER BY read_at LIMIT $2 FOR UPDATE SKIP LOCKED)`
	cutoffSQL = `SELECT now() - interval '30 days'`
)

// connectOnly is a setup that opens one connection for a contestant that is plain SQL.
func connectOnly(run func(ctx context.Context, c *pgx.Conn) (outcome, error)) setupFunc {
	return func(ctx context.Context, dbURL string) (sweepFunc, func(), error) {
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context) (outcome, error) { return run(ctx, c) },
			func() { c.Close(context.Background()) }, nil
	}
}

// monolithicSQLRun is A over any table: one statement, as typed.
func monolithicSQLRun(query string) func(ctx context.Context, c *pgx.Conn) (outcome, error) {
	return func(ctx context.Context, c *pgx.Conn) (outcome, error) {
		began := time.Now()
		tag, err := c.Exec(ctx, query)
		took := time.Since(began)
		if err != nil {
			return outcome{}, fmt.Errorf("monolithic delete: %w", err)
		}
		return outcome{deleted: tag.RowsAffected(), elapsed: took, batches: []batch{{rows: tag.RowsAffected(), took: took}}}, nil
	}
}

// monolithicBoundRun is A′ over any table: the cutoff read first, then bound.
func monolithicBoundRun(query, cutoffQuery string) func(ctx context.Context, c *pgx.Conn) (outcome, error) {
	return func(ctx context.Context, c *pgx.Conn) (outcome, error) {
		var cutoff time.Time
		if err := c.QueryRow(ctx, cutoffQuery).Scan(&cutoff); err != nil {
			return outcome{}, err
		}
		began := time.Now()
		tag, err := c.Exec(ctx, query, cutoff)
		took := time.Since(began)
		if err != nil {
			return outcome{}, fmt.Errorf("monolithic delete: %w", err)
		}
		return outcome{deleted: tag.RowsAffected(), elapsed: took, batches: []batch{{rows: tag.RowsAffected(), took: took}}}, nil
	}
}

// orderedBatches is B with batches of size rows, until a batch comes back short. It commits
// synchronously, as those tools do: the server's default.
func orderedBatches(size int) func(ctx context.Context, c *pgx.Conn) (outcome, error) {
	return func(ctx context.Context, c *pgx.Conn) (outcome, error) {
		var cutoff time.Time
		if err := c.QueryRow(ctx, cutoffSQL).Scan(&cutoff); err != nil {
			return outcome{}, err
		}
		var o outcome
		began := time.Now()
		for {
			t0 := time.Now()
			var n int64
			err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
				tag, err := tx.Exec(ctx, orderedBatchSQL, cutoff, size)
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
	}
}

// sideResult is the side-by-side run: rounds of every contestant, back to back.
type sideResult struct {
	rows      int
	eligible  int64
	batchSize int
	rounds    []round
	elapsed   time.Duration
}

// round is the idle baseline and each contestant once, in that order.
type round struct {
	n               int
	baseline        []time.Duration
	baselineForeign float64
	contestants     []outcome
}

// How rounds are kept honest on a shared machine.
const (
	// maxForeign is the share of the machine other tenants may take during a window before its
	// round is called disturbed: 15% is a third of a core on two, well above what the kernel's
	// own I/O threads take for the bench on a quiet machine (0–2%).
	maxForeign = 0.15
	// maxRoundsFactor caps the rounds at this many times -rounds.
	maxRoundsFactor = 3
	// roundsBudget stops adding rounds after this long, so that make bench stays under ten
	// minutes at the default size even on a busy machine.
	roundsBudget = 6 * time.Minute
)

func (r round) maxForeign() float64 {
	m := r.baselineForeign
	for _, o := range r.contestants {
		m = max(m, o.foreign)
	}
	return m
}

func (r round) disturbed() bool { return r.maxForeign() > maxForeign }

// clean counts the undisturbed rounds.
func (r sideResult) clean() int {
	n := 0
	for _, rd := range r.rounds {
		if !rd.disturbed() {
			n++
		}
	}
	return n
}

// counted is the rounds the medians use: the clean ones, or every round when none was clean
// (the report says so).
func (r sideResult) counted() []round {
	var out []round
	for _, rd := range r.rounds {
		if !rd.disturbed() {
			out = append(out, rd)
		}
	}
	if len(out) == 0 {
		return r.rounds
	}
	return out
}

// apiDefaults is the API's configuration with nothing set but the database: the defaults C runs
// with, read from the config package so that the report cannot drift from them.
func apiDefaults() (config.API, error) {
	return config.LoadAPI(map[string]string{"DATABASE_URL": "postgres://localhost/unused"})
}

func (b *bench) sideBySide(ctx context.Context) (sideResult, error) {
	defaults, err := apiDefaults()
	if err != nil {
		return sideResult{}, err
	}
	res := sideResult{rows: b.s.rows, batchSize: defaults.BatchSize}
	tpl, eligible, err := b.template(ctx, b.s.rows)
	if err != nil {
		return res, err
	}
	res.eligible = eligible
	contestants := []contestant{
		{key: "A", db: "a", name: "monolithic `DELETE … read_at < now() - interval '30 days'`", setup: connectOnly(monolithicSQLRun(monolithicSQL))},
		{key: "A′", db: "a_bound", name: "monolithic `DELETE … read_at < $1` (cutoff bound)", setup: connectOnly(monolithicBoundRun(monolithicBoundSQL, cutoffSQL))},
		{key: "B", db: "b", name: fmt.Sprintf("`id IN (SELECT … ORDER BY read_at LIMIT %d FOR UPDATE SKIP LOCKED)`, a transaction per batch", res.batchSize),
			setup: connectOnly(orderedBatches(res.batchSize))},
		{key: "C", db: "c", name: "the rail: `api serve` (defaults) + `sweepcron --only notifications`", setup: b.railSetup(b.s.binDir, nil)},
	}
	if b.s.variantBin != "" || len(b.s.variantEnv) > 0 {
		bin, what := b.s.binDir, []string{}
		if b.s.variantBin != "" {
			bin = b.s.variantBin
			what = append(what, "api from `"+bin+"`")
		}
		if len(b.s.variantEnv) > 0 {
			what = append(what, "`"+strings.Join(b.s.variantEnv, " ")+"`")
		}
		contestants = append(contestants, contestant{key: "C′", db: "c_variant",
			name: "the rail with " + strings.Join(what, ", "), setup: b.railSetup(bin, b.s.variantEnv)})
	}
	// Rounds run until enough are clean (no window in which other tenants took more than
	// maxForeign of the machine), within a cap on rounds and on time: a disturbed round is kept
	// in the report's round list but left out of the medians.
	for n := 1; res.clean() < b.s.rounds && n <= maxRoundsFactor*b.s.rounds; n++ {
		if n > b.s.rounds && time.Since(b.began) > roundsBudget {
			b.logf("%s spent: no more rounds", roundsBudget)
			break
		}
		rd, err := b.round(ctx, n, tpl, eligible, contestants)
		if err != nil {
			return res, err
		}
		if rd.disturbed() {
			b.logf("round %d: disturbed (other tenants took up to %.0f%% of the machine): left out of the medians", n, 100*rd.maxForeign())
		}
		res.rounds = append(res.rounds, rd)
	}
	return res, b.drop(ctx, tpl)
}

func (b *bench) round(ctx context.Context, n int, tpl string, eligible int64, contestants []contestant) (round, error) {
	rd := round{n: n}
	var err error
	b.logf("round %d: foreground alone for %s (the idle baseline)", n, fgBaseline)
	if rd.baseline, rd.baselineForeign, err = b.baseline(ctx, tpl); err != nil {
		return rd, err
	}
	b.logf("round %d: idle foreground p99 %s, other tenants %.0f%% of the machine", n,
		fmtDuration(percentile(rd.baseline, 0.99)), 100*rd.baselineForeign)
	for _, c := range contestants {
		b.logf("round %d: %s: %s", n, c.key, c.name)
		o, err := b.measure(ctx, c, tpl, true)
		if err != nil {
			return rd, fmt.Errorf("%s: %w", c.key, err)
		}
		if o.deleted != eligible {
			return rd, fmt.Errorf("%s deleted %d rows, but %d were eligible", c.key, o.deleted, eligible)
		}
		b.logf("round %d: %s: %d rows in %s (%.0f rows/s), %d batches, foreground p99 %s, other tenants %.0f%% of the machine", n, c.key,
			o.deleted, o.elapsed.Round(time.Millisecond), o.rowsPerSec(), len(o.batches), fmtDuration(percentile(o.fg, 0.99)), 100*o.foreign)
		rd.contestants = append(rd.contestants, o)
	}
	return rd, nil
}

// baseline runs the foreground workload alone on a fresh copy, and reports the share of the
// machine other tenants used meanwhile.
func (b *bench) baseline(ctx context.Context, tpl string) ([]time.Duration, float64, error) {
	const name = "sweepbench_baseline"
	u, err := b.clone(ctx, name, tpl)
	if err != nil {
		return nil, 0, err
	}
	defer b.drop(context.WithoutCancel(ctx), name) //nolint:errcheck // best effort; the next run drops it too
	if err := b.checkpoint(ctx); err != nil {
		return nil, 0, err
	}
	fg, err := startForeground(ctx, u)
	if err != nil {
		return nil, 0, err
	}
	time.Sleep(fgWarmup)
	cpu0, err0 := b.cpu.sample()
	from := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(fgBaseline):
	}
	to := time.Now()
	cpu1, err1 := b.cpu.sample()
	lats, err := fg.stop(from, to)
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	return lats, b.cpu.foreign(cpu0, cpu1), errors.Join(err, err0, err1)
}

// measure runs one contestant on a fresh copy of tpl, with the foreground workload around it
// when withFG is set.
func (b *bench) measure(ctx context.Context, c contestant, tpl string, withFG bool) (outcome, error) {
	name := "sweepbench_" + c.db
	u, err := b.clone(ctx, name, tpl)
	if err != nil {
		return outcome{}, err
	}
	defer b.drop(context.WithoutCancel(ctx), name) //nolint:errcheck // best effort; the next run drops it too
	if err := b.checkpoint(ctx); err != nil {
		return outcome{}, err
	}
	sweep, cleanup, err := c.setup(ctx, u)
	if err != nil {
		return outcome{}, err
	}
	o, mark, err := b.window(ctx, u, sweep, withFG)
	cleanup()
	if err != nil {
		return o, err
	}
	o.key, o.name = c.key, c.name
	return o, b.addWAL(ctx, &o, mark)
}

// window runs sweep, with the foreground around it when withFG is set, and returns where the
// WAL stood when it started.
func (b *bench) window(ctx context.Context, dbURL string, sweep sweepFunc, withFG bool) (outcome, int64, error) {
	var fg *fgRun
	if withFG {
		var err error
		if fg, err = startForeground(ctx, dbURL); err != nil {
			return outcome{}, 0, err
		}
		time.Sleep(fgWarmup)
	}
	mark, err := b.walPosition(ctx)
	var o outcome
	cpu0, cpuErr := b.cpu.sample()
	from := time.Now()
	if err == nil && cpuErr == nil {
		o, err = sweep(ctx)
	}
	to := time.Now()
	cpu1, cpuErr1 := b.cpu.sample()
	err = errors.Join(err, cpuErr, cpuErr1)
	o.foreign = b.cpu.foreign(cpu0, cpu1)
	if fg != nil {
		lats, fgErr := fg.stop(from, to)
		o.fg = lats
		err = errors.Join(err, fgErr)
	}
	return o, mark, err
}

// addWAL sets o.wal to the WAL written since mark.
func (b *bench) addWAL(ctx context.Context, o *outcome, mark int64) error {
	pos, err := b.walPosition(ctx)
	if err != nil {
		return err
	}
	o.wal = pos - mark
	return nil
}
