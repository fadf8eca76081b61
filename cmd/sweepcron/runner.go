package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sweeprail/sweeprail/internal/classify"
	"github.com/sweeprail/sweeprail/internal/config"
)

// runner runs the sweeps of one configuration, once per tick.
type runner struct {
	cfg    config.Cron
	opts   options
	client *client
	cli    *cli
}

func newRunner(cfg config.Cron, opts options, c *cli) (*runner, error) {
	cl, err := newClient(cfg, c.now)
	if err != nil {
		return nil, err
	}
	return &runner{cfg: cfg, opts: opts, client: cl, cli: c}, nil
}

// routeResult is one route's line of the report.
type routeResult struct {
	Sweep      string            `json:"sweep"`
	Route      string            `json:"route"`
	Category   classify.Category `json:"category"`
	Failed     bool              `json:"failed"`
	StatusCode int               `json:"statusCode,omitempty"`
	// ElapsedMs is the client's view of the exchange, useful when there is no answer to say
	// how long the server took (a timeout, a broken body).
	ElapsedMs int64  `json:"elapsedMs"`
	Detail    string `json:"detail,omitempty"`
	// Answer is the sweep answer as the API sent it, every field kept, those this client does
	// not know too; absent when the body held none. parsed is what the text line reads of it.
	Answer json.RawMessage `json:"answer,omitempty"`
	parsed *classify.Answer
}

// report is one tick: the --json document, and what the text summary is made from.
type report struct {
	StartedAt time.Time `json:"startedAt"`
	// TraceID is the W3C trace id every request of the tick carried: the API's spans of this
	// tick, when it traces, are under it.
	TraceID string        `json:"traceId"`
	DryRun  bool          `json:"dryRun"`
	Routes  []routeResult `json:"routes"`
	// NotCalled lists the routes the tick did not reach: after an unreachable route, or after a
	// signal.
	NotCalled []string `json:"notCalled"`
	// Summary counts the routes per category, every category present, zeros included, so a
	// consumer needs no defaults.
	Summary     map[classify.Category]int `json:"summary"`
	Interrupted bool                      `json:"interrupted,omitempty"`
	ExitCode    int                       `json:"exitCode"`
	// Error is why the tick failed, when it did; empty for exit 0.
	Error string `json:"error,omitempty"`
}

// loop runs a tick every interval until ctx ends, then returns nil: a signal is the normal way
// to stop the bundled cron container. A tick's failures are printed and the loop goes on, since
// the next tick may well succeed; only a configuration error ends it, because no later tick can
// succeed with it and a container that exits 78 is louder than a log line repeated forever.
func (r *runner) loop(ctx context.Context) error {
	for {
		start := r.cli.now()
		if !r.opts.json {
			fmt.Fprintf(r.cli.stdout, "run at %s\n", start.UTC().Format(time.RFC3339))
		}
		if err := r.tick(ctx); err != nil {
			if exitCode(err) == exitConfig {
				return err
			}
			fmt.Fprintf(r.cli.stderr, "sweepcron: %s: %v\n", start.UTC().Format(time.RFC3339), err)
		}
		// The interval runs from the start of a tick, so ticks keep their rhythm; a tick that
		// overran its interval is followed at once, never overlapped.
		wait := r.opts.every - r.cli.now().Sub(start)
		if ctx.Err() != nil {
			return nil
		}
		if wait <= 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// tick runs every selected route once, prints the report and returns the tick's exit error.
func (r *runner) tick(ctx context.Context) error {
	trace := newTraceID()
	ctx = withTrace(ctx, trace)
	rep := &report{
		StartedAt: r.cli.now().UTC(),
		TraceID:   trace.String(),
		DryRun:    r.opts.dryRun,
		Routes:    []routeResult{},
		NotCalled: []string{},
		Summary:   map[classify.Category]int{},
	}
	for _, c := range classify.Categories() {
		rep.Summary[c] = 0
	}
	err := r.sweep(ctx, rep)
	rep.ExitCode = exitCode(err)
	if err != nil {
		rep.Error = err.Error()
	}
	if r.opts.json {
		enc := json.NewEncoder(r.cli.stdout)
		if jerr := enc.Encode(rep); jerr != nil {
			return fmt.Errorf("write report: %w", jerr)
		}
	}
	return err
}

// sweep discovers, checks the bound, and calls each route, filling rep as it goes.
func (r *runner) sweep(ctx context.Context, rep *report) error {
	if ctx.Err() != nil {
		rep.Interrupted = true
		return exitf(exitFailed, "interrupted before discovery")
	}
	// Requests run under a context without the signal: the route in flight is let finish (the
	// fetch timeout bounds it) and the run stops between routes. A second signal kills the
	// process outright (see run).
	reqCtx := context.WithoutCancel(ctx)
	cat, err := r.client.discover(reqCtx)
	if err != nil {
		return err
	}
	if err := checkBound(r.cfg.FetchTimeout, cat.WriteTimeout); err != nil {
		return err
	}
	refs, err := selectSweeps(cat.Sweeps, r.opts.only)
	if err != nil {
		return err
	}
	width := 0
	for _, s := range refs {
		width = max(width, len(s.Name))
	}
	body := r.opts.body()
	for i, s := range refs {
		if ctx.Err() != nil {
			rep.Interrupted = true
			rep.NotCalled = names(refs[i:])
			break
		}
		ex := r.client.do(reqCtx, http.MethodPost, s.Route, body)
		res := classify.Classify(ex.in)
		rr := routeResult{
			Sweep: s.Name, Route: s.Route, Category: res.Category, Failed: res.Category.Failed(),
			StatusCode: ex.in.StatusCode, ElapsedMs: ex.elapsed.Milliseconds(),
			Detail: res.Detail, parsed: res.Answer,
		}
		if res.Answer != nil {
			rr.Answer = bytes.TrimSpace(ex.in.Body)
		}
		rep.Routes = append(rep.Routes, rr)
		rep.Summary[rr.Category]++
		if !r.opts.json {
			fmt.Fprintln(r.cli.stdout, formatLine(rr, width))
		}
		if res.Category == classify.Unreachable {
			// Every further route would time out or be refused the same way; stopping keeps
			// the run short and the report honest about what was never tried.
			rep.NotCalled = names(refs[i+1:])
			break
		}
	}
	if !r.opts.json {
		fmt.Fprintln(r.cli.stdout, formatSummary(rep))
	}
	return verdict(rep)
}

// verdict maps a finished tick to its exit error: unreachable (2) outranks failures (1), since it
// says the rest of the run never happened.
func verdict(rep *report) error {
	var failed []string
	for _, rr := range rep.Routes {
		if rr.Category == classify.Unreachable {
			return exitf(exitUnreachable, "API unreachable at %s: %s%s", rr.Route, rr.Detail, notCalledSuffix(rep))
		}
		if rr.Failed {
			failed = append(failed, rr.Sweep+" ("+string(rr.Category)+")")
		}
	}
	if len(failed) > 0 {
		return exitf(exitFailed, "%d of %d routes failed: %s%s", len(failed), len(rep.Routes), strings.Join(failed, ", "), notCalledSuffix(rep))
	}
	if rep.Interrupted {
		// Not every route was swept, so this run is not a success to a scheduler that reads
		// only the status.
		return exitf(exitFailed, "interrupted%s", notCalledSuffix(rep))
	}
	return nil
}

func notCalledSuffix(rep *report) string {
	if len(rep.NotCalled) == 0 {
		return ""
	}
	return "; not called: " + strings.Join(rep.NotCalled, ", ")
}

// selectSweeps applies --only: the named sweeps in the order given. A name the catalog does not
// hold is a configuration error and no route is called, because a half-run under a typo would
// look like success for the sweeps that happened to be spelt right.
func selectSweeps(all []sweepRef, only []string) ([]sweepRef, error) {
	if len(only) == 0 {
		return all, nil
	}
	byName := map[string]sweepRef{}
	for _, s := range all {
		byName[s.Name] = s
	}
	var out []sweepRef
	var unknown []string
	for _, n := range only {
		s, ok := byName[n]
		if !ok {
			unknown = append(unknown, n)
			continue
		}
		out = append(out, s)
	}
	if len(unknown) > 0 {
		return nil, exitf(exitConfig, "configuration: --only names unknown sweeps %s; the catalog holds %s",
			strings.Join(unknown, ", "), strings.Join(names(all), ", "))
	}
	return out, nil
}

func names(refs []sweepRef) []string {
	out := make([]string, 0, len(refs))
	for _, s := range refs {
		out = append(out, s.Name)
	}
	return out
}

// formatLine is one route's text line: name, category, then what the answer says.
func formatLine(rr routeResult, width int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-14s", width, rr.Sweep, rr.Category)
	a := rr.parsed
	switch {
	case a == nil:
		b.WriteString(" " + rr.Detail)
	case a.IsDryRun():
		b.WriteString(" dry-run")
		for _, p := range a.DryRunPasses {
			b.WriteString(" " + formatDryRunPass(p))
		}
	default:
		fmt.Fprintf(&b, " deleted=%d", a.Deleted)
		var tc tableCounts
		perRow := a.Processed > 0
		for _, p := range a.Passes {
			tc.add(p.Children, p.Cascades)
			perRow = perRow || p.Path == pathPerRow
		}
		if perRow {
			// A per-row pass deletes nothing itself: its function's work is its processed keys.
			fmt.Fprintf(&b, " processed=%d", a.Processed)
		}
		if a.Archived > 0 {
			fmt.Fprintf(&b, " archived=%d", a.Archived)
		}
		b.WriteString(tc.String())
		fmt.Fprintf(&b, " batches=%d duration=%dms stop=%s", a.BatchCount, a.DurationMs, a.StopReason)
		if a.Error != nil {
			fmt.Fprintf(&b, " error=%s pass=%q message=%q", a.Error.Code, a.Error.Pass, a.Error.Message)
		}
	}
	if a != nil && rr.Failed && (a.Error == nil || (rr.Category != classify.BatchError && rr.Category != classify.SchemaChanged)) {
		// A failure the answer's fields do not explain by themselves (a 500 claiming success,
		// a batch-error without error detail) gets the classifier's reason.
		b.WriteString(" (" + rr.Detail + ")")
	}
	return b.String()
}

func formatDryRunPass(p classify.DryRunPass) string {
	name := p.Pass
	if name == "" {
		name = "-"
	}
	eligible := "?"
	if p.Eligible != nil {
		eligible = fmt.Sprint(*p.Eligible)
	}
	s := fmt.Sprintf("[%s eligible=%s estimate=%d", name, eligible, p.Estimate)
	// The rows of each delete_with child, and of each cascades table, that would go with the
	// eligible rows.
	var tc tableCounts
	tc.add(p.Children, p.Cascades)
	s += tc.String()
	if p.CascadesUncounted {
		s += " cascades-uncounted"
	}
	if p.CountTimedOut {
		s += " count-timed-out"
	}
	if p.Indexed {
		s += " indexed]"
	} else {
		s += " NOT-INDEXED]"
	}
	return s
}

// formatSummary is the tick's last text line: the route count, each non-zero category, and the
// routes never called.
func formatSummary(rep *report) string {
	var parts []string
	for _, c := range classify.Categories() {
		if n := rep.Summary[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", c, n))
		}
	}
	s := fmt.Sprintf("summary: %d routes called", len(rep.Routes))
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, " ")
	}
	if len(rep.NotCalled) > 0 {
		s += fmt.Sprintf("; not called (%d): %s", len(rep.NotCalled), strings.Join(rep.NotCalled, ", "))
	}
	if rep.Interrupted {
		s += "; interrupted"
	}
	return s + "; trace " + rep.TraceID
}
