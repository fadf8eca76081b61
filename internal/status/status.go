// Package status serves the operator's status page: one server-rendered HTML page, GET /status,
// that shows every sweep and pass of the catalog with its last run, each swept table's size and
// rows deleted run by run as a small inline SVG chart, and the recent runs, newest first.
//
// The page is read-only and self-contained: it only reads the run history (one indexed,
// bounded read per sweep of the catalog), never starts a sweep or a count, loads nothing from
// anywhere, runs no JavaScript, and is served under a Content-Security-Policy that allows its
// one inline stylesheet and nothing else. It shows no more than GET /internal/runs and /metrics
// do, with error messages masked by the same redaction as the logs. The API serves it only on
// STATUS_ADDR, a listener of its own.
package status

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/redact"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// Route is the page's path.
const Route = "/status"

// Defaults of the Deps fields that have one.
const (
	// defaultRuns is how many runs of each sweep the page reads: the points of its charts. At
	// an hourly schedule it is two and a half days, at a daily one two months.
	defaultRuns = 60
	// defaultTimeout bounds a page view's reads of the history.
	defaultTimeout = 5 * time.Second
)

// recentRuns is how many runs, of every sweep together, the page lists.
const recentRuns = 25

// History is what the page reads: the runs of one sweep, newest first, at most limit of them.
// *history.Store is one.
type History interface {
	List(ctx context.Context, sweep string, limit int) ([]wire.HistoryRun, error)
}

// Deps are what the page is built from. Specs and History are required.
type Deps struct {
	// Specs is the catalog the API serves, in order.
	Specs []policy.Spec
	// History is read once per sweep of Specs per page view.
	History History
	// Redactor masks the secrets of the process out of error messages; nil masks only passwords
	// in connection-string syntax (redact.Text).
	Redactor *redact.Redactor
	// Logger receives the page's failures; nil discards them.
	Logger *slog.Logger
	// Now is the clock the page's "ago" is measured by; nil means time.Now.
	Now func() time.Time
	// Runs is how many runs of each sweep a page reads (the points of its charts), within
	// 1..wire.MaxHistoryLimit; 0 means defaultRuns.
	Runs int
	// Timeout bounds a page view's reads of the history; 0 means defaultTimeout.
	Timeout time.Duration
	// ExpectedInterval is SWEEP_EXPECTED_INTERVAL, the verdicts' schedule; 0 infers it.
	ExpectedInterval time.Duration
}

//go:embed page.html
var pageHTML string

//go:embed page.css
var pageCSS string

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"count": formatCount, "bytes": formatBytes,
}).Parse(pageHTML))

// contentSecurityPolicy allows the page's own inline stylesheet, by its hash, and nothing else:
// no script, no image, font or frame, no form target, from anywhere.
var contentSecurityPolicy = "default-src 'none'; style-src '" + styleHash(pageCSS) + "'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func styleHash(css string) string {
	sum := sha256.Sum256([]byte(css))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// NewHandler returns the status listener's handler: the routes of routes.go behind the
// security headers every answer carries. It panics when deps.History is nil or deps.Runs is out
// of range, wiring mistakes no request can fix.
func NewHandler(deps Deps) http.Handler {
	if deps.History == nil {
		panic("status: NewHandler needs a History")
	}
	if deps.Runs == 0 {
		deps.Runs = defaultRuns
	}
	if deps.Runs < 1 || deps.Runs > wire.MaxHistoryLimit {
		panic(fmt.Sprintf("status: Runs %d is out of 1..%d", deps.Runs, wire.MaxHistoryLimit))
	}
	if deps.Timeout <= 0 {
		deps.Timeout = defaultTimeout
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	mux := http.NewServeMux()
	addRoutes(mux, deps)
	return secure(mux)
}

// secure sets the headers of every answer: the policy above, no sniffing, no framing, no
// referrer, no caching of a page that is stale in minutes.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// render writes page p, with its stylesheet, the one the policy's hash allows.
func render(w io.Writer, p page) error {
	p.Style = template.CSS(pageCSS)
	return pageTemplate.Execute(w, p)
}

// handlePage serves GET /status: it reads the history of each sweep, then renders the page
// whole before writing a byte, so a failure midway answers 500 rather than half a page.
func handlePage(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d.Timeout)
		defer cancel()
		runs := make(map[string][]wire.HistoryRun, len(d.Specs))
		var problem string
		for _, s := range d.Specs {
			list, err := d.History.List(ctx, s.Name, d.Runs)
			if err != nil {
				d.Logger.Error("status page: read the run history", "sweep", s.Name, "err", err)
				problem = "The run history could not be read; the sweeps below show no runs. The API's log has the error."
				runs = map[string][]wire.HistoryRun{}
				break
			}
			runs[s.Name] = list
		}
		now := d.Now()
		p := buildPage(d.Specs, runs, now, d.Redactor)
		judge(&p, runs, now, d.ExpectedInterval)
		p.Problem = problem
		var buf bytes.Buffer
		if err := render(&buf, p); err != nil {
			d.Logger.Error("status page: render", "err", err)
			http.Error(w, "the status page could not be rendered", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		status := http.StatusOK
		if problem != "" {
			status = http.StatusServiceUnavailable
		}
		w.WriteHeader(status)
		_, _ = w.Write(buf.Bytes())
	})
}
