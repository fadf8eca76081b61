package main

import (
	"io"
	"strings"
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbtest"
)

// TestUnindexedRun runs the unindexed run end to end on a small table, on a cluster of its own
// (the run creates and drops databases): the rail and the DELETE must each take exactly the
// eligible rows, the rail on the heap path, and the report must render. Its numbers are not
// checked here.
func TestUnindexedRun(t *testing.T) {
	cluster := dbtest.NewCluster(t)
	s := settings{run: "unindexed", rows: 10_000, rounds: 1, databaseURL: cluster.URL, binDir: buildBinaries(t), out: "-", roundsCap: 1}
	b, err := newBench(t.Context(), s, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	res, err := b.unindexedRun(t.Context())
	if err != nil {
		t.Fatal(err) // a contestant that deleted other than the eligible rows, or a rail off the heap path
	}
	if want := len(crossoverLayouts) * len(unindexedShares); len(res.points) != want || res.blocks == 0 {
		t.Fatalf("%d points over %d blocks, want %d", len(res.points), res.blocks, want)
	}
	for _, p := range res.points {
		if len(p.rail) != 1 || len(p.mono) != 1 || len(p.before) != 1 {
			t.Fatalf("%s %.0f%%: %d rail, %d DELETE and %d index-path outcomes", p.layout, 100*p.share, len(p.rail), len(p.mono), len(p.before))
		}
		// A batch of the index path may take every eligible row of the small table.
		if i := p.before[0]; i.path != "index" || len(i.batches) < 1 || len(i.batches) > unindexedBefore {
			t.Errorf("%s %.0f%%: the index path's outcome ran %d batches on the %q path", p.layout, 100*p.share, len(i.batches), i.path)
		}
	}
	out := b.renderUnindexed(res)
	for _, want := range []string{generatedNote + " (sweepbench unindexed)", "sweepbench unindexed -rows 10000 -rounds 1", "| scattered_at | 70% |"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
