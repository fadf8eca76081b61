// Command sweepbench measures the retention rail on a throwaway PostgreSQL, one run per
// subcommand, and writes each run's tables whole to docs/bench/<run>.md; docs/BENCHMARKS.md says
// what each run measures and what its numbers mean. `sweepbench -h` lists the runs and
// `sweepbench <run> -h` a run's flags. make bench starts a cluster with fsync on and runs
// side-by-side, replica and paths against it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Environ(), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sweepbench:", err)
		os.Exit(1)
	}
}

// settings is one run's configuration, from its flags.
type settings struct {
	run         string
	databaseURL string
	binDir      string
	// out is the report's file; "-" only prints it.
	out string
	// rows sizes the run's main table; sparseRows the paths run's sparse one.
	rows, sparseRows int
	// rounds repeats every contestant, so one burst of a noisy neighbour is outvoted.
	rounds int
	// variantEnv and variantBin define C′, the rail with other settings or another build of the
	// API, run in every round next to C: how a proposed default or engine change is measured.
	variantEnv []string
	variantBin string
	// roundsCap caps the rounds of the runs that add rounds for disturbed ones; 0 is
	// maxRoundsFactor × rounds. Tests set 1: they check the runs work, not the numbers.
	roundsCap int
	// window is how long the frontier run lets each contestant drain beside the foreground.
	window time.Duration
	// keepTemplate keeps the frontier's seeded table for the next run, and reuses one kept.
	keepTemplate bool
	// only names the frontier's settings to run (B always runs); empty runs them all.
	only keyList
}

// runDef is one subcommand: what it measures, which flags it takes, and the run itself, which
// returns its report (written even when it also returns an error, as the partitions run does when
// a contestant was not exact).
type runDef struct {
	name, summary string
	// rows is the -rows default (0: the run takes no -rows); minRows its smallest value.
	rows, minRows int
	// rounds, sparse, variant and window say whether it takes -rounds, -sparse-rows,
	// -variant-* and -window.
	rounds, sparse, variant, window bool
	measure                         func(b *bench, ctx context.Context) (string, error)
}

// Below 10,000 rows a batch of 1000 is a tenth of the table: nothing left to measure.
const minRows, maxRows = 10_000, 100_000_000

// runDefs are the subcommands, in the order the usage lists them. A function, not a variable:
// the runs' reports name their own invocation, which reads these.
func runDefs() []runDef {
	return []runDef{
		{name: "side-by-side", summary: "the rail against a monolithic DELETE and ordered batches, with a foreground workload",
			rows: 1_000_000, minRows: minRows, rounds: true, variant: true, measure: report((*bench).sideBySide, (*bench).renderSideBySide)},
		{name: "paths", summary: "each access path on a dense, a sparse, a job-queue and a locked table",
			rows: 1_000_000, minRows: minRows, rounds: true, sparse: true, variant: true, measure: report((*bench).pathsRun, (*bench).renderPaths)},
		{name: "frontier", summary: "the rail at gentler settings and WAL budgets beside B: rows/s against the foreground's p99",
			rows: frontierTableRows, minRows: minRows, rounds: true, variant: true, window: true, measure: report((*bench).frontierRun, (*bench).renderFrontier)},
		{name: "crossover", summary: "the heap path against the index path over the eligible share",
			rows: 1_000_000, minRows: minRows, rounds: true, measure: report((*bench).crossoverRun, (*bench).renderCrossover)},
		{name: "unindexed", summary: "a pass no index serves, by heap ranges, against a monolithic DELETE (10% and 70% eligible)",
			rows: 1_000_000, minRows: minRows, rounds: true, measure: report((*bench).unindexedRun, (*bench).renderUnindexed)},
		{name: "scale", summary: "the rail's per-batch cost at 1M and at 5M rows", measure: report((*bench).scaleRun, (*bench).renderScale)},
		{name: "partitions", summary: "dropping whole partitions: the rail against pg_partman (needs pg_partman)",
			rows: 10_000_000, minRows: partMinRows, rounds: true, measure: report((*bench).partitionsRun, (*bench).renderPartitions)},
		{name: "archive", summary: "archive_to (a local table, a postgres_fdw foreign table) against a plain delete",
			rows: 1_000_000, minRows: minRows, rounds: true, measure: report((*bench).archiveRun, (*bench).renderArchive)},
		{name: "replica", summary: "how far behind each drain leaves a streaming standby, healthy and slowed",
			rows: 1_000_000, minRows: minRows, rounds: true, measure: report((*bench).replicaRun, (*bench).renderReplica)},
	}
}

// report is a run's measure: run it, then render its result. A result is rendered despite
// errInexact, which fails the run only after its report is written.
func report[R any](run func(*bench, context.Context) (R, error), render func(*bench, R) string) func(*bench, context.Context) (string, error) {
	return func(b *bench, ctx context.Context) (string, error) {
		res, err := run(b, ctx)
		if err != nil && !errors.Is(err, errInexact) {
			return "", err
		}
		return render(b, res), err
	}
}

func findRun(name string) (runDef, bool) {
	for _, r := range runDefs() {
		if r.name == name {
			return r, true
		}
	}
	return runDef{}, false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sweepbench <run> [flags]   (sweepbench <run> -h: the run's flags)\n\nruns:")
	for _, r := range runDefs() {
		fmt.Fprintf(w, "  %-13s %s\n", r.name, r.summary)
	}
}

// parseArgs reads the subcommand and its flags; -database-url defaults to DATABASE_URL in
// environ. It returns flag.ErrHelp after printing the usage that -h asked for.
func parseArgs(args, environ []string, stderr io.Writer) (settings, error) {
	if len(args) == 0 {
		usage(stderr)
		return settings{}, errors.New("no run named")
	}
	if a := args[0]; a == "-h" || a == "-help" || a == "--help" || a == "help" {
		usage(stderr)
		return settings{}, flag.ErrHelp
	}
	def, ok := findRun(args[0])
	if !ok {
		usage(stderr)
		return settings{}, fmt.Errorf("unknown run %q", args[0])
	}
	s := settings{run: def.name, rounds: defaultRounds(def), sparseRows: 5_000_000, window: defaultWindow}
	var dbDefault string
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "DATABASE_URL="); ok {
			dbDefault = v
		}
	}
	fs := flag.NewFlagSet("sweepbench "+def.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sweepbench %s [flags]: %s\n", def.name, def.summary)
		fs.PrintDefaults()
	}
	fs.StringVar(&s.databaseURL, "database-url", dbDefault, "the bench cluster's maintenance database (default $DATABASE_URL)")
	fs.StringVar(&s.binDir, "bin", "bin", "the folder holding the api and sweepcron binaries")
	fs.StringVar(&s.out, "out", filepath.Join("docs", "bench", def.name+".md"), `the report to write whole ("-": only print it)`)
	if def.rows > 0 {
		s.rows = def.rows
		fs.Var(intRange{&s.rows, def.minRows, maxRows}, "rows", "rows seeded into the run's table")
	}
	if def.rounds {
		fs.Var(intRange{&s.rounds, 1, 20}, "rounds", "rounds of each contestant, reported as medians")
	}
	if def.sparse {
		// 1% of it is eligible: below 100,000 rows that is under a batch or two.
		fs.Var(intRange{&s.sparseRows, 100_000, maxRows}, "sparse-rows", "rows of the sparse table, 1% eligible")
	}
	if def.window {
		fs.DurationVar(&s.window, "window", defaultWindow, "how long each contestant drains beside the foreground, at most (10s..110s)")
		fs.BoolVar(&s.keepTemplate, "keep-template", false, "keep the seeded table for the next run with these -rows, and reuse one a run before kept")
		fs.Var(&s.only, "only", `"KEY,KEY…": run only these of the rail's settings, by key (B always runs)`)
	}
	if def.variant {
		fs.Var((*envList)(&s.variantEnv), "variant-env", `"KEY=VALUE …": adds C′, the rail with these API settings`)
		fs.StringVar(&s.variantBin, "variant-bin", "", "a folder with another build of api: adds C′ running it")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return s, err
	}
	switch {
	case fs.NArg() > 0:
		return s, fmt.Errorf("sweepbench %s: unexpected argument %q (one run at a time)", def.name, fs.Arg(0))
	case s.databaseURL == "":
		return s, errors.New("-database-url (or DATABASE_URL) is required: the bench cluster's URL (make bench starts one)")
	case s.out == "" || s.binDir == "":
		return s, errors.New("-out and -bin must not be empty")
	case def.window && (s.window < 10*time.Second || s.window > 110*time.Second):
		return s, fmt.Errorf("-window %s: want 10s..110s (a p99 needs thousands of operations; the API's write timeout bounds a run)", s.window)
	}
	return s, nil
}

// frontierTableRows is the frontier's -rows default: 20.8M eligible rows, more than any
// contestant but the defaults deletes in a 30 s window on 2 cores, so each drain lasts the window
// beside the foreground, on a table some 13 times the bench cluster's shared_buffers. About 25
// minutes.
const frontierTableRows = 26_000_000

// defaultWindow is the frontier's -window: 12,000 foreground operations per contestant and round.
const defaultWindow = 30 * time.Second

// defaultRounds is def's -rounds default: 2 for the frontier, whose rounds are long.
func defaultRounds(def runDef) int {
	if def.window {
		return 2
	}
	return 3
}

// intRange is an int flag refused outside lo..hi.
type intRange struct {
	p      *int
	lo, hi int
}

func (f intRange) String() string {
	if f.p == nil {
		return ""
	}
	return strconv.Itoa(*f.p)
}

func (f intRange) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < f.lo || n > f.hi {
		return fmt.Errorf("want a whole number within %d..%d", f.lo, f.hi)
	}
	*f.p = n
	return nil
}

// envList is a flag of space-separated KEY=VALUE pairs.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	*e = nil
	for kv := range strings.FieldsSeq(v) {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("%q is not KEY=VALUE", kv)
		}
		*e = append(*e, kv)
	}
	return nil
}

// keyList is a flag of comma-separated keys of the frontier's settings.
type keyList []string

func (k *keyList) String() string { return strings.Join(*k, ",") }

func (k *keyList) Set(v string) error {
	*k = nil
	for key := range strings.SplitSeq(v, ",") {
		key = strings.TrimSpace(key)
		if !slices.ContainsFunc(frontierSettings, func(s frontierSetting) bool { return s.key == key }) {
			var keys []string
			for _, s := range frontierSettings {
				keys = append(keys, s.key)
			}
			return fmt.Errorf("%q is no setting of the frontier's (%s)", key, strings.Join(keys, ", "))
		}
		*k = append(*k, key)
	}
	return nil
}

// invocation is the command line that reproduces s, as the report records it: the run and the
// flags that differ from its defaults (not the cluster's URL, the binaries or the output).
func (s settings) invocation() string {
	def, _ := findRun(s.run)
	parts := []string{"sweepbench", s.run}
	if def.rows > 0 && s.rows != def.rows {
		parts = append(parts, "-rows "+strconv.Itoa(s.rows))
	}
	if def.sparse && s.sparseRows != 5_000_000 {
		parts = append(parts, "-sparse-rows "+strconv.Itoa(s.sparseRows))
	}
	if def.rounds && s.rounds != defaultRounds(def) {
		parts = append(parts, "-rounds "+strconv.Itoa(s.rounds))
	}
	if def.window && s.window != defaultWindow {
		parts = append(parts, "-window "+s.window.String())
	}
	if len(s.only) > 0 {
		parts = append(parts, "-only '"+s.only.String()+"'")
	}
	if len(s.variantEnv) > 0 {
		parts = append(parts, "-variant-env '"+strings.Join(s.variantEnv, " ")+"'")
	}
	if s.variantBin != "" {
		parts = append(parts, "-variant-bin "+s.variantBin)
	}
	return strings.Join(parts, " ")
}

// run is the whole program with its arguments and environment injected, so that its parts are
// testable in-process. Progress goes to stderr, the report to stdout and to its file.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	s, err := parseArgs(args, environ, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	def, _ := findRun(s.run)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := newBench(ctx, s, stderr)
	if err != nil {
		return err
	}
	defer b.close()
	report, err := def.measure(b, ctx)
	if report == "" {
		return err
	}
	fmt.Fprintln(stdout, report)
	if s.out != "-" {
		if werr := writeReport(s.out, report); werr != nil {
			return errors.Join(err, werr)
		}
		b.logf("wrote %s", s.out)
	}
	return err
}
