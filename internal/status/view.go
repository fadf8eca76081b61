package status

import (
	"cmp"
	"fmt"
	"html/template"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/redact"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// maxMessage bounds the characters of an error message the page shows: a PostgreSQL error can
// quote a whole statement, and one run's message must not push the page off a phone's screen.
const maxMessage = 600

// page is what the template renders.
type page struct {
	Style     template.CSS // set by render
	Generated string
	Problem   string
	Sweeps    []sweepView
	Charts    []chart
	Runs      []runView
	// NeverRun counts the sweeps with no run in the history.
	NeverRun int
	// Summary is the retention verdicts in a line ("9 of 9 sweeps bounded"); AllBounded says
	// whether it is good news.
	Summary    string
	AllBounded bool
}

// sweepView is one sweep of the catalog: its newest run and its passes.
type sweepView struct {
	Name string
	// Last is the newest run; nil when the sweep never ran (within the history's retention).
	Last    *runView
	Passes  []passView
	Verdict verdictView
}

// passView is one pass: what the policy says, and what its newest run that ran it did.
type passView struct {
	Name, Table, Retention, Mode string
	// Ran reports whether any run in the history ran this pass; the fields below are its newest.
	Ran        bool
	Path       string
	StopReason string
	Deleted    int64
	Archived   int64
	Partitions int64
	// With counts the rows deleted with the pass's own: delete_with children and cascades.
	With int64
	// Processed counts the keys a per-row pass's function did the work for.
	Processed int64
	// Duration and Cutoff are "" for a run recorded before the history kept them.
	Duration string
	Cutoff   string
	Failed   bool
}

// runView is one run as the page shows it.
type runView struct {
	RunID      string
	Sweep      string
	at         time.Time
	Started    string
	Ago        string
	Duration   string
	StopReason string
	// State is the run's class on the page: ok, truncated, failed, skipped or unfinished.
	State   string
	Deleted int64
	Error   *errorView
}

// errorView is a failed run's error, masked and clipped.
type errorView struct {
	Code, Pass, Message string
	// Clipped is how many characters of the message were left out.
	Clipped int64
}

// buildPage lays out specs and their runs (each sweep's newest first) as of now.
func buildPage(specs []policy.Spec, runs map[string][]wire.HistoryRun, now time.Time, red *redact.Redactor) page {
	p := page{Generated: now.UTC().Format(time.RFC3339)}
	tables := map[string]string{} // "<sweep>/<pass>" → table, for the charts
	var all []runView
	for _, s := range specs {
		sv := sweepView{Name: s.Name}
		list := runs[s.Name]
		if len(list) > 0 {
			last := newRunView(list[0], now, red)
			sv.Last = &last
		} else {
			p.NeverRun++
		}
		for _, ps := range s.Passes {
			tables[s.Name+"/"+ps.Name] = ps.Table
			sv.Passes = append(sv.Passes, newPassView(ps, list))
		}
		for _, r := range list {
			all = append(all, newRunView(r, now, red))
		}
		p.Sweeps = append(p.Sweeps, sv)
	}
	// Newest first; a sweep that never ran goes last, in catalog order.
	slices.SortStableFunc(p.Sweeps, func(a, b sweepView) int {
		switch {
		case a.Last == nil || b.Last == nil:
			return cmp.Compare(boolInt(a.Last == nil), boolInt(b.Last == nil))
		default:
			return b.Last.at.Compare(a.Last.at)
		}
	})
	slices.SortStableFunc(all, func(a, b runView) int { return b.at.Compare(a.at) })
	p.Runs = all[:min(len(all), recentRuns)]
	p.Charts = buildCharts(specs, runs)
	return p
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// newPassView is pass ps of the policy with what the newest of runs that ran it did.
func newPassView(ps policy.Pass, runs []wire.HistoryRun) passView {
	v := passView{Name: ps.Name, Table: ps.Table, Mode: string(cmp.Or(ps.Mode, policy.ModeBatched)),
		Retention: policy.FormatRetention(ps.Retention)}
	if ps.Expiry {
		v.Retention += " after expiry"
	}
	for _, r := range runs {
		for _, hp := range r.Passes {
			if hp.Pass != ps.Name {
				continue
			}
			v.Ran, v.Path, v.StopReason = true, hp.Path, string(hp.StopReason)
			v.Deleted, v.Archived, v.Partitions = hp.Deleted, hp.Archived, hp.PartitionsDropped
			for _, c := range hp.Children {
				v.With += c.Rows
			}
			for _, c := range hp.Cascades {
				v.With += c.Deleted
			}
			v.Failed = hp.StopReason.Fails()
			v.Processed = hp.Processed
			if hp.Cutoff != nil { // recorded with its cutoff, so with its duration too
				v.Cutoff = hp.Cutoff.UTC().Format("2006-01-02 15:04:05Z")
				v.Duration = formatDuration(time.Duration(hp.DurationMs) * time.Millisecond)
			}
			return v
		}
	}
	return v
}

// newRunView is run r as of now, its error masked by red.
func newRunView(r wire.HistoryRun, now time.Time, red *redact.Redactor) runView {
	v := runView{RunID: r.RunID, Sweep: r.Sweep, at: r.StartedAt, Started: r.StartedAt.UTC().Format("2006-01-02 15:04:05Z"),
		Ago: ago(now.Sub(r.StartedAt)), Deleted: r.Deleted}
	switch {
	case r.StopReason == nil:
		v.State, v.StopReason = "unfinished", "unfinished"
	default:
		v.StopReason = string(*r.StopReason)
		if r.Requests > 1 { // the lease-held answers, or the idle runs, of one minute share a row
			v.StopReason = fmt.Sprintf("%s ×%d", v.StopReason, r.Requests)
		}
		switch {
		case r.Skipped:
			v.State = "skipped"
		case r.StopReason.Fails():
			v.State = "failed"
		case r.Truncated:
			v.State = "truncated"
		default:
			v.State = "ok"
		}
	}
	if r.FinishedAt != nil {
		v.Duration = formatDuration(r.FinishedAt.Sub(r.StartedAt))
	}
	if r.Error != nil {
		v.Error = newErrorView(*r.Error, red)
	}
	return v
}

func newErrorView(e wire.ErrorInfo, red *redact.Redactor) *errorView {
	mask := redact.Text
	if red != nil {
		mask = red.String
	}
	v := &errorView{Code: mask(e.Code), Pass: mask(e.Pass), Message: mask(e.Message)}
	if n := utf8.RuneCountInString(v.Message); n > maxMessage {
		v.Message, v.Clipped = string([]rune(v.Message)[:maxMessage]), int64(n-maxMessage)
	}
	return v
}

// ago is d rounded to its largest unit: "40s ago", "3m ago", "5h ago", "2d ago".
func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd ago", int(d.Hours()/24))
	}
}
