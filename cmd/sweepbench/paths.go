package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// The paths run: the engine's access paths on four tables, each path on each, with the
// foreground around every contestant, in rounds.
//
//	dense   today's notifications (-rows, 80% eligible, heap in age order)
//	sparse  notifications with 1% eligible, scattered (-sparse-rows)
//	queue   River's river_job, its (state, finalized_at) index, a backlog of completed jobs (-rows)
//	locked  the dense table while a transaction holds row locks on lockedRows eligible rows
//
// On each: A and A′ (the monolithic DELETE, typed and with the cutoff bound; not on the locked
// table, where they would wait for the holder), C (the rail end to end, choosing its path), and
// the engine in-process on each path forced (heap, index).

// lockedRows is how many eligible rows the locked table's holder keeps locked, spread evenly over
// the eligible rows: each should cost the batch that meets it one retry, skipping it.
const lockedRows = 8

// The paths run's targets (issue 16).
const (
	targetDenseVsBound  = 0.8 // C's rows/s against A′'s on the dense table
	targetSparseVsTyped = 0.8 // against A's on the sparse one
	targetPathsFG       = 1.5 // foreground p99 against idle
)

// pathsRoundsBudget stops adding rounds past this long into the paths run.
const pathsRoundsBudget = 15 * time.Minute

// pathTable is one table of the paths run and its contestants.
type pathTable struct {
	key, title  string
	tpl         string
	rows        int
	eligible    int64
	held        int
	contestants []contestant
}

// pathsResult is the paths run: for each table, its rounds (the round's baseline shared by the
// tables).
type pathsResult struct {
	tables  []pathTable
	rounds  map[string][]round
	elapsed time.Duration
}

// counted returns a table's result as a sideResult, whose medians and filters apply as they are.
func (r pathsResult) of(key string) sideResult {
	return sideResult{rounds: r.rounds[key]}
}

func (b *bench) pathsRun(ctx context.Context) (pathsResult, error) {
	began := time.Now()
	res := pathsResult{rounds: map[string][]round{}}
	dir, err := os.MkdirTemp("", "sweepbench-paths-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	queuePolicyFile := filepath.Join(dir, "river.yaml")
	if err := os.WriteFile(queuePolicyFile, []byte(queuePolicy), 0o600); err != nil {
		return res, err
	}
	notifications := []policy.Spec{catalogSpec("notifications")}
	river := []policy.Spec{riverSpec}

	denseTpl, denseEligible, err := b.template(ctx, b.s.rows)
	if err != nil {
		return res, err
	}
	sparseTpl, sparseEligible, err := b.sparseTemplate(ctx, b.s.sparseRows)
	if err != nil {
		return res, err
	}
	queueTpl, queueEligible, err := b.queueTemplate(ctx, b.s.rows)
	if err != nil {
		return res, err
	}
	defer func() {
		for _, tpl := range []string{denseTpl, sparseTpl, queueTpl} {
			_ = b.drop(context.WithoutCancel(ctx), tpl)
		}
	}()

	monolithicOn := func(typed, bound, cutoff string) []contestant {
		return []contestant{
			{key: "A", db: "p_a", name: "monolithic `DELETE`, cutoff typed as `now() - interval`", setup: connectOnly(monolithicSQLRun(typed))},
			{key: "A′", db: "p_a_bound", name: "monolithic `DELETE`, cutoff bound", setup: connectOnly(monolithicBoundRun(bound, cutoff))},
		}
	}
	railOn := func(specs []policy.Spec, name string, env []string) []contestant {
		return []contestant{
			{key: "C", db: "p_c", name: "the rail end to end (`api serve` + `sweepcron`), path chosen", setup: b.railSetupSweep(b.s.binDir, name, env)},
			{key: "heap", db: "p_heap", name: "the engine in-process, heap path forced", setup: b.pathEngineSetup(specs, name, sweep.PathHeap)},
			{key: "index", db: "p_index", name: "the engine in-process, index path forced", setup: b.pathEngineSetup(specs, name, sweep.PathIndex)},
		}
	}
	locked := railOn(notifications, "notifications", nil)
	for i := range locked {
		locked[i].db += "_locked"
		locked[i].setup = holdingLocks(locked[i].setup, lockedRows)
	}
	res.tables = []pathTable{
		{key: "dense", title: "dense: notifications, 80% eligible", tpl: denseTpl, rows: b.s.rows, eligible: denseEligible,
			contestants: append(monolithicOn(monolithicSQL, monolithicBoundSQL, cutoffSQL), railOn(notifications, "notifications", nil)...)},
		{key: "sparse", title: "sparse: notifications, 1% eligible, scattered", tpl: sparseTpl, rows: b.s.sparseRows, eligible: sparseEligible,
			contestants: append(monolithicOn(monolithicSQL, monolithicBoundSQL, cutoffSQL), railOn(notifications, "notifications", nil)...)},
		{key: "queue", title: "queue: River's river_job, (state, finalized_at) index", tpl: queueTpl, rows: b.s.rows, eligible: queueEligible,
			contestants: append(monolithicOn(queueMonolithicSQL, queueBoundSQL, queueCutoffSQL),
				railOn(river, queueSweep, []string{"SWEEP_POLICY_FILE=" + queuePolicyFile})...)},
		{key: "locked", title: fmt.Sprintf("locked: the dense table, %d eligible rows held by a transaction", lockedRows), tpl: denseTpl,
			rows: b.s.rows, eligible: denseEligible, held: lockedRows, contestants: locked},
	}

	enough := func() bool {
		for _, t := range res.tables {
			if res.of(t.key).clean() < b.s.rounds {
				return false
			}
		}
		return true
	}
	for n := 1; !enough() && n <= b.roundsCap(); n++ {
		if n > b.s.rounds && time.Since(began) > pathsRoundsBudget {
			b.logf("paths: %s spent: no more rounds", pathsRoundsBudget)
			break
		}
		b.logf("paths round %d: foreground alone for %s (the idle baseline)", n, fgBaseline)
		baseline, foreign, err := b.baseline(ctx, denseTpl)
		if err != nil {
			return res, err
		}
		for _, t := range res.tables {
			rd := round{n: n, baseline: baseline, baselineForeign: foreign}
			want := t.eligible - int64(t.held)
			for _, c := range t.contestants {
				b.logf("paths round %d: %s: %s: %s", n, t.key, c.key, c.name)
				o, err := b.measure(ctx, c, t.tpl, true)
				if err != nil {
					return res, fmt.Errorf("paths, %s, %s: %w", t.key, c.key, err)
				}
				if o.deleted != want {
					return res, fmt.Errorf("paths, %s, %s: deleted %d rows, want %d (%d eligible, %d held)", t.key, c.key, o.deleted, want, t.eligible, t.held)
				}
				b.logf("paths round %d: %s: %s: %d rows in %s (%.0f rows/s), path %s, %d batches, %d lock retries, foreground p99 %s, other tenants %.0f%%",
					n, t.key, c.key, o.deleted, o.elapsed.Round(time.Millisecond), o.rowsPerSec(), o.path, len(o.batches), o.lockRetries,
					fmtDuration(percentile(o.fg, 0.99)), 100*o.foreign)
				rd.contestants = append(rd.contestants, o)
			}
			if rd.disturbed() {
				b.logf("paths round %d: %s disturbed (other tenants took up to %.0f%%): left out of its medians", n, t.key, 100*rd.maxForeign())
			}
			res.rounds[t.key] = append(res.rounds[t.key], rd)
		}
	}
	res.elapsed = time.Since(began)
	return res, nil
}

// catalogSpec is the bundled catalog's sweep name.
func catalogSpec(name string) policy.Spec {
	for _, s := range policy.Catalog() {
		if s.Name == name {
			return s
		}
	}
	panic("sweepbench: no sweep " + name + " in the catalog")
}

// holdingLocks wraps a contestant's setup with a transaction that locks n eligible notifications,
// spread evenly over them (FOR NO KEY UPDATE, as an UPDATE of the row would), before the window
// opens, and rolls back after it closes: the foreground transaction the sweep must go around.
func holdingLocks(setup setupFunc, n int) setupFunc {
	return func(ctx context.Context, dbURL string) (sweepFunc, func(), error) {
		holder, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return nil, nil, err
		}
		tx, err := holder.Begin(ctx)
		if err == nil {
			var rows pgx.Rows
			rows, err = tx.Query(ctx, `
WITH e AS (SELECT id, row_number() OVER (ORDER BY id) AS rn, count(*) OVER () AS total
             FROM notifications WHERE read_at IS NOT NULL AND read_at < now() - interval '30 days')
SELECT n.id FROM notifications n
 WHERE n.id IN (SELECT id FROM e WHERE rn % (total / $1) = total / $1 / 2 ORDER BY id LIMIT $1)
 FOR NO KEY UPDATE`, n)
			if err == nil {
				var ids []int64
				if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err == nil && len(ids) != n {
					err = fmt.Errorf("%d rows locked, want %d", len(ids), n)
				}
			}
		}
		if err != nil {
			holder.Close(ctx)
			return nil, nil, fmt.Errorf("hold row locks: %w", err)
		}
		run, cleanup, err := setup(ctx, dbURL)
		if err != nil {
			holder.Close(ctx)
			return nil, nil, err
		}
		return run, func() {
			cleanup()
			holder.Close(context.Background()) // rolls the holder back
		}, nil
	}
}
