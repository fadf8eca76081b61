package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sweeprail/sweeprail/internal/classify"
	"github.com/sweeprail/sweeprail/internal/config"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// runsPath is the run history route.
const runsPath = "/internal/runs"

const historyUsage = `Usage: sweepcron history [--sweep NAME] [--limit N] [--json]

Prints the API's run history (GET /internal/runs), newest first as the API orders it: one line per
run, skipped and failed runs included, with indented lines for what went with a run's rows
(delete_with tables, cascades) and for its error. --json prints the
API's answer as it came. Under the table, each sweep's retention verdict (GET /internal/sweeps),
after the summary line the status page opens with. Needs API_URL and INTERNAL_SIGNING_KEY; INTERNAL_FETCH_TIMEOUT bounds the
request.

Flags:
`

// historyOptions are the command line of sweepcron history.
type historyOptions struct {
	sweep string
	// limit is how many runs to ask for; 0 leaves it to the API's default.
	limit int
	json  bool
}

// historyAnswer is GET /internal/runs (wire.History), with "runs" read as a pointer so that an
// answer without it is told from an empty history.
type historyAnswer struct {
	Runs       *[]wire.HistoryRun `json:"runs"`
	Unrecorded []wire.Unrecorded  `json:"unrecorded"`
}

// history prints the run history. Exit status: 0 printed (an empty history included), 1 the API
// answered but not with a history, or with runs it failed to record (printed after the table), 2
// the API was unreachable, 78 a configuration error.
func (c *cli) history(ctx context.Context, args []string, environ map[string]string) error {
	o, err := parseHistoryFlags(args, c.stderr)
	if err != nil {
		return err
	}
	cfg, err := config.LoadCron(environ)
	if err != nil {
		return &exitError{code: exitConfig, err: fmt.Errorf("configuration: %w", err)}
	}
	cl, err := newClient(cfg, c.now)
	if err != nil {
		return err
	}
	q := url.Values{}
	if o.sweep != "" {
		q.Set("sweep", o.sweep)
	}
	if o.limit > 0 {
		q.Set("limit", strconv.Itoa(o.limit))
	}
	u := cl.base.JoinPath(runsPath)
	// Encode sorts the keys, so the query signed and the query sent are one string.
	u.RawQuery = q.Encode()
	in := cl.send(ctx, http.MethodGet, u, nil).in
	switch {
	case in.TransportErr != nil:
		return exitf(exitUnreachable, "history: GET %s: API unreachable: %w", runsPath, in.TransportErr)
	case in.BodyErr != nil:
		return exitf(exitFailed, "history: GET %s: HTTP %d, body broke after %d bytes: %w", runsPath, in.StatusCode, len(in.Body), in.BodyErr)
	case in.StatusCode < 200 || in.StatusCode > 299:
		hint := authHint(in.StatusCode)
		if in.StatusCode == http.StatusNotFound && !bytes.Contains(in.Body, []byte("unknown_sweep")) {
			hint = " (does the API serve " + runsPath + "? It came with the run history)"
		}
		return exitf(exitFailed, "history: GET %s: %s%s", runsPath, classify.Classify(in).Detail, hint)
	}
	a, err := parseHistory(in.Body)
	if err != nil {
		return exitf(exitFailed, "history: GET %s: %w", runsPath, err)
	}
	if o.json {
		// The answer as it came: a consumer gets every field, also those this client does not know.
		if _, err := c.stdout.Write(append(bytes.TrimSpace(in.Body), '\n')); err != nil {
			return err
		}
	} else if err := writeHistory(c.stdout, *a.Runs, o.sweep); err != nil {
		return err
	} else if err := writeVerdicts(ctx, c.stdout, cl, o.sweep); err != nil {
		return err
	}
	return unrecordedError(a.Unrecorded)
}

// unrecordedError is the exit error for runs the API could not write to its history: they are
// missing from the table above, or shown unfinished, and a check that reads only the exit status
// must not take the history for complete.
func unrecordedError(runs []wire.Unrecorded) error {
	if len(runs) == 0 {
		return nil
	}
	lines := make([]string, 0, len(runs))
	for _, r := range runs {
		lines = append(lines, fmt.Sprintf("  %s %s run %s: %s", r.At.UTC().Format(time.RFC3339), r.Sweep, r.RunID, oneLine(r.Error)))
	}
	return exitf(exitFailed, "history: the API could not record %d run(s) in its history (see its log and sweeprail_history_write_failures_total):\n%s",
		len(runs), strings.Join(lines, "\n"))
}

// parseHistoryFlags reads the history command line; a bad one is a configuration error (78).
func parseHistoryFlags(args []string, stderr io.Writer) (historyOptions, error) {
	var o historyOptions
	fs := flag.NewFlagSet("sweepcron history", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, historyUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.sweep, "sweep", "", "only the runs of this sweep `name`")
	fs.IntVar(&o.limit, "limit", 0, "at most `N` runs, newest first (default: the API's)")
	fs.BoolVar(&o.json, "json", false, "print the API's JSON answer instead of a table")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, &exitError{code: exitOK}
		}
		return o, &exitError{code: exitConfig, err: fmt.Errorf("history: command line: %w", err)}
	}
	if fs.NArg() > 0 {
		return o, exitf(exitConfig, "history: command line: unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["limit"] && o.limit < 1 {
		return o, exitf(exitConfig, "history: command line: --limit=%d must be ≥ 1", o.limit)
	}
	if set["sweep"] {
		if _, err := routeFor(o.sweep); err != nil || strings.HasPrefix(o.sweep, "/") {
			return o, exitf(exitConfig, "history: command line: --sweep=%q is not a sweep name", o.sweep)
		}
	}
	return o, nil
}

// parseHistory reads the answer, refusing one without "runs" or with a run missing what the table
// is made of: an answer that is not a history must not print as an empty one.
func parseHistory(body []byte) (historyAnswer, error) {
	var a historyAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return a, fmt.Errorf("not a run history: %w", err)
	}
	if a.Runs == nil {
		return a, errors.New(`not a run history: no "runs"`)
	}
	for i, r := range *a.Runs {
		if r.RunID == "" || r.Sweep == "" || r.StartedAt.IsZero() {
			return a, fmt.Errorf("not a run history: run #%d has no runId, sweep or startedAt", i+1)
		}
	}
	return a, nil
}

// writeHistory prints the table: one line per run, in the API's order, and indented lines under
// a run for what went with its rows (delete_with children, cascades) and for its error, which are
// left out of the column widths.
func writeHistory(w io.Writer, runs []wire.HistoryRun, sweep string) error {
	if len(runs) == 0 {
		msg := "no runs recorded"
		if sweep != "" {
			msg = fmt.Sprintf("no runs recorded for sweep %q", sweep)
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	rows := [][]string{{"STARTED", "SWEEP", "DURATION", "STOP", "DELETED", "PROCESSED", "ARCHIVED", "DROPPED", "RUN", "REQUEST"}}
	notes := []string{""}
	for _, r := range runs {
		duration, stop := "-", ""
		if r.StopReason != nil {
			stop = string(*r.StopReason)
		}
		if r.FinishedAt != nil {
			duration = formatElapsed(r.FinishedAt.Sub(r.StartedAt))
		} else if stop == "" {
			stop = "unfinished"
		}
		if stop == "" && r.Skipped {
			stop = "skipped"
		}
		if r.Truncated {
			stop += " (truncated)"
		}
		// The lease-held answers, or the idle runs, of a minute share a row: say how many it stands for.
		if r.Requests > 1 {
			stop += fmt.Sprintf(" ×%d", r.Requests)
		}
		var processed int64
		var tc tableCounts
		for _, p := range r.Passes {
			processed += p.Processed
			tc.add(p.Children, p.Cascades)
		}
		rows = append(rows, []string{
			r.StartedAt.UTC().Format(time.RFC3339), r.Sweep, duration, stop,
			strconv.FormatInt(r.Deleted, 10), strconv.FormatInt(processed, 10), strconv.FormatInt(r.Archived, 10),
			strconv.FormatInt(r.PartitionsDropped, 10), r.RunID, orDash(r.RequestID),
		})
		// What went with the run's rows, then its error, each on a line of its own under it.
		var note []string
		if with := tc.String(); with != "" {
			note = append(note, "  with"+with)
		}
		if e := r.Error; e != nil {
			note = append(note, fmt.Sprintf("  error %s in pass %q: %s", e.Code, e.Pass, oneLine(e.Message)))
		}
		notes = append(notes, strings.Join(note, "\n"))
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for n, row := range rows {
		for i, cell := range row {
			if i == len(row)-1 {
				b.WriteString(cell)
				break
			}
			b.WriteString(cell + strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+2))
		}
		b.WriteString("\n")
		if notes[n] != "" {
			b.WriteString(notes[n] + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatElapsed rounds a run's duration for the table: milliseconds under a second, else tenths.
func formatElapsed(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a database message on the error's line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
