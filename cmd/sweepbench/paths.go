package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
// On each: A and A′ (the monolithic DELETE; not on the locked table, where they would wait), C
// (the rail end to end), the engine on each path forced, and C′ with -variant-env or -variant-bin.

// lockedRows is how many eligible rows the locked table's holder keeps locked, spread evenly over
// the eligible rows: each should cost the batch that meets it one retry, skipping it.
const lockedRows = 8

// The paths run's targets for C.
const (
	targetDenseVsBound  = 0.8 // rows/s against A′'s on the dense table
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
	tables []pathTable
	rounds map[string]rounds
}

func (b *bench) pathsRun(ctx context.Context) (pathsResult, error) {
	began := time.Now()
	res := pathsResult{rounds: map[string]rounds{}}
	dir, err := os.MkdirTemp("", "sweepbench-paths-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	queuePolicyFile := filepath.Join(dir, "river.yaml")
	if err := os.WriteFile(queuePolicyFile, []byte(queuePolicy), 0o600); err != nil {
		return res, err
	}
	var tpls [3]string
	var eligible [3]int64
	for i, t := range []struct {
		spec tableSpec
		rows int
	}{{dense, b.s.rows}, {sparse, b.s.sparseRows}, {queue, b.s.rows}} {
		if tpls[i], eligible[i], err = b.template(ctx, t.spec, t.rows); err != nil {
			return res, err
		}
		defer b.drop(context.WithoutCancel(ctx), tpls[i]) //nolint:errcheck // best effort; the next run drops it too
	}
	monolithicOn := func(typed, bound, cutoff string) []contestant {
		return []contestant{
			{key: "A", db: "p_a", name: "monolithic `DELETE`, cutoff typed as `now() - interval`", setup: monolithic(typed, "")},
			{key: "A′", db: "p_a_bound", name: "monolithic `DELETE`, cutoff bound", setup: monolithic(bound, cutoff)},
		}
	}
	railOn := func(spec policy.Spec, env []string) []contestant {
		cs := []contestant{
			{key: "C", db: "p_c", name: "the rail end to end (`api serve` + `sweepcron`), path chosen", setup: b.railSetup(b.s.binDir, spec.Name, env)},
			{key: "heap", db: "p_heap", name: "the engine in-process, heap path forced", setup: b.engineSetup([]policy.Spec{spec}, sweep.PathHeap, nil)},
			{key: "index", db: "p_index", name: "the engine in-process, index path forced", setup: b.engineSetup([]policy.Spec{spec}, sweep.PathIndex, nil)},
		}
		if v, ok := b.variant("p_variant", spec.Name, env); ok {
			cs = append(cs, v)
		}
		return cs
	}
	notifications := catalogSpec("notifications")
	locked := railOn(notifications, nil)
	for i := range locked {
		locked[i].db += "_locked"
		locked[i].setup = holdingLocks(locked[i].setup, lockedRows)
	}
	res.tables = []pathTable{
		{key: "dense", title: "dense: notifications, 80% eligible", tpl: tpls[0], rows: b.s.rows, eligible: eligible[0],
			contestants: append(monolithicOn(monolithicSQL, monolithicBoundSQL, cutoffSQL), railOn(notifications, nil)...)},
		{key: "sparse", title: "sparse: notifications, 1% eligible, scattered", tpl: tpls[1], rows: b.s.sparseRows, eligible: eligible[1],
			contestants: append(monolithicOn(monolithicSQL, monolithicBoundSQL, cutoffSQL), railOn(notifications, nil)...)},
		{key: "queue", title: "queue: River's river_job, (state, finalized_at) index", tpl: tpls[2], rows: b.s.rows, eligible: eligible[2],
			contestants: append(monolithicOn(queueMonolithicSQL, queueBoundSQL, queueCutoffSQL),
				railOn(riverSpec, []string{"SWEEP_POLICY_FILE=" + queuePolicyFile})...)},
		{key: "locked", title: fmt.Sprintf("locked: the dense table, %d eligible rows held by a transaction", lockedRows), tpl: tpls[0],
			rows: b.s.rows, eligible: eligible[0], held: lockedRows, contestants: locked},
	}
	enough := func() bool {
		for _, t := range res.tables {
			if res.rounds[t.key].clean() < b.s.rounds {
				return false
			}
		}
		return true
	}
	return res, b.addRounds("paths", began, pathsRoundsBudget, enough, func(n int) error {
		base, err := b.fgRound(ctx, n, fmt.Sprintf("paths round %d", n), tpls[0])
		if err != nil {
			return err
		}
		for _, t := range res.tables {
			rd := base
			err := b.play(ctx, fmt.Sprintf("paths round %d, %s", n, t.key), &rd, t.contestants, t.tpl, probe{fg: true}, t.eligible-int64(t.held))
			if err != nil {
				return err
			}
			res.rounds[t.key] = append(res.rounds[t.key], rd)
		}
		return nil
	})
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
		var ids []int64
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
				ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			}
		}
		if err == nil && len(ids) != n {
			err = fmt.Errorf("%d rows locked, want %d", len(ids), n)
		}
		var run sweepFunc
		cleanup := func() {}
		if err == nil {
			run, cleanup, err = setup(ctx, dbURL)
		}
		if err != nil {
			holder.Close(ctx)
			return nil, nil, fmt.Errorf("hold row locks: %w", err)
		}
		return run, func() {
			cleanup()
			holder.Close(context.Background()) // rolls the holder back
		}, nil
	}
}

func (b *bench) renderPaths(r pathsResult) string {
	var w strings.Builder
	b.header(&w, "Access paths: each path on each table")
	fmt.Fprintf(&w, "Foreground: %d workers × %.0f ops/s on notifications, around every contestant; the idle baseline once a round.\n\n",
		fgWorkers, float64(time.Second)/float64(fgPeriod))
	var verdicts [][]string
	for _, t := range r.tables {
		rs := r.rounds[t.key]
		fmt.Fprintf(&w, "**%s**: %s rows, %s eligible (%.1f%%)", t.title, fmtCount(int64(t.rows)), fmtCount(t.eligible), 100*float64(t.eligible)/float64(t.rows))
		if t.held > 0 {
			fmt.Fprintf(&w, ", %d of them locked through each contestant (so %s to delete)", t.held, fmtCount(t.eligible-int64(t.held)))
		}
		fmt.Fprintf(&w, "; %s.\n\n", roundsNote(rs))
		as := acrossAll(rs.counted())
		a, a2, c := pick(as, "A"), pick(as, "A′"), pick(as, "C")
		sqlOnly := func(x across) bool { return x.key == "A" || x.key == "A′" }
		retries := func(x across) float64 { return x.most(func(o outcome) float64 { return float64(o.lockRetries) }) }
		contestantTable(&w, as, []column{colKey, colName,
			{"path", func(x across) string {
				if sqlOnly(x) {
					return ""
				}
				return x.rounds[len(x.rounds)-1].path
			}},
			colTime, colRate, colRatio("A", a), colRatio("A′", a2), colRatio("C", c), colBatches, colP50, colP99, colLongest,
			{"lock retries>", func(x across) string {
				if sqlOnly(x) {
					return ""
				}
				return fmt.Sprintf("%.0f (%.0f)", x.med(func(o outcome) float64 { return float64(o.lockRetries) }), retries(x))
			}},
			colFG, colWAL})
		roundList(&w, rs, func(rd round, o outcome) string {
			rc, _ := findKey(rd.contestants, "C")
			p := fmt.Sprintf("%s %s", o.key, fmtDuration(o.elapsed))
			switch {
			case o.key == "C":
				p += fmt.Sprintf(" (foreground p99 %.2f × idle)", float64(percentile(rc.fg, 0.99))/float64(percentile(rd.baseline, 0.99)))
			case rc.elapsed > 0:
				p += fmt.Sprintf(" (C ÷ it %.2f)", rc.rowsPerSec()/o.rowsPerSec())
			}
			return p
		})
		if len(c.rounds) == 0 {
			continue
		}
		switch t.key {
		case "dense":
			v := c.ratio(a2)
			verdicts = append(verdicts, []string{fmt.Sprintf("C rows/s ≥ %.1f × A′'s", targetDenseVsBound), t.key, fmt.Sprintf("%.2f ×", v), verdict(v >= targetDenseVsBound)})
		case "sparse":
			v := c.ratio(a)
			verdicts = append(verdicts, []string{fmt.Sprintf("C rows/s ≥ %.1f × A's", targetSparseVsTyped), t.key, fmt.Sprintf("%.2f ×", v), verdict(v >= targetSparseVsTyped)})
		}
		ds := c.batches()
		verdicts = append(verdicts,
			[]string{fmt.Sprintf("C batch p99 ≤ %s", fmtDuration(targetP99Batch)), t.key, fmtDuration(percentile(ds, 0.99)), verdict(percentile(ds, 0.99) <= targetP99Batch)},
			[]string{fmt.Sprintf("C longest batch ≤ %s", fmtDuration(targetMaxBatch)), t.key, fmtDuration(maxDuration(ds)), verdict(maxDuration(ds) <= targetMaxBatch)},
			[]string{fmt.Sprintf("C foreground p99 ≤ %.1f × idle", targetPathsFG), t.key, fmt.Sprintf("%.2f ×", c.fgRatio()), verdict(c.fgRatio() <= targetPathsFG)})
		for _, x := range []across{c, pick(as, "heap"), pick(as, "index")} {
			// Every contestant deleted exactly the unheld eligible rows, or the run failed
			// before this report: a batch-error stops the bench.
			if worst := int(retries(x)); t.held > 0 {
				verdicts = append(verdicts, []string{x.key + ": each held row lock costs at most one retried batch, never a batch-error",
					t.key, fmt.Sprintf("%d retries for %d held rows, 0 batch-errors", worst, t.held), verdict(worst <= t.held)})
			}
		}
	}
	table(&w, []string{"target, median of rounds", "table", "measured>", ""}, verdicts)
	return w.String()
}

// findKey is the outcome of key among os.
func findKey(os []outcome, key string) (outcome, bool) {
	for _, o := range os {
		if o.key == key {
			return o, true
		}
	}
	return outcome{}, false
}
