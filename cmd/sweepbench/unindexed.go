package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// The unindexed run (sweepbench unindexed) measures a pass that no index serves (allow_unindexed):
// a table with no index on either age column, which the engine sweeps by heap ranges, against one
// monolithic DELETE of the same rows, side by side in each round on fresh copies of one template;
// and the first batches the index path would run there, each of which reads the whole table.

// unindexedShares are the eligible shares measured.
var unindexedShares = []float64{0.1, 0.7}

// unindexedBefore is how many batches of the index path the run times: each costs about the same.
// They run under unindexedBeforeTimeout, so that their cost is measured rather than cut at
// BATCH_STATEMENT_TIMEOUT.
const (
	unindexedBefore        = 3
	unindexedBeforeTimeout = time.Minute
)

// unindexedSeedSQL fills rows $2..$3 of $1 as of $4 as crossoverSeedSQL does (ordered_at in heap
// order, scattered_at a hash of the id), into a table with no index on either.
const unindexedSeedSQL = `
INSERT INTO unindexed (ordered_at, scattered_at, body)
SELECT $4::timestamptz - interval '400 days' + (i::float8 / $1::bigint) * interval '399 days',
       $4::timestamptz - interval '400 days' + (((i * 2654435761) % $1::bigint)::float8 / $1::bigint) * interval '399 days',
       'You have a new mention from user ' || (i * 7919 % 100000) || ' in #general, ' || md5(i::text)
FROM generate_series($2::bigint, $3::bigint) i`

type unindexedPoint struct {
	layout   string
	share    float64
	eligible int64
	cutoff   time.Time
	// rail, mono and before are each round's outcome: the engine's drain, the monolithic
	// DELETE, and the index path's first batches.
	rail, mono, before []outcome
}

type unindexedResult struct {
	rows   int
	blocks int64
	points []*unindexedPoint
	rounds int
}

func (b *bench) unindexedRun(ctx context.Context) (unindexedResult, error) {
	res := unindexedResult{rows: b.s.rows}
	name, _, err := b.template(ctx, tableSpec{name: "unindexed",
		ddl: func() (string, error) {
			return `CREATE TABLE unindexed (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		ordered_at timestamptz NOT NULL, scattered_at timestamptz NOT NULL, body text NOT NULL)`, nil
		},
		seed: unindexedSeedSQL, tables: "unindexed", eligibles: "SELECT count(*) FROM unindexed"}, b.s.rows)
	if err != nil {
		return res, err
	}
	defer func() { _ = b.drop(context.WithoutCancel(ctx), name) }()
	if err := b.unindexedCutoffs(ctx, name, &res); err != nil {
		return res, err
	}
	asOf := time.Now()
	fixedAt := func(c *sweep.Config) { c.AsOf = func(context.Context) (time.Time, error) { return asOf, nil } }
	for n := 1; n <= b.s.rounds; n++ {
		for _, p := range res.points {
			what := fmt.Sprintf("unindexed round %d, %s %.0f%%", n, p.layout, 100*p.share)
			specs := []policy.Spec{{Name: "unindexed", Passes: []policy.Pass{{Name: "old", Table: "unindexed", AgeColumn: p.layout,
				Retention: asOf.Sub(p.cutoff), Mode: policy.ModeBatched, AllowUnindexed: true}}}}
			cutoffQuery := fmt.Sprintf("SELECT '%s'::timestamptz", p.cutoff.UTC().Format(time.RFC3339Nano))
			rail, err := b.contest(ctx, what, contestant{key: "C", db: "unindexed_c", name: "the rail (engine in-process)",
				setup: b.engineSetup(specs, "", fixedAt)}, name, probe{}, p.eligible)
			if err == nil && rail.path != string(sweep.PathHeap) {
				err = fmt.Errorf("%s: the rail took the %s path, want heap", what, rail.path)
			}
			if err != nil {
				return res, err
			}
			mono, err := b.contest(ctx, what, contestant{key: "A′", db: "unindexed_a", name: "one DELETE",
				setup: monolithic(fmt.Sprintf("DELETE FROM unindexed WHERE %s < $1", p.layout), cutoffQuery)}, name, probe{}, p.eligible)
			if err != nil {
				return res, err
			}
			before, err := b.contest(ctx, what, contestant{key: "I", db: "unindexed_i", name: "the index path's first batches",
				setup: firstBatches(specs[0], unindexedBefore, fixedAt)}, name, probe{}, -1)
			if err != nil {
				return res, err
			}
			p.rail, p.mono, p.before = append(p.rail, rail), append(p.mono, mono), append(p.before, before)
		}
		res.rounds = n
	}
	return res, nil
}

// unindexedCutoffs reads, on the template, each point's cutoff (the age below which exactly its
// share of the rows lies), its eligible rows, and the table's size in blocks. The connection is
// closed before it returns: a template with a session open cannot be copied.
func (b *bench) unindexedCutoffs(ctx context.Context, name string, res *unindexedResult) error {
	conn, err := pgx.Connect(ctx, b.dbURL(name))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = conn.QueryRow(ctx, `SELECT pg_relation_size('unindexed') / current_setting('block_size')::bigint`).Scan(&res.blocks)
	for _, l := range crossoverLayouts {
		for _, share := range unindexedShares {
			p := &unindexedPoint{layout: l.column, share: share}
			if err == nil {
				err = conn.QueryRow(ctx, fmt.Sprintf(`SELECT %[1]s FROM unindexed ORDER BY %[1]s OFFSET $1 LIMIT 1`, l.column),
					int64(share*float64(res.rows))).Scan(&p.cutoff)
			}
			if err == nil {
				err = conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM unindexed WHERE %s < $1`, l.column), p.cutoff).Scan(&p.eligible)
			}
			res.points = append(res.points, p)
		}
	}
	return err
}

// firstBatches runs one engine run of spec's first pass forced onto the index path, capped at n
// batches: on a table no index serves, each reads the whole table, so a drain is out of reach.
func firstBatches(spec policy.Spec, n int, change func(*sweep.Config)) setupFunc {
	spec.Passes = []policy.Pass{spec.Passes[0]}
	spec.Passes[0].MaxBatches = n
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
		cfg := sweep.Config{Pool: pool, Specs: []policy.Spec{spec}, Settings: settings, AccessPath: sweep.PathIndex,
			Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		change(&cfg)
		cfg.Settings.StatementTimeout = unindexedBeforeTimeout
		cfg.Settings.Deadline = max(cfg.Settings.Deadline, time.Duration(2*n)*unindexedBeforeTimeout)
		runner, err := sweep.NewRunner(cfg)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		run := func(ctx context.Context) (outcome, error) {
			began := time.Now()
			res, err := runner.Run(ctx, spec.Name, sweep.Options{})
			if err != nil {
				return outcome{}, err
			}
			o := outcome{deleted: res.Deleted, elapsed: time.Since(began), runs: 1, path: res.Passes[0].Path}
			for _, line := range strings.Split(string(logs.bytes()), "\n") {
				if bt, ok := parseBatchLine([]byte(line)); ok {
					o.batches = append(o.batches, bt)
				}
			}
			if res.Error != nil {
				return o, fmt.Errorf("%s: %s", res.Error.Code, res.Error.Message)
			}
			return o, nil
		}
		return run, pool.Close, nil
	}
}

// batchesOf pools every batch of every round.
func batchesOf(os []outcome) []time.Duration {
	var ds []time.Duration
	for _, o := range os {
		ds = append(ds, o.batchDurations()...)
	}
	return ds
}

// rates are each outcome's rows/s.
func rates(os []outcome) []float64 {
	xs := make([]float64, len(os))
	for i, o := range os {
		xs[i] = o.rowsPerSec()
	}
	return xs
}

// railOverMono is the median over rounds of the rail's rows/s over the monolithic DELETE's, in
// the same round.
func (p *unindexedPoint) railOverMono() float64 {
	var xs []float64
	for i := range min(len(p.rail), len(p.mono)) {
		xs = append(xs, p.rail[i].rowsPerSec()/p.mono[i].rowsPerSec())
	}
	return median(xs)
}

func (b *bench) renderUnindexed(r unindexedResult) string {
	var w strings.Builder
	b.header(&w, "A pass no index serves")
	fmt.Fprintf(&w, "One table of %s rows in %s blocks, with no index on either age column (`allow_unindexed`); %d rounds, "+
		"medians of each round's figures, the rail and one DELETE side by side in each. The rail sweeps by heap ranges, "+
		"reading each block once per drain; **I** is the index path's first %d batches, each of which reads the whole table "+
		"(under a statement timeout of %s, so that they are measured rather than cut).\n\n",
		fmtCount(int64(r.rows)), fmtCount(r.blocks), r.rounds, unindexedBefore, unindexedBeforeTimeout)
	var rows [][]string
	var foreign []float64
	for _, p := range r.points {
		for _, o := range append(append([]outcome{}, p.rail...), p.mono...) {
			foreign = append(foreign, o.foreign)
		}
		railTime, monoTime := medianElapsed(p.rail), medianElapsed(p.mono)
		railBatches := batchesOf(p.rail)
		var nb []float64
		for _, o := range p.rail {
			nb = append(nb, float64(len(o.batches)))
		}
		p99 := percentile(railBatches, 0.99)
		rows = append(rows, []string{p.layout, fmt.Sprintf("%.0f%%", 100*p.share), fmtCount(p.eligible),
			fmtDuration(railTime), fmtRate(float64(p.eligible) / railTime.Seconds()), fmt.Sprintf("%.0f", median(nb)),
			fmtDuration(percentile(railBatches, 0.5)), fmtDuration(p99), fmtDuration(maxDuration(railBatches)),
			fmtDuration(monoTime), fmtRate(float64(p.eligible) / monoTime.Seconds()), fmt.Sprintf("%.2f", p.railOverMono()),
			fmtDuration(percentile(batchesOf(p.before), 0.5)), fmtRate(median(rates(p.before))), verdict(p99 <= targetP99Batch)})
	}
	table(&w, []string{"age column", "eligible>", "rows>", "C: time>", "C: rows/s>", "C: batches>", "C: batch p50>", "C: batch p99>", "C: longest batch>",
		"A′: time>", "A′: rows/s>", "C ÷ A′ (rows/s)>", "I: batch median>", "I: rows/s>", fmt.Sprintf("C p99 ≤ %s", fmtDuration(targetP99Batch))}, rows)
	fmt.Fprintf(&w, "Other tenants of the machine used %.0f%% of its CPU during the median window.\n", 100*median(foreign))
	return w.String()
}
