// Command sweepbench is `make bench`: it measures the retention rail side by side with the two
// things an operator would otherwise reach for, on a throwaway PostgreSQL, and writes the table
// to docs/BENCHMARKS.md.
//
// On one seeded notifications table (BENCH_ROWS rows, 80% eligible), each contestant gets a fresh
// copy of one template database:
//
//	A   one monolithic DELETE, as an operator types it in psql: the physical reference;
//	A′  the same DELETE with the cutoff bound as a value, as a script sends it (another plan);
//	B   the shape other tools ship: DELETE … WHERE id IN (SELECT id … ORDER BY read_at LIMIT 1000
//	    FOR UPDATE SKIP LOCKED), one transaction per batch;
//	C   the rail end to end: `api serve` with default settings and `sweepcron --only
//	    notifications`, run again while the answer is truncated.
//
// A foreground workload (inserting notifications and marking fresh ones read) runs alone first,
// as the idle baseline, and then during each contestant, recording its latency.
//
// Then the replica-lag run (issue 20, replica.go): a streaming standby of the cluster, healthy
// and then slowed on purpose, and how far behind A, C and C with MAX_REPLICA_LAG=1s leave it
// (and, against the slow standby, C with MAX_REPLICA_LAG_BYTES as well).
//
// Then the paths run (issue 16, paths.go): each access path (heap block ranges, the index
// keyset) on a dense, a sparse, a job-queue and a locked table, against the monolithic DELETE.
//
// BENCH_SCALE=1 runs the scale run instead: the rail's per-batch cost at 1M and at 5M rows.
// BENCH_PARTITIONS=1 runs the partitions run instead (issue 17, partitions.go): retention by
// dropping whole partitions, the rail against pg_partman and against batched deletes.
// BENCH_CROSSOVER=1 runs the crossover run instead (crossover.go): the heap path against the
// index path over the eligible share, the measurement behind the engine's choice between them.
//
// Environment:
//
//	BENCH_DATABASE_URL  the bench cluster's maintenance database, required (make bench starts
//	                    one with scripts/pg, fsync on, and passes its URL)
//	BENCH_ROWS          rows seeded into notifications (default 1000000)
//	BENCH_ROUNDS        rounds of each run, reported as medians (default 3)
//	BENCH_SCALE         1 to run the scale run instead of the side-by-side one (default 0)
//	BENCH_ARCHIVE       1 to run the archive run instead: archive_to (a local table, a postgres_fdw
//	                    foreign table) against a plain delete of the same rows
//	BENCH_REPLICA       1: the replica-lag run after the side-by-side one (default); 0: leave it
//	                    out; only: the replica-lag run alone
//	BENCH_PARTITIONS    1 to run the partitions run instead of the side-by-side one (default 0)
//	BENCH_PARTITION_ROWS rows of the partitions run's table (default 10000000)
//	BENCH_BIN           the folder holding the api and sweepcron binaries (default bin)
//	BENCH_VARIANT_ENV   "KEY=VALUE …": adds C′, the rail with these API settings, to every round
//	BENCH_VARIANT_BIN   a folder with another build of api: adds C′ running it (with
//	                    BENCH_VARIANT_ENV, if set), to measure an engine change side by side
//	BENCH_PATHS         1: the paths run (paths.go) after the side-by-side and replica-lag ones
//	                    (default); 0: leave it out; only: the paths run alone
//	BENCH_SPARSE_ROWS   rows of the paths run's sparse table, 1% eligible (default 5000000)
//	BENCH_CROSSOVER     1 to run the crossover run (crossover.go) instead: heap against index
//	                    over the eligible share, which sets the engine's choice
//	BENCH_OUT           the report to update (default docs/BENCHMARKS.md; "-" to only print)
//	BENCH_COMMAND       the command recorded in the report (default "make bench")
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sweeprail/sweeprail/internal/config"
)

func main() {
	if err := run(context.Background(), config.Environ(os.Environ()), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sweepbench:", err)
		os.Exit(1)
	}
}

// settings is the bench's configuration, from the environment.
type settings struct {
	databaseURL string
	rows        int
	scale       bool
	archive     bool
	binDir      string
	out         string
	command     string
	// rounds repeats every contestant, so one burst of a noisy neighbour is outvoted.
	rounds int
	// variantEnv and variantBin define C′, the rail with other settings or another build of the
	// API, run in every round next to C: how a proposed default or engine change is measured.
	variantEnv []string
	variantBin string
	// replica is BENCH_REPLICA: replicaOn, replicaOff or replicaOnly.
	replica string
	// partitions runs the partitions run, on a table of partitionRows rows.
	partitions    bool
	partitionRows int
	// roundsCap caps the rounds of the replica-lag, partitions and paths runs, disturbed ones included;
	// 0 is maxRoundsFactor × rounds. Tests set 1: they check the runs work, not the numbers.
	roundsCap int
	// sideBySide and paths say which runs make bench makes (BENCH_REPLICA and BENCH_PATHS);
	// crossover replaces them (BENCH_CROSSOVER); sparseRows sizes the paths run's sparse table.
	sideBySide, paths, crossover bool
	sparseRows                   int
}

// The values of BENCH_REPLICA.
const (
	replicaOn   = "1"
	replicaOff  = "0"
	replicaOnly = "only"
)

// The sizes of the scale run: the "per-batch cost at 1M and at 5M rows".
const (
	scaleSmall = 1_000_000
	scaleLarge = 5_000_000
)

func loadSettings(environ map[string]string) (settings, error) {
	s := settings{
		databaseURL: environ["BENCH_DATABASE_URL"],
		rows:        1_000_000,
		binDir:      "bin",
		out:         "docs/BENCHMARKS.md",
		command:     "make bench",
		rounds:      3,
		replica:     replicaOn,
		sideBySide:  true,
		paths:       true,
		sparseRows:  5_000_000,
		// The size: 10M rows over 100 daily partitions.
		partitionRows: 10_000_000,
	}
	if s.databaseURL == "" {
		return s, fmt.Errorf("BENCH_DATABASE_URL is required: the bench cluster's URL (make bench starts one)")
	}
	if v, ok := environ["BENCH_ROWS"]; ok {
		n, err := strconv.Atoi(v)
		// Below 10,000 rows a batch of 1000 is a tenth of the table: nothing left to measure.
		if err != nil || n < 10_000 || n > 100_000_000 {
			return s, fmt.Errorf("BENCH_ROWS=%q: want a whole number within 10000..100000000", v)
		}
		s.rows = n
	}
	if v, ok := environ["BENCH_ROUNDS"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 20 {
			return s, fmt.Errorf("BENCH_ROUNDS=%q: want a whole number within 1..20", v)
		}
		s.rounds = n
	}
	if v := environ["BENCH_VARIANT_ENV"]; v != "" {
		for kv := range strings.FieldsSeq(v) {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return s, fmt.Errorf("BENCH_VARIANT_ENV: %q is not KEY=VALUE", kv)
			}
			s.variantEnv = append(s.variantEnv, kv)
		}
	}
	if v := environ["BENCH_VARIANT_BIN"]; v != "" {
		s.variantBin = v
	}
	switch v := environ["BENCH_SCALE"]; v {
	case "", "0":
	case "1":
		s.scale = true
	default:
		return s, fmt.Errorf("BENCH_SCALE=%q: want 0 or 1", v)
	}
	if err := loadRunSettings(environ, &s); err != nil {
		return s, err
	}
	switch v := environ["BENCH_ARCHIVE"]; v {
	case "", "0":
	case "1":
		if s.scale {
			return s, fmt.Errorf("BENCH_ARCHIVE=1 and BENCH_SCALE=1: run one at a time")
		}
		s.archive = true
	default:
		return s, fmt.Errorf("BENCH_ARCHIVE=%q: want 0 or 1", v)
	}
	if err := loadPathsSettings(environ, &s); err != nil {
		return s, err
	}
	for key, dst := range map[string]*string{"BENCH_BIN": &s.binDir, "BENCH_OUT": &s.out, "BENCH_COMMAND": &s.command} {
		if v, ok := environ[key]; ok {
			if v == "" {
				return s, fmt.Errorf("%s is set but empty: unset it for the default %q", key, *dst)
			}
			*dst = v
		}
	}
	return s, nil
}

// run is the whole program with its environment injected, so its parts are testable in-process.
// Progress goes to stderr, the table to stdout.
func run(ctx context.Context, environ map[string]string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := loadSettings(environ)
	if err != nil {
		return err
	}
	began := time.Now()
	b, err := newBench(ctx, s, stderr)
	if err != nil {
		return err
	}
	defer b.close()

	// Each section is written as soon as its run ends, so that a later run's failure keeps it.
	emit := func(section, marker string) error {
		fmt.Fprintln(stdout, section)
		if s.out == "-" {
			return nil
		}
		if err := updateReport(s.out, marker, section); err != nil {
			return err
		}
		b.logf("wrote %s", s.out)
		return nil
	}
	switch {
	case s.archive:
		res, err := b.archiveRun(ctx)
		if err != nil {
			return err
		}
		res.elapsed = time.Since(began)
		return emit(renderArchive(b.machine, s, res), archiveMarker)
	case s.scale:
		res, err := b.scaleRun(ctx)
		if err != nil {
			return err
		}
		res.elapsed = time.Since(began)
		return emit(renderScale(b.machine, s, res), scaleMarker)
	case s.partitions:
		res, err := b.partitionsRun(ctx)
		if err != nil {
			return err
		}
		res.elapsed = time.Since(began)
		if err := emit(renderPartitions(b.machine, s, res), partitionsMarker); err != nil {
			return err
		}
		if bad := res.inexact(); len(bad) > 0 {
			return fmt.Errorf("the partitions run's exactness check failed (the report says where):\n%s", strings.Join(bad, "\n"))
		}
		return nil
	case s.crossover:
		res, err := b.crossoverRun(ctx)
		if err != nil {
			return err
		}
		return emit(renderCrossover(b.machine, s, res), crossoverMarker)
	}
	if s.sideBySide {
		res, err := b.sideBySide(ctx)
		if err != nil {
			return err
		}
		res.elapsed = time.Since(began)
		if err := emit(renderSideBySide(b.machine, s, res), sideMarker); err != nil {
			return err
		}
	}
	if s.replica != replicaOff {
		from := time.Now()
		res, err := b.replicaRun(ctx)
		if err != nil {
			return err
		}
		res.elapsed = time.Since(from)
		if err := emit(renderReplica(b.machine, s, res), replicaMarker); err != nil {
			return err
		}
	}
	if s.paths {
		res, err := b.pathsRun(ctx)
		if err != nil {
			return err
		}
		return emit(renderPaths(b.machine, s, res), pathsMarker)
	}
	return nil
}
