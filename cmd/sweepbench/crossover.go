package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// The crossover run (sweepbench crossover): the heap path against the index path over the eligible
// share, in-process, without foreground, each on a fresh copy: the measurement behind the engine's
// heapShare. One table holds two age columns over the same rows: ordered_at follows the heap (an
// append-mostly table's age: the eligible rows are the oldest blocks), scattered_at is a hash of
// the row (a status-like or updated-in-place age: the eligible rows are everywhere). A pass on
// either, with its retention set so that exactly the share is eligible, is swept once by each
// path.

// crossoverShares are the eligible shares measured.
var crossoverShares = []float64{0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.8}

// crossoverLayouts are the two age columns.
var crossoverLayouts = []struct{ column, title string }{
	{"ordered_at", "age in heap order (eligible rows in the oldest blocks)"},
	{"scattered_at", "age scattered over the heap"},
}

// crossoverSeedSQL fills rows $2..$3 of $1 as of $4: ages over the 400 days before it, in id
// order for ordered_at and by a hash of the id for scattered_at; rows of notifications' width.
const crossoverSeedSQL = `
INSERT INTO crossover (ordered_at, scattered_at, body)
SELECT $4::timestamptz - interval '400 days' + (i::float8 / $1::bigint) * interval '399 days',
       $4::timestamptz - interval '400 days' + (((i * 2654435761) % $1::bigint)::float8 / $1::bigint) * interval '399 days',
       'You have a new mention from user ' || (i * 7919 % 100000) || ' in #general, ' || md5(i::text)
FROM generate_series($2::bigint, $3::bigint) i`

type crossoverPoint struct {
	layout   string
	share    float64
	eligible int64
	// auto is the path the engine chooses for it (its dry run on the template).
	auto string
	// heap and index are each round's outcome.
	heap, index []outcome
}

type crossoverResult struct {
	rows    int
	points  []*crossoverPoint
	rounds  int
	elapsed time.Duration
}

func (b *bench) crossoverRun(ctx context.Context) (crossoverResult, error) {
	began := time.Now()
	res := crossoverResult{rows: b.s.rows}
	name := fmt.Sprintf("sweepbench_crossover_%d", b.s.rows)
	conn, asOf, err := b.newTemplate(ctx, name)
	if err != nil {
		return res, err
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE crossover (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		ordered_at timestamptz NOT NULL, scattered_at timestamptz NOT NULL, body text NOT NULL)`); err != nil {
		conn.Close(ctx)
		return res, err
	}
	if err := b.seedChunks(ctx, conn, name, crossoverSeedSQL, b.s.rows, asOf); err != nil {
		conn.Close(ctx)
		return res, err
	}
	if _, err := conn.Exec(ctx, `CREATE INDEX ON crossover (ordered_at); CREATE INDEX ON crossover (scattered_at)`); err != nil {
		conn.Close(ctx)
		return res, err
	}
	if _, err := b.finishTemplate(ctx, conn, name, "crossover", "SELECT count(*) FROM crossover", b.s.rows); err != nil {
		conn.Close(ctx)
		return res, err
	}
	// The cutoff of each share: the age below which exactly that share of the rows lies.
	type cut struct {
		p      *crossoverPoint
		cutoff time.Time
	}
	var cuts []cut
	for _, l := range crossoverLayouts {
		for _, share := range crossoverShares {
			n := int64(share * float64(b.s.rows))
			var cutoff time.Time
			if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT %[1]s FROM crossover ORDER BY %[1]s OFFSET $1 LIMIT 1`, l.column), n).Scan(&cutoff); err != nil {
				conn.Close(ctx)
				return res, err
			}
			var eligible int64
			if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM crossover WHERE %s < $1`, l.column), cutoff).Scan(&eligible); err != nil {
				conn.Close(ctx)
				return res, err
			}
			p := &crossoverPoint{layout: l.column, share: share, eligible: eligible}
			res.points = append(res.points, p)
			cuts = append(cuts, cut{p, cutoff})
		}
	}
	conn.Close(ctx)
	defer func() { _ = b.drop(context.WithoutCancel(ctx), name) }()

	fixedAt := func(c *sweep.Config) { c.AsOf = func(context.Context) (time.Time, error) { return asOf, nil } }
	spec := func(c cut) policy.Spec {
		return policy.Spec{Name: "crossover", Passes: []policy.Pass{{Name: "old", Table: "crossover", AgeColumn: c.p.layout,
			Retention: asOf.Sub(c.cutoff), Mode: policy.ModeBatched}}}
	}
	// The engine's own choice for each share: its dry run on the template, whose statistics
	// every copy shares.
	for _, c := range cuts {
		if c.p.auto, err = b.enginePath(ctx, name, spec(c), fixedAt); err != nil {
			return res, fmt.Errorf("crossover %s %.1f%%: %w", c.p.layout, 100*c.p.share, err)
		}
	}
	for n := 1; n <= b.s.rounds; n++ {
		for _, c := range cuts {
			for _, path := range []sweep.Path{sweep.PathHeap, sweep.PathIndex} {
				con := contestant{key: string(path), db: "crossover_" + string(path), name: string(path),
					setup: b.engineSetupWith([]policy.Spec{spec(c)}, "crossover", path, fixedAt)}
				o, err := b.measure(ctx, con, name, false)
				if err != nil {
					return res, fmt.Errorf("crossover %s %.1f%% %s: %w", c.p.layout, 100*c.p.share, path, err)
				}
				if o.deleted != c.p.eligible {
					return res, fmt.Errorf("crossover %s %.1f%% %s: deleted %d, want %d", c.p.layout, 100*c.p.share, path, o.deleted, c.p.eligible)
				}
				b.logf("crossover round %d: %s %.1f%%: %s %s (%.0f rows/s, %d batches, others %.0f%%)", n, c.p.layout, 100*c.p.share, path,
					o.elapsed.Round(time.Millisecond), o.rowsPerSec(), len(o.batches), 100*o.foreign)
				if path == sweep.PathHeap {
					c.p.heap = append(c.p.heap, o)
				} else {
					c.p.index = append(c.p.index, o)
				}
			}
		}
		res.rounds = n
	}
	res.elapsed = time.Since(began)
	return res, nil
}

// indexOverHeap is the median over rounds of the index path's time over the heap path's, in the
// same round: above 1 the heap path is faster.
func (p *crossoverPoint) indexOverHeap() float64 {
	var xs []float64
	for i := range min(len(p.heap), len(p.index)) {
		xs = append(xs, p.index[i].elapsed.Seconds()/p.heap[i].elapsed.Seconds())
	}
	return median(xs)
}

// enginePath is the access path the engine would take for spec's first pass on database db now:
// its dry run's, with the API's default settings and change applied. The pool is closed before
// it returns: a template with a session open cannot be copied.
func (b *bench) enginePath(ctx context.Context, db string, spec policy.Spec, change func(*sweep.Config)) (string, error) {
	settings, err := engineSettings()
	if err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, b.dbURL(db))
	if err != nil {
		return "", err
	}
	defer pool.Close()
	cfg := sweep.Config{Pool: pool, Specs: []policy.Spec{spec}, Settings: settings}
	change(&cfg)
	r, err := sweep.NewRunner(cfg)
	if err != nil {
		return "", err
	}
	dr, err := r.DryRun(ctx, spec.Name)
	if err != nil {
		return "", fmt.Errorf("dry run: %w", err)
	}
	return dr.Passes[0].Path, nil
}

func medianElapsed(os []outcome) time.Duration {
	var xs []float64
	for _, o := range os {
		xs = append(xs, float64(o.elapsed))
	}
	return time.Duration(median(xs))
}

func renderCrossover(m machine, s settings, r crossoverResult) string {
	var w strings.Builder
	header(&w, "The access path's crossover", m, s, r.elapsed)
	fmt.Fprintf(&w, "One table of %s rows (notifications' width) with two indexed age columns; for each eligible share, a pass whose "+
		"retention makes exactly that share eligible is swept by the engine in-process (API defaults, adaptive batches, no foreground) "+
		"on each path forced, each on a fresh copy; %d rounds, medians of each round's ratio. \"auto\" is the path the engine chooses "+
		"(heap from the planner's estimate of the share on, at a threshold between %.0f%% for an age in heap order and %.0f%% for one "+
		"scattered, by the age column's correlation).\n\n", fmtCount(int64(r.rows)), r.rounds, 100*sweep.HeapShareOrdered, 100*sweep.HeapShareScattered)
	for _, l := range crossoverLayouts {
		fmt.Fprintf(&w, "**%s** (`%s`)\n\n", l.title, l.column)
		w.WriteString("| eligible | rows | heap: time | heap: rows/s | index: time | index: rows/s | index ÷ heap (time) | faster | auto |\n")
		w.WriteString("|--:|--:|--:|--:|--:|--:|--:|---|---|\n")
		crossover := ""
		for _, p := range r.points {
			if p.layout != l.column {
				continue
			}
			ratio := p.indexOverHeap()
			faster := "index"
			if ratio > 1 {
				faster = "heap"
				if crossover == "" {
					crossover = fmt.Sprintf("%.1f%%", 100*p.share)
				}
			} else {
				crossover = ""
			}
			h, i := medianElapsed(p.heap), medianElapsed(p.index)
			fmt.Fprintf(&w, "| %.1f%% | %s | %s | %s | %s | %s | %.2f | %s | %s |\n", 100*p.share, fmtCount(p.eligible),
				fmtDuration(h), fmtRate(float64(p.eligible)/h.Seconds()), fmtDuration(i), fmtRate(float64(p.eligible)/i.Seconds()),
				ratio, faster, p.auto)
		}
		if crossover == "" {
			crossover = "none measured"
		}
		fmt.Fprintf(&w, "\nThe heap path is faster from **%s** eligible on.\n\n", crossover)
	}
	return w.String()
}

func (b *bench) crossoverReport(ctx context.Context) (string, error) {
	res, err := b.crossoverRun(ctx)
	if err != nil {
		return "", err
	}
	return renderCrossover(b.machine, b.s, res), nil
}
