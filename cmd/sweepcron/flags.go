package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// The bounds of a request's batchSize, as the API checks them (wire.MinRequestBatchSize..
// wire.MaxRequestBatchSize). Checking here too turns a typo into a configuration error before any
// route is called, instead of one 400 per route.
const (
	minBatchSize = wire.MinRequestBatchSize
	maxBatchSize = wire.MaxRequestBatchSize
)

// options are the command line of a run.
type options struct {
	// only restricts the run to these sweep names, called in this order; empty means every
	// discovered sweep, in catalog order.
	only      []string
	dryRun    bool
	batchSize int
	json      bool
	// every repeats the run at this interval until a signal; zero runs once.
	every time.Duration
}

const usage = `Usage:
  sweepcron [flags]                                    call every sweep route once
  sweepcron curl <name-or-route> [--dry-run] [--batch-size N]
                                                       print a signed curl command
  sweepcron history [--sweep NAME] [--limit N] [--json]
                                                       print the run history (GET /internal/runs)

Environment: API_URL, INTERNAL_SIGNING_KEY, INTERNAL_FETCH_TIMEOUT (default 150s).
Exit status: 0 all ok/truncated/skipped, 1 a route failed, 2 API unreachable, 78 configuration.

Flags:
`

// parseFlags reads the run's command line. A bad command line is a configuration error (78): the
// contract has no separate usage status, and to a scheduler both mean "fix the invocation".
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("sweepcron", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	only := fs.String("only", "", "comma-separated sweep `names` to call, in this order (default: every discovered sweep)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "ask every route for counts instead of deleting")
	fs.IntVar(&o.batchSize, "batch-size", 0, fmt.Sprintf("first batch size of each pass, %d–%d (default: the server's BATCH_SIZE)", minBatchSize, maxBatchSize))
	fs.BoolVar(&o.json, "json", false, "print one JSON document per run on stdout instead of text")
	fs.DurationVar(&o.every, "every", 0, "repeat at this `interval` until SIGINT/SIGTERM (e.g. 15m)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, &exitError{code: exitOK}
		}
		// The flag package has already printed the problem and the usage.
		return o, &exitError{code: exitConfig, err: fmt.Errorf("command line: %w", err)}
	}
	if fs.NArg() > 0 {
		return o, exitf(exitConfig, "command line: unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["batch-size"] && (o.batchSize < minBatchSize || o.batchSize > maxBatchSize) {
		return o, exitf(exitConfig, "command line: --batch-size=%d must be within %d–%d", o.batchSize, minBatchSize, maxBatchSize)
	}
	if set["every"] && o.every <= 0 {
		return o, exitf(exitConfig, "command line: --every=%s must be > 0", o.every)
	}
	if set["only"] {
		names, err := splitNames(*only)
		if err != nil {
			return o, exitf(exitConfig, "command line: --only=%q: %w", *only, err)
		}
		o.only = names
	}
	return o, nil
}

// splitNames splits a comma-separated list of sweep names, dropping repeats (calling a sweep
// twice in one run would only find its lease held or nothing left).
func splitNames(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for n := range strings.SplitSeq(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, errors.New("empty name")
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}
