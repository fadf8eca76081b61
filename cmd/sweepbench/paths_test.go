package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseBatchLinePath(t *testing.T) {
	line := `{"level":"DEBUG","msg":"sweep batch","pass":"read","batch":2,"path":"heap","size":12500,"blocks":160,` +
		`"deleted":9984,"took_ms":8.5,"retried":true,"failed":false}`
	b, ok := parseBatchLine([]byte(line))
	if !ok || b.path != "heap" || b.blocks != 160 || !b.retried || b.rows != 9984 {
		t.Errorf("parseBatchLine = %+v, %v; want path heap, 160 blocks, retried, 9984 rows", b, ok)
	}
}

// A heap range asks for blocks, not rows: it counts as a full batch whatever it deleted, so the
// scale run's per-row figures do not drop every heap batch.
func TestFullBatch(t *testing.T) {
	for _, tt := range []struct {
		b    batch
		want bool
	}{
		{batch{size: 1000, rows: 1000}, true},
		{batch{size: 1000, rows: 400}, false},
		{batch{size: 12500, rows: 9984, blocks: 160}, true},
		{batch{size: 12500, rows: 0, blocks: 160}, false},
	} {
		if got := full(tt.b); got != tt.want {
			t.Errorf("full(%+v) = %v, want %v", tt.b, got, tt.want)
		}
	}
	bs := []batch{{size: 100, rows: 80, blocks: 1, took: 800 * time.Microsecond}, {size: 100, rows: 80, blocks: 1, took: 1600 * time.Microsecond}}
	if got := medianRows(bs); got != 80 {
		t.Errorf("medianRows = %d, want 80", got)
	}
}

func TestLoadPathsSettings(t *testing.T) {
	s, err := parse("paths")
	if err != nil || s.run != "paths" || s.sparseRows != 5_000_000 || s.rows != 1_000_000 {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	for _, tt := range []struct {
		args []string
		run  string
	}{
		{[]string{"paths", "-sparse-rows", "1000000"}, "paths"},
		{[]string{"replica"}, "replica"},
		{[]string{"crossover"}, "crossover"},
	} {
		if s, err := parse(tt.args...); err != nil || s.run != tt.run {
			t.Errorf("%q: %+v, %v", tt.args, s, err)
		}
	}
	for _, bad := range [][]string{
		{"paths", "yes"}, {"paths", "-sparse-rows", "10"}, {"paths", "-sparse-rows", "5e6"}, {"crossover", "-sparse-rows", "1000000"},
		{"paths", "replica"}, {"crossover", "scale"}, {"crossover", "partitions"},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("parse(%q) accepted it", bad)
		}
	}
}

// TestRenderPaths renders a paths run of two rounds: the ratios are each round's, the lock
// retries the worst round's, and the targets say pass or miss.
func TestRenderPaths(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	o := func(key, path string, deleted int64, took time.Duration, retries int) outcome {
		return outcome{key: key, name: key, path: path, deleted: deleted, elapsed: took, lockRetries: retries,
			batches: []batch{{rows: deleted, took: ms(10)}}, fg: []time.Duration{ms(2)}}
	}
	idle := []time.Duration{ms(2)}
	dense := []round{
		{n: 1, baseline: idle, contestants: []outcome{o("A", "", 800, ms(400), 0), o("A′", "", 800, ms(300), 0), o("C", "heap", 800, ms(330), 0)}},
		{n: 2, baseline: idle, contestants: []outcome{o("A", "", 800, ms(400), 0), o("A′", "", 800, ms(300), 0), o("C", "heap", 800, ms(500), 0)}},
	}
	locked := []round{
		{n: 1, baseline: idle, contestants: []outcome{o("C", "heap", 792, ms(600), 3), o("heap", "heap", 792, ms(600), 9), o("index", "index", 792, ms(900), 8)}},
		{n: 2, baseline: idle, contestants: []outcome{o("C", "heap", 792, ms(600), 8), o("heap", "heap", 792, ms(600), 2), o("index", "index", 792, ms(900), 8)}},
	}
	r := pathsResult{
		tables: []pathTable{{key: "dense", title: "dense", rows: 1000, eligible: 800}, {key: "locked", title: "locked", rows: 1000, eligible: 800, held: 8}},
		rounds: map[string]rounds{"dense": dense, "locked": locked},
	}
	got := (&bench{s: settings{run: "paths", rows: 1000, sparseRows: 5_000_000, rounds: 2}}).renderPaths(r)
	for _, want := range []string{
		"<!-- Written by cmd/sweepbench (sweepbench paths)", "# Access paths: each path on each table",
		// Round 1: 0.91 × A′, round 2: 0.60 × A′; the median of the two.
		"| C rows/s ≥ 0.8 × A′'s | dense | 0.75 × | **MISS** |",
		"| C: each held row lock costs at most one retried batch, never a batch-error | locked | 8 retries for 8 held rows, 0 batch-errors | **pass** |",
		"| heap: each held row lock costs at most one retried batch, never a batch-error | locked | 9 retries for 8 held rows, 0 batch-errors | **MISS** |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
}
