package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sweeprail/sweeprail/internal/config"
	"github.com/sweeprail/sweeprail/internal/signing"
)

const curlUsage = `Usage: sweepcron curl <name-or-route> [--dry-run] [--batch-size N]

Prints a curl command that POSTs one sweep route with a fresh signature over exactly the body it
sends. Paste it within the API's SIGNATURE_MAX_AGE (60s by default); it works once (the nonce is
single-use). <name-or-route> is a sweep name (notifications) or a route (/internal/sweep-notifications).
Needs API_URL and INTERNAL_SIGNING_KEY.

Flags:
`

// curl prints a ready-to-paste, signed curl command for one route. It makes no request: an
// operator uses it where the API is reachable but sweepcron is not the tool at hand, mostly for
// a dry-run count.
func (c *cli) curl(args []string, environ map[string]string) error {
	var o options
	fs := flag.NewFlagSet("sweepcron curl", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprint(c.stderr, curlUsage)
		fs.PrintDefaults()
	}
	fs.BoolVar(&o.dryRun, "dry-run", false, "ask for counts instead of deleting")
	fs.IntVar(&o.batchSize, "batch-size", 0, fmt.Sprintf("first batch size of each pass, %d–%d", minBatchSize, maxBatchSize))
	target, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &exitError{code: exitOK}
		}
		return &exitError{code: exitConfig, err: fmt.Errorf("curl: command line: %w", err)}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["batch-size"] && (o.batchSize < minBatchSize || o.batchSize > maxBatchSize) {
		return exitf(exitConfig, "curl: command line: --batch-size=%d must be within %d–%d", o.batchSize, minBatchSize, maxBatchSize)
	}
	route, err := routeFor(target)
	if err != nil {
		return exitf(exitConfig, "curl: %w", err)
	}
	// The command needs only the URL and the key. A malformed INTERNAL_FETCH_TIMEOUT, which
	// this command never uses, must not stand between an operator and a manual run.
	env := maps.Clone(environ)
	delete(env, "INTERNAL_FETCH_TIMEOUT")
	cfg, err := config.LoadCron(env)
	if err != nil {
		return &exitError{code: exitConfig, err: fmt.Errorf("configuration: %w", err)}
	}
	base, err := url.Parse(cfg.APIURL)
	if err != nil {
		return exitf(exitConfig, "configuration: API_URL: %w", err)
	}
	u := base.JoinPath(route)
	body := o.body()
	req, err := http.NewRequest(http.MethodPost, u.String(), nil)
	if err != nil {
		return exitf(exitConfig, "curl: build request for %s: %w", u.Redacted(), err)
	}
	now := c.now()
	// The request is only a carrier for what is signed (method, path, query); curl sends the
	// same, and the body it sends is the one signed here, byte for byte.
	signing.SignRequest(req, body, []byte(cfg.SigningKey), now)
	fmt.Fprintf(c.stdout, "curl -sS -X POST -H %s -H %s --data %s %s\n",
		shellQuote("Content-Type: application/json"),
		shellQuote(signing.Header+": "+req.Header.Get(signing.Header)),
		shellQuote(string(body)),
		shellQuote(u.String()))
	fmt.Fprintf(c.stderr, "# signed at %s: paste within the API's SIGNATURE_MAX_AGE (60s by default); it works once\n",
		now.UTC().Format(time.RFC3339))
	return nil
}

// parseInterleaved parses fs from args and returns the one positional argument, which may stand
// before, between or after the flags: the flag package alone stops at the first positional, and
// "sweepcron curl notifications --dry-run" is how an operator types it.
func parseInterleaved(fs *flag.FlagSet, args []string) (string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch len(pos) {
	case 0:
		return "", errors.New("missing <name-or-route>")
	case 1:
		return pos[0], nil
	}
	return "", fmt.Errorf("want one <name-or-route>, got %q", pos)
}

// routeFor turns a sweep name or a route into a route.
func routeFor(target string) (string, error) {
	if strings.HasPrefix(target, "/") {
		return target, checkRoute(target)
	}
	if target == "" || strings.ContainsAny(target, "/?#% \t\r\n'\"") {
		return "", fmt.Errorf("%q is neither a sweep name nor a route starting with /", target)
	}
	return "/internal/sweep-" + target, nil
}

// shellQuote quotes s for a POSIX shell: inside single quotes, each inner quote closes the
// quoting, adds an escaped quote and reopens it.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
