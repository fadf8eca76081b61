package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
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

// outcome is what one contestant did on its copy of the table. The rail's fields (runs,
// serverTime, peakRSS, throttled, partitions) are zero for plain SQL.
type outcome struct {
	key, name string
	deleted   int64
	elapsed   time.Duration
	batches   []batch
	// runs is how many sweepcron runs (or engine runs in-process) the rail took.
	runs int
	// serverTime sums the answers' durationMs: the elapsed time minus process starts and HTTP.
	serverTime time.Duration
	// peakRSS is the API process's VmHWM in bytes.
	peakRSS int64
	fg      []time.Duration
	// wal is the bytes of WAL written during the window, cluster-wide.
	wal int64
	// foreign is the share of the machine's CPU that other tenants used during the window.
	foreign float64
	// writeback is how long the kernel took to write back what was dirty at the window's end
	// (probe.writeback).
	writeback time.Duration
	// waits is the share of the window some task spent waiting for a core, and for I/O.
	waits waits
	// throttled sums the answers' throttledMs; partitions their partitionsDropped.
	throttled  time.Duration
	partitions int64
	// path is the access path the answers named (the last run's first pass); lockRetries sums
	// their passes' lockRetries; archived their archived rows.
	path        string
	lockRetries int
	archived    int64
	// What the replica and partitions runs add (zero elsewhere).
	lagStats
	partStats
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

// sqlSetup is the setup of a contestant that is plain SQL on one connection. cutoffQuery, when
// set, is read before the window and bound as run's argument: the cutoff a script computes.
func sqlSetup(cutoffQuery string, run func(ctx context.Context, c *pgx.Conn, cutoff []any) (outcome, error)) setupFunc {
	return func(ctx context.Context, dbURL string) (sweepFunc, func(), error) {
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return nil, nil, err
		}
		var args []any
		if cutoffQuery != "" {
			var cutoff time.Time
			if err := c.QueryRow(ctx, cutoffQuery).Scan(&cutoff); err != nil {
				c.Close(ctx)
				return nil, nil, err
			}
			args = append(args, cutoff)
		}
		return func(ctx context.Context) (outcome, error) { return run(ctx, c, args) },
			func() { c.Close(context.Background()) }, nil
	}
}

// monolithic is A (cutoffQuery "") or A′ over any table: one statement, one transaction.
func monolithic(query, cutoffQuery string) setupFunc {
	return sqlSetup(cutoffQuery, func(ctx context.Context, c *pgx.Conn, args []any) (outcome, error) {
		began := time.Now()
		tag, err := c.Exec(ctx, query, args...)
		took := time.Since(began)
		if err != nil {
			return outcome{}, fmt.Errorf("monolithic delete: %w", err)
		}
		return outcome{deleted: tag.RowsAffected(), elapsed: took, batches: []batch{{rows: tag.RowsAffected(), took: took}}}, nil
	})
}

// orderedBatches is B with batches of size rows, until a batch comes back short. It commits
// synchronously, as those tools do: the server's default.
func orderedBatches(size int) setupFunc { return windowedBatches(size, 0) }

// round is each contestant once, after the idle baseline when the run has a foreground.
type round struct {
	n               int
	baseline        []time.Duration
	baselineForeign float64
	// baselineWaits are the idle baseline's waits, where a run measures them.
	baselineWaits waits
	contestants   []outcome
}

// rounds is a run's rounds (of one table), in order.
type rounds []round

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
func (rs rounds) clean() int { return len(rs.undisturbed()) }

func (rs rounds) undisturbed() rounds {
	var out rounds
	for _, rd := range rs {
		if !rd.disturbed() {
			out = append(out, rd)
		}
	}
	return out
}

// counted is the rounds the medians use: the clean ones, or every round when none was clean
// (the report says so).
func (rs rounds) counted() rounds {
	if out := rs.undisturbed(); len(out) > 0 {
		return out
	}
	return rs
}

// addRounds runs one(n) for n = 1, 2, … until enough says so or roundsCap is reached; past
// -rounds it stops adding rounds once budget has passed since began.
func (b *bench) addRounds(what string, began time.Time, budget time.Duration, enough func() bool, one func(n int) error) error {
	for n := 1; !enough() && n <= b.roundsCap(); n++ {
		if n > b.s.rounds && time.Since(began) > budget {
			b.logf("%s: %s spent: no more rounds", what, budget)
			break
		}
		if err := one(n); err != nil {
			return err
		}
	}
	return nil
}

// roundsCap is how many rounds a run that adds rounds for disturbed ones may take.
func (b *bench) roundsCap() int {
	if b.s.roundsCap > 0 {
		return b.s.roundsCap
	}
	return maxRoundsFactor * b.s.rounds
}

// apiDefaults is the API's configuration with nothing set but the database: the defaults C runs
// with, read from the config package so that the report cannot drift from them.
func apiDefaults() (config.API, error) {
	return config.LoadAPI(map[string]string{"DATABASE_URL": "postgres://localhost/unused"})
}

// baseline runs the foreground workload alone on a fresh copy, and reports the share of the
// machine other tenants used meanwhile.
func (b *bench) baseline(ctx context.Context, tpl string) ([]time.Duration, float64, error) {
	o, err := b.measure(ctx, contestant{db: "baseline", setup: idleSetup(fgBaseline)}, tpl, probe{fg: true})
	return o.fg, o.foreign, err
}

// probe is what a run adds around one contestant's window, beyond the fresh copy, the checkpoint
// and the sweep.
type probe struct {
	// fg runs the foreground workload around the window.
	fg bool
	// writeback starts the window with nothing dirty and ends it with the kernel writing back
	// every dirty page (sync(2)), the foreground still running: what the contestant left dirty
	// is paid for in its window, not after it, when dropping its copy would discard it
	// unwritten.
	writeback bool
	// ready runs after the checkpoint, before the contestant's setup.
	ready func(ctx context.Context) error
	// watch starts just before the window; what it returns runs just after it.
	watch func(ctx context.Context) (func(o *outcome) error, error)
	// check inspects the copy after the window, before it is dropped.
	check func(ctx context.Context, dbURL string, o *outcome) error
}

// measure runs one contestant on a fresh copy of tpl, within p.
func (b *bench) measure(ctx context.Context, c contestant, tpl string, p probe) (outcome, error) {
	name := "sweepbench_" + c.db
	u, err := b.clone(ctx, name, tpl)
	if err != nil {
		return outcome{}, err
	}
	defer b.drop(context.WithoutCancel(ctx), name) //nolint:errcheck // best effort; the next run drops it too
	if err := b.checkpoint(ctx); err != nil {
		return outcome{}, err
	}
	if p.ready != nil {
		if err := p.ready(ctx); err != nil {
			return outcome{}, err
		}
	}
	sweep, cleanup, err := c.setup(ctx, u)
	if err != nil {
		return outcome{}, err
	}
	stop := func(*outcome) error { return nil }
	if p.watch != nil {
		if stop, err = p.watch(ctx); err != nil {
			cleanup()
			return outcome{}, err
		}
	}
	o, mark, err := b.window(ctx, u, sweep, p)
	err = errors.Join(err, stop(&o))
	cleanup()
	if err != nil {
		return o, err
	}
	o.key, o.name = c.key, c.name
	pos, err := b.walPosition(ctx)
	if err != nil {
		return o, err
	}
	o.wal = pos - mark
	if p.check != nil {
		err = p.check(ctx, u, &o)
	}
	return o, err
}

// contest is measure for a run's round: logged, labelled with what, and failed when the
// contestant deleted other than want rows (want < 0: the run checks for itself).
func (b *bench) contest(ctx context.Context, what string, c contestant, tpl string, p probe, want int64) (outcome, error) {
	b.logf("%s: %s: %s", what, c.key, c.name)
	o, err := b.measure(ctx, c, tpl, p)
	if err != nil {
		return o, fmt.Errorf("%s, %s: %w", what, c.key, err)
	}
	if want >= 0 && o.deleted != want {
		return o, fmt.Errorf("%s, %s: deleted %d rows, want %d", what, c.key, o.deleted, want)
	}
	b.logf("%s: %s: %d rows in %s (%.0f rows/s), %d batches %s, foreground p99 %s, other tenants %.0f%%, writeback %s", what, c.key, o.deleted,
		o.elapsed.Round(time.Millisecond), o.rowsPerSec(), len(o.batches), o.path, fmtDuration(percentile(o.fg, 0.99)), 100*o.foreign,
		fmtDuration(o.writeback))
	return o, nil
}

// window runs sweep, with the foreground around it when p.fg is set and the writeback after it
// when p.writeback is, and returns where the WAL stood when it started.
func (b *bench) window(ctx context.Context, dbURL string, sweep sweepFunc, p probe) (outcome, int64, error) {
	if p.writeback {
		// The window starts with nothing dirty in the kernel's page cache: what the clone, the
		// contestant before or another process left is no writeback of this contestant's, and
		// the sync at the window's end would charge it.
		syscall.Sync()
	}
	var fg *fgRun
	if p.fg {
		var err error
		if fg, err = startForeground(ctx, dbURL); err != nil {
			return outcome{}, 0, err
		}
		time.Sleep(fgWarmup)
	}
	mark, err := b.walPosition(ctx)
	var o outcome
	cpu0, cpuErr := b.cpu.sample()
	stalls0 := readStalls()
	from := time.Now()
	if err == nil && cpuErr == nil {
		o, err = sweep(ctx)
	}
	if p.writeback && err == nil {
		t0 := time.Now()
		syscall.Sync()
		o.writeback = time.Since(t0)
	}
	to := time.Now()
	o.waits = waitsBetween(stalls0, readStalls(), to.Sub(from))
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
