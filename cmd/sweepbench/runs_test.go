package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbtest"
)

// raceEnabled is set by race_test.go under -race (make test): the binaries are then built with
// -race too, so that go build reuses what the same go test -race ./... has just compiled.
var raceEnabled bool

// buildBinaries builds api and sweepcron into a temporary folder: the rail contestants run them.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/api", "./cmd/sweepcron")
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return dir
}

// TestRuns runs the replica-lag, partitions, paths and crossover runs end to end on small tables, on a cluster of
// their own (the standby is server-wide state, and the runs create and drop databases): the code
// paths of make bench, whose numbers are not checked here. Each run fails by itself when a
// contestant leaves other rows than its oracle's or than were eligible.
func TestRuns(t *testing.T) {
	cluster := dbtest.NewCluster(t)
	bin := buildBinaries(t)
	newTestBench := func(t *testing.T, s settings) *bench {
		t.Helper()
		s.databaseURL, s.binDir, s.out, s.roundsCap = cluster.URL, bin, "-", 1
		b, err := newBench(t.Context(), s, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.close)
		return b
	}

	t.Run("replica", func(t *testing.T) {
		b := newTestBench(t, settings{run: "replica", rows: 10_000, rounds: 1})
		res, err := b.replicaRun(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(res.rounds) != 1 {
			t.Fatalf("%d rounds, want 1", len(res.rounds))
		}
		var keys []string
		for _, o := range res.rounds[0].contestants {
			state := "healthy"
			if o.slow {
				state = "slow"
			}
			keys = append(keys, state+"/"+o.key)
			if o.deleted != res.eligible || o.peak.Samples == 0 || (o.slow != (o.cycles > 0)) {
				t.Errorf("%s/%s: deleted %d of %d, %d samples, %d duty cycles", state, o.key, o.deleted, res.eligible, o.peak.Samples, o.cycles)
			}
			if o.key != "A" && o.runs == 0 {
				t.Errorf("%s/%s: no sweepcron run", state, o.key)
			}
		}
		if got, want := strings.Join(keys, " "), "healthy/A healthy/C healthy/T slow/A slow/C slow/T slow/TB"; got != want {
			t.Errorf("contestants %q, want %q", got, want)
		}
		out := b.renderReplica(res)
		for _, want := range []string{generatedNote + " (sweepbench replica)", "# Replica lag",
			"| slow | T | the rail, `MAX_REPLICA_LAG=1s`", "| target |", "healthy standby: throttled rows/s"} {
			if !strings.Contains(out, want) {
				t.Errorf("the report lacks %q:\n%s", want, out)
			}
		}
		// The standby is gone: nothing streams from the cluster any more.
		var n int
		if err := b.admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_replication").Scan(&n); err != nil || n != 0 {
			t.Errorf("%d standbys still streaming (%v)", n, err)
		}
	})

	t.Run("partitions", func(t *testing.T) {
		requirePartman(t, cluster.URL)
		b := newTestBench(t, settings{run: "partitions", rows: partMinRows, rounds: 1})
		res, err := b.partitionsRun(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(res.rounds) != 1 {
			t.Fatalf("%d rounds, want 1", len(res.rounds))
		}
		perDay := int64(partMinRows / partDays)
		for _, o := range res.rounds[0].contestants {
			// Exactness is checked by the run itself; here, that the contestants did what they are
			// named for. P and B delete the boundary's expired rows too, P′ and K do not.
			wantDropped, minGone, maxGone := partExpired, partExpired*perDay, partExpired*perDay
			switch o.key {
			case "P":
				maxGone += perDay
			case "B":
				wantDropped, maxGone = 0, maxGone+perDay
			}
			if o.inexact != "" {
				t.Errorf("%s: not exact: %s", o.key, o.inexact)
			}
			if o.dropped != wantDropped || o.gone < minGone || o.gone > maxGone || o.gone != o.want {
				t.Errorf("%s: %d partitions and %d rows gone (oracle %d); want %d partitions and %d..%d rows",
					o.key, o.dropped, o.gone, o.want, wantDropped, minGone, maxGone)
			}
		}
		out := b.renderPartitions(res)
		for _, want := range []string{generatedNote + " (sweepbench partitions)", "sweepbench partitions -rows 10000",
			"| P | the rail, `mode: partitions`", "| K | pg_partman", "| target |"} {
			if !strings.Contains(out, want) {
				t.Errorf("the report lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("paths", func(t *testing.T) {
		t.Chdir(filepath.Join("..", "..")) // the queue table's schema is River's, cmd/api/testdata/river.sql
		b := newTestBench(t, settings{run: "paths", rows: 10_000, sparseRows: 100_000, rounds: 1,
			variantEnv: []string{"BATCH_TARGET=100ms"}})
		res, err := b.pathsRun(t.Context())
		if err != nil {
			t.Fatal(err) // a contestant that deleted other than the unheld eligible rows fails it
		}
		wantPaths := map[string]map[string]string{
			"dense":  {"C": "heap", "heap": "heap", "index": "index", "C′": "heap"},
			"sparse": {"C": "index", "heap": "heap", "index": "index", "C′": "index"},
			"queue":  {"heap": "heap", "index": "index"},
			"locked": {"C": "heap", "heap": "heap", "index": "index", "C′": "heap"},
		}
		for _, tb := range res.tables {
			rounds := res.rounds[tb.key]
			if len(rounds) != 1 {
				t.Fatalf("%s: %d rounds, want 1", tb.key, len(rounds))
			}
			if _, ok := findKey(rounds[0].contestants, "C′"); !ok {
				t.Errorf("%s: no C′ with -variant-env", tb.key)
			}
			for _, o := range rounds[0].contestants {
				if want, ok := wantPaths[tb.key][o.key]; ok && o.path != want {
					t.Errorf("%s/%s: path %q, want %q", tb.key, o.key, o.path, want)
				}
				// Each held row costs the batch that meets it one retry at most.
				if o.lockRetries > tb.held || (tb.held > 0 && o.key != "A" && o.key != "A′" && o.lockRetries == 0) {
					t.Errorf("%s/%s: %d lock retries for %d held rows", tb.key, o.key, o.lockRetries, tb.held)
				}
			}
		}
		out := b.renderPaths(res)
		for _, want := range []string{generatedNote + " (sweepbench paths)", "# Access paths",
			"sweepbench paths -rows 10000 -sparse-rows 100000 -rounds 1 -variant-env 'BATCH_TARGET=100ms'",
			"| C′ | the rail with `BATCH_TARGET=100ms` |", "| target, median of rounds |"} {
			if !strings.Contains(out, want) {
				t.Errorf("the report lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("frontier", func(t *testing.T) {
		b := newTestBench(t, settings{run: "frontier", rows: 10_000, rounds: 1, window: 10 * time.Second})
		psi := readStalls().ok
		res, err := b.frontierRun(t.Context())
		if err != nil {
			t.Fatal(err) // a contestant that deleted other than the eligible rows fails it
		}
		if len(res.rounds) != 1 {
			t.Fatalf("%d rounds, want 1", len(res.rounds))
		}
		var keys []string
		for _, o := range res.rounds[0].contestants {
			keys = append(keys, o.key)
			if len(o.fg) == 0 {
				t.Errorf("%s: no foreground operation in its window", o.key)
			}
			// Each window ends with the writeback of what it left dirty, inside it.
			if o.writeback <= 0 {
				t.Errorf("%s: no writeback at the window's end", o.key)
			}
			// Where the kernel keeps pressure stall information, each window says what it waited on.
			if psi && (!o.waits.known || o.waits.cpu < 0 || o.waits.io < 0) {
				t.Errorf("%s: waits known %t, cpu %.2f, io %.2f; want the window's shares", o.key, o.waits.known, o.waits.cpu, o.waits.io)
			}
		}
		if got, want := strings.Join(keys, " "), frontierKeys(t, b); got != want {
			t.Errorf("contestants %q, want %q", got, want)
		}
		out := b.renderFrontier(res)
		wants := []string{generatedNote + " (sweepbench frontier)", "# The foreground frontier",
			"| C | the rail, defaults |", "| W8 | the rail, at most 8 MiB/s of WAL: `MAX_WAL_RATE=8MiB` |", "Idle foreground p99: ",
			"| I′ | the foreground alone again, at the round's end: no sweep |", "I′ is the foreground alone again"}
		if psi {
			wants = append(wants, "Waiting, as the kernel's pressure stall information counts it", ", waiting cpu ")
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("the report lacks %q:\n%s", want, out)
			}
		}
	})

	// -keep-template: the second run reuses the table the first kept, migrated, not seeded again.
	t.Run("frontier keeps its template", func(t *testing.T) {
		b := newTestBench(t, settings{run: "frontier", rows: 10_000, rounds: 1, window: 10 * time.Second, keepTemplate: true})
		name, seeded, err := b.keptTemplate(t.Context(), dense, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.drop(context.Background(), name) })
		c, err := pgx.Connect(t.Context(), b.dbURL(name))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Exec(t.Context(), `CREATE TABLE kept_mark ()`)
		c.Close(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		again, kept, err := b.keptTemplate(t.Context(), dense, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		var marked bool
		if err := b.admin.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, again).Scan(&marked); err != nil || !marked {
			t.Fatalf("the template %s is gone (%v)", again, err)
		}
		c, err = pgx.Connect(t.Context(), b.dbURL(again))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		if err := c.QueryRow(t.Context(), `SELECT to_regclass('kept_mark') IS NOT NULL`).Scan(&marked); err != nil || !marked || kept != seeded {
			t.Errorf("second run: template %s, mark kept %t (%v), %d eligible; want %s reused as it was, %d eligible", again, marked, err, kept, name, seeded)
		}
	})

	t.Run("crossover", func(t *testing.T) {
		b := newTestBench(t, settings{run: "crossover", rows: 10_000, rounds: 1})
		res, err := b.crossoverRun(t.Context())
		if err != nil {
			t.Fatal(err) // a path that deleted other than the eligible rows fails it
		}
		if want := len(crossoverLayouts) * len(crossoverShares); len(res.points) != want {
			t.Fatalf("%d points, want %d", len(res.points), want)
		}
		for _, p := range res.points {
			if len(p.heap) != 1 || len(p.index) != 1 || (p.auto != "heap" && p.auto != "index") {
				t.Errorf("%s %.1f%%: %d heap and %d index outcomes, auto %q", p.layout, 100*p.share, len(p.heap), len(p.index), p.auto)
			}
		}
		out := b.renderCrossover(res)
		for _, want := range []string{generatedNote + " (sweepbench crossover)", "sweepbench crossover -rows 10000", "`scattered_at`"} {
			if !strings.Contains(out, want) {
				t.Errorf("the report lacks %q:\n%s", want, out)
			}
		}
	})
}

// requirePartman skips the test when the server lacks pg_partman, or fails it under CI=true,
// where .ci/run installs it (scripts/pg ensure-ext partman).
func requirePartman(t *testing.T, u string) {
	t.Helper()
	c, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	var n int
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_partman'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 1 {
		return
	}
	msg := "pg_partman is not installed on the test server: run scripts/pg ensure-ext partman (Debian's postgresql-15-partman)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func TestLoadRunSettings(t *testing.T) {
	s, err := parse("partitions")
	if err != nil || s.run != "partitions" || s.rows != 10_000_000 {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	for _, tt := range []struct {
		args []string
		run  string
		rows int
	}{
		{[]string{"side-by-side"}, "side-by-side", 1_000_000},
		{[]string{"replica"}, "replica", 1_000_000},
		{[]string{"replica", "-rows", "200000"}, "replica", 200_000},
		{[]string{"partitions", "-rows", "200000"}, "partitions", 200_000},
	} {
		s, err := parse(tt.args...)
		if err != nil || s.run != tt.run || s.rows != tt.rows {
			t.Errorf("parse(%q) = run %q, %d rows, %v", tt.args, s.run, s.rows, err)
		}
	}
	for _, bad := range [][]string{
		{"replica", "yes"},
		{"partitions", "true"},
		{"partitions", "-rows", "9999"},
		{"partitions", "-rows", "1e7"},
		{"partitions", "scale"},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("parse(%q) accepted it", bad)
		}
	}
}

func TestParsePartitionLine(t *testing.T) {
	line := `{"time":"2026-11-30T10:00:00Z","level":"DEBUG","msg":"sweep partition","sweep":"events-partitions","pass":"expired",` +
		`"partition":"public.events_p2026_08_22","dropped":true,"detached":true,"took_ms":12.5,"failed":false}`
	b, ok := parseBatchLine([]byte(line))
	if !ok || b.partition != "public.events_p2026_08_22" || b.rows != 0 || b.took != 12500*time.Microsecond {
		t.Errorf("parseBatchLine = %+v, %v; want the partition, 12.5ms", b, ok)
	}
	if _, ok := parseBatchLine([]byte(`{"msg":"sweep partition","took_ms":1}`)); ok {
		t.Error("a partition line without its partition was accepted")
	}
	// Rows-per-batch figures leave the partition steps out.
	if got := medianRows([]batch{{partition: "p", took: time.Millisecond}, {size: 10, rows: 10, took: time.Millisecond}}); got != 10 {
		t.Errorf("medianRows = %d, want 10", got)
	}
}

func TestKeptFrom(t *testing.T) {
	midnight := time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC)
	noon := midnight.Add(12 * time.Hour)
	for _, tt := range []struct {
		rule         partRule
		cutoff, want time.Time
	}{
		{ruleRows, noon, noon},
		{ruleRail, noon, midnight},
		{rulePartman, noon, midnight},
		// A partition whose upper bound is the cutoff: the rail drops it (≤), pg_partman keeps
		// it (<).
		{ruleRail, midnight, midnight},
		{rulePartman, midnight, midnight.AddDate(0, 0, -1)},
	} {
		if got := tt.rule.keptFrom(tt.cutoff); !got.Equal(tt.want) {
			t.Errorf("rule %d, cutoff %s: keeps from %s, want %s", tt.rule, tt.cutoff, got, tt.want)
		}
	}
}

func TestOverLimit(t *testing.T) {
	o := outcome{batches: []batch{{took: 40 * time.Millisecond}, {took: 60 * time.Millisecond}}}
	o.peak.Replay = lagLimit + 60*time.Millisecond + lagDutyPaused
	if bound, ok := overLimit(o); !ok || bound != o.peak.Replay {
		t.Errorf("at the bound: %s, %v", bound, ok)
	}
	o.peak.Replay++
	if _, ok := overLimit(o); ok {
		t.Error("past the bound: accepted")
	}
}

// frontierKeys are the frontier's contestants in their order on b's server: B, then every
// setting whose wal_compression method the server takes.
func frontierKeys(t *testing.T, b *bench) string {
	t.Helper()
	methods, err := b.walCompressions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"B", "C", "C·1", "W32", "W16", "W8"}
	if slices.Contains(methods, "lz4") {
		keys = append(keys, "C·1 SZF", "C·1.5 SZF", "C·2 SZF W64", "C·2 SZ W64")
	}
	return strings.Join(append(keys, "I′"), " ")
}
