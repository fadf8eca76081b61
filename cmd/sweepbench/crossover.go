package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// The crossover run (sweepbench crossover) measures the engine's heapShare: the heap path against
// the index path at each eligible share, on fresh copies of one table whose ordered_at follows
// the heap and whose scattered_at is a hash of the row (eligible rows everywhere).

// crossoverShares are the eligible shares measured.
var crossoverShares = []float64{0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}

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
	rows   int
	points []*crossoverPoint
	rounds int
}

func (b *bench) crossoverRun(ctx context.Context) (crossoverResult, error) {
	res := crossoverResult{rows: b.s.rows}
	name, _, err := b.template(ctx, tableSpec{name: "crossover",
		ddl: func() (string, error) {
			return `CREATE TABLE crossover (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		ordered_at timestamptz NOT NULL, scattered_at timestamptz NOT NULL, body text NOT NULL)`, nil
		},
		seed: crossoverSeedSQL, post: `CREATE INDEX ON crossover (ordered_at); CREATE INDEX ON crossover (scattered_at)`,
		tables: "crossover", eligibles: "SELECT count(*) FROM crossover"}, b.s.rows)
	if err != nil {
		return res, err
	}
	defer func() { _ = b.drop(context.WithoutCancel(ctx), name) }()
	conn, err := pgx.Connect(ctx, b.dbURL(name))
	if err != nil {
		return res, err
	}
	// Any reference time will do: each pass's retention is set from it to its share's cutoff.
	asOf := time.Now()
	// The cutoff of each share: the age below which exactly that share of the rows lies.
	type cut struct {
		p      *crossoverPoint
		cutoff time.Time
	}
	var cuts []cut
	for _, l := range crossoverLayouts {
		for _, share := range crossoverShares {
			p := &crossoverPoint{layout: l.column, share: share}
			var cutoff time.Time
			if err == nil {
				err = conn.QueryRow(ctx, fmt.Sprintf(`SELECT %[1]s FROM crossover ORDER BY %[1]s OFFSET $1 LIMIT 1`, l.column), int64(share*float64(b.s.rows))).Scan(&cutoff)
			}
			if err == nil {
				err = conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM crossover WHERE %s < $1`, l.column), cutoff).Scan(&p.eligible)
			}
			res.points = append(res.points, p)
			cuts = append(cuts, cut{p, cutoff})
		}
	}
	// The template must have no session when it is copied.
	conn.Close(ctx)
	if err != nil {
		return res, err
	}

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
				o, err := b.contest(ctx, fmt.Sprintf("crossover round %d, %s %.1f%%", n, c.p.layout, 100*c.p.share),
					contestant{key: string(path), db: "crossover_" + string(path), name: string(path),
						setup: b.engineSetup([]policy.Spec{spec(c)}, path, fixedAt)}, name, probe{}, c.p.eligible)
				if err != nil {
					return res, err
				}
				if path == sweep.PathHeap {
					c.p.heap = append(c.p.heap, o)
				} else {
					c.p.index = append(c.p.index, o)
				}
			}
		}
		res.rounds = n
	}
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

func (b *bench) renderCrossover(r crossoverResult) string {
	var w strings.Builder
	b.header(&w, "The access path's crossover")
	fmt.Fprintf(&w, "One table of %s rows; %d rounds. The engine takes the heap path from the planner's estimate of the share on, "+
		"at a threshold between %.0f%% for an age in heap order and %.0f%% for one scattered, by the age column's correlation.\n\n",
		fmtCount(int64(r.rows)), r.rounds, 100*sweep.HeapShareOrdered, 100*sweep.HeapShareScattered)
	for _, l := range crossoverLayouts {
		fmt.Fprintf(&w, "**%s** (`%s`)\n\n", l.title, l.column)
		crossover := ""
		var rows [][]string
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
			rows = append(rows, []string{fmt.Sprintf("%.1f%%", 100*p.share), fmtCount(p.eligible), fmtDuration(h), fmtRate(float64(p.eligible) / h.Seconds()),
				fmtDuration(i), fmtRate(float64(p.eligible) / i.Seconds()), fmt.Sprintf("%.2f", ratio), faster, p.auto})
		}
		table(&w, []string{"eligible>", "rows>", "heap: time>", "heap: rows/s>", "index: time>", "index: rows/s>", "index ÷ heap (time)>", "faster", "auto"}, rows)
		if crossover == "" {
			crossover = "none measured"
		}
		fmt.Fprintf(&w, "The heap path is faster from **%s** eligible on.\n\n", crossover)
	}
	return w.String()
}
