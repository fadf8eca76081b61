// Command sweepcron is sweeprail's cron client: it discovers every sweep route (GET
// /internal/sweeps), calls each with a signed POST, classifies each answer (internal/classify),
// and prints a line per route and a summary. Only an unreachable API stops it at a failed route.
//
//	sweepcron [--only a,b] [--dry-run] [--batch-size N] [--json] [--every 15m]
//	sweepcron curl <name-or-route> [--dry-run] [--batch-size N]
//	sweepcron history [--sweep NAME] [--limit N] [--json]
//
// Environment: API_URL, INTERNAL_SIGNING_KEY, INTERNAL_FETCH_TIMEOUT (default 150s). Exit status
// (with --every, a tick's failures are printed and the loop goes on):
//
//	0   every route ok, truncated or skipped; --every ended by SIGINT or SIGTERM
//	1   a route failed, discovery answered but not with a catalog, or a single run was
//	    interrupted before every route was called
//	2   the API was unreachable
//	78  a configuration error (EX_CONFIG), the only one that ends --every early: a bad command
//	    line, an --only name the catalog does not hold, a fetch timeout not above the server's
//	    write timeout
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sweeprail/sweeprail/internal/config"
)

// The exit statuses of docs/DESIGN.md.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUnreachable = 2
	// exitConfig is sysexits' EX_CONFIG.
	exitConfig = 78
)

func main() {
	err := run(context.Background(), os.Args[1:], config.Environ(os.Environ()), os.Stdout, os.Stderr)
	if err != nil && err.Error() != "" {
		fmt.Fprintln(os.Stderr, "sweepcron:", err)
	}
	os.Exit(exitCode(err))
}

// exitError carries the exit status an error maps to.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitf returns an exitError with code and a formatted message (%w works).
func exitf(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// exitCode maps run's error to the process exit status. An error without an exitError in its
// chain is a failure (1), never success: an unexpected error must not look like a clean run.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitFailed
}

// run is the whole program, minus the process: tests call it in-process with an environment map
// and buffers, and read the exit status from the returned error with exitCode.
//
// The environment comes as a map, not a getenv function, because config.LoadCron reads a map:
// main builds it from os.Environ and tests pass exactly the variables they mean.
func run(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default handling, so that a second SIGINT or SIGTERM
	// kills the process at once: the first one waits for the route in flight, which can take up
	// to INTERNAL_FETCH_TIMEOUT, and an operator must be able to cut that short.
	go func() {
		<-ctx.Done()
		stop()
	}()
	c := &cli{stdout: stdout, stderr: stderr, now: time.Now}
	return c.run(ctx, args, environ)
}

// cli holds what every command shares: where output goes and the clock, injected so tests can
// pin the time a signature is made at.
type cli struct {
	stdout, stderr io.Writer
	now            func() time.Time
}

func (c *cli) run(ctx context.Context, args []string, environ map[string]string) error {
	if len(args) > 0 && args[0] == "curl" {
		return c.curl(args[1:], environ)
	}
	if len(args) > 0 && args[0] == "history" {
		return c.history(ctx, args[1:], environ)
	}
	opts, err := parseFlags(args, c.stderr)
	if err != nil {
		return err
	}
	cfg, err := config.LoadCron(environ)
	if err != nil {
		return &exitError{code: exitConfig, err: fmt.Errorf("configuration: %w", err)}
	}
	r, err := newRunner(cfg, opts, c)
	if err != nil {
		return err
	}
	if opts.every > 0 {
		return r.loop(ctx)
	}
	return r.tick(ctx)
}
