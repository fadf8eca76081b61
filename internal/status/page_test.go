package status

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/redact"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// fixedHistory answers List from memory: the template's edge cases need no database, and the
// page's reads of a real one are TestPageReadsAreBounded's.
type fixedHistory struct {
	runs map[string][]wire.HistoryRun
	err  error
}

func (h fixedHistory) List(_ context.Context, sweep string, limit int) ([]wire.HistoryRun, error) {
	if h.err != nil {
		return nil, h.err
	}
	r := h.runs[sweep]
	return r[:min(len(r), limit)], nil
}

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// run is a finished run of sweep at minutes before now, deleting deleted rows from a table of
// bytes bytes in pass pass.
func run(sweep, pass string, minutes int, deleted, bytes int64, stop wire.StopReason) wire.HistoryRun {
	start := now.Add(-time.Duration(minutes) * time.Minute)
	return wire.HistoryRun{
		RunID: "0192a000-0000-7000-8000-" + strings.Repeat("0", 10) + string(rune('a'+minutes%26)) + "0",
		Sweep: sweep, StartedAt: start, FinishedAt: ptr(start.Add(1500 * time.Millisecond)),
		StopReason: ptr(stop), Deleted: deleted,
		Passes: []wire.HistoryPass{{Pass: pass, Deleted: deleted, StopReason: stop, Path: "heap",
			TableRows: ptr(bytes / 100), TableBytes: ptr(bytes)}},
	}
}

func spec(name string, passes ...policy.Pass) policy.Spec {
	return policy.Spec{Name: name, Passes: passes}
}

func pass(name, table string) policy.Pass {
	return policy.Pass{Name: name, Table: table, Retention: 30 * 24 * time.Hour, Mode: policy.ModeBatched}
}

// get serves one request to the page's handler.
func get(t *testing.T, h http.Handler, method, target string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

// TestPage renders the page's edge cases and reads the result as a browser's parser would.
func TestPage(t *testing.T) {
	t.Parallel()
	const script = `<script>alert(1)</script>`
	hugeMessage := `duplicate key value violates unique constraint "` + strings.Repeat("x", 5000) + `"`
	failed := run("tokens", "expired", 5, 0, 8192, wire.StopBatchError)
	failed.Error = &wire.ErrorInfo{Code: "23505", Pass: "expired", Message: hugeMessage}
	leaky := run("leaky", "p", 7, 0, 100, wire.StopBatchError)
	leaky.Error = &wire.ErrorInfo{Code: "connection", Pass: "p",
		Message: `connect postgres://api:hunter2-secret@db/app failed; key k3y-0123456789abcdef`}
	skipped := wire.HistoryRun{RunID: "0192a000-0000-7000-8000-00000000ffff", Sweep: "notifications",
		StartedAt: now.Add(-time.Minute), FinishedAt: ptr(now.Add(-time.Minute)), StopReason: ptr(wire.StopLeaseHeld),
		Skipped: true, Requests: 12, Passes: []wire.HistoryPass{}}
	withChildren := run("notifications", "read", 60, 500, 4096, wire.StopExhausted)
	withChildren.Passes[0].Children = []wire.ChildRows{{Table: "receipts", Column: "notification_id", Rows: 40}}
	withChildren.Passes[0].Cascades = []wire.CascadeRows{{Table: "marks", Deleted: 2}}
	withChildren.Passes[0].Cutoff, withChildren.Passes[0].DurationMs = ptr(now.Add(-30*24*time.Hour)), 1234

	cases := []struct {
		name    string
		specs   []policy.Spec
		runs    map[string][]wire.HistoryRun
		histErr error
		status  int
		check   func(t *testing.T, doc *html.Node, body string)
	}{
		{
			name:   "no runs yet",
			specs:  []policy.Spec{spec("notifications", pass("read", "notifications")), spec("tokens", pass("expired", "refresh_tokens"))},
			status: http.StatusOK,
			check: func(t *testing.T, doc *html.Node, body string) {
				if n := len(find(doc, "tr", "sweep")); n != 2 {
					t.Errorf("%d sweep rows, want 2", n)
				}
				if n := len(find(doc, "span", "never")); n != 2 {
					t.Errorf("%d never-run badges, want 2", n)
				}
				if n := len(find(doc, "figure", "chart")); n != 2 {
					t.Errorf("%d charts, want 2 (one per table, empty)", n)
				}
				if n := len(find(doc, "circle", "size")); n != 0 {
					t.Errorf("%d points, want none", n)
				}
				if !strings.Contains(body, "No runs yet") {
					t.Error("the runs section does not say there are none")
				}
			},
		},
		{
			name: "a sweep never run, between two that ran",
			specs: []policy.Spec{spec("notifications", pass("read", "notifications")), spec("idle", pass("old", "events")),
				spec("tokens", pass("expired", "refresh_tokens"))},
			runs: map[string][]wire.HistoryRun{
				"notifications": {skipped, withChildren, run("notifications", "read", 120, 900, 4096, wire.StopBudget)},
				"tokens":        {run("tokens", "expired", 30, 10, 8192, wire.StopExhausted)},
			},
			status: http.StatusOK,
			check: func(t *testing.T, doc *html.Node, _ string) {
				var order []string
				for _, tb := range find(doc, "tbody", "sweep") {
					order = append(order, attr(tb, "data-sweep"))
				}
				if strings.Join(order, ",") != "notifications,tokens,idle" {
					t.Errorf("sweeps in order %v, want the newest run first and the never-run last", order)
				}
				// The pass row keeps the newest run that ran it, not the skipped one.
				passes := find(doc, "tr", "pass")
				if len(passes) != 3 || !strings.Contains(text(passes[0]), "heap") || !strings.Contains(text(passes[0]), "500") ||
					!strings.Contains(text(passes[0]), "+42 with them") {
					t.Errorf("first pass row %q, want the run that deleted 500 by heap, and 42 rows with them", text(passes[0]))
				}
				if got := text(passes[0]); !strings.Contains(got, "1.2s") {
					t.Errorf("first pass row %q, want its own duration", got)
				}
				if got := text(find(doc, "tr", "sweep")[0]); !strings.Contains(got, "lease-held ×12") {
					t.Errorf("sweep row %q, want the 12 lease-held answers its row stands for", got)
				}
				if !strings.Contains(text(passes[2]), "not run yet") {
					t.Errorf("never-run pass row %q", text(passes[2]))
				}
				for _, c := range find(doc, "figure", "chart") {
					want := map[string]int{"notifications": 2, "events": 0, "refresh_tokens": 1}[attr(c, "data-table")]
					if n := len(find(c, "circle", "size")); n != want {
						t.Errorf("chart %s: %d points, want %d (the skipped run swept nothing)", attr(c, "data-table"), n, want)
					}
				}
				if n := len(find(doc, "tr", "run")); n != 4 {
					t.Errorf("%d recent runs, want 4", n)
				}
			},
		},
		{
			name:   "a huge error message",
			specs:  []policy.Spec{spec("tokens", pass("expired", "refresh_tokens"))},
			runs:   map[string][]wire.HistoryRun{"tokens": {failed}},
			status: http.StatusOK,
			check: func(t *testing.T, doc *html.Node, body string) {
				msgs := find(doc, "span", "message")
				if len(msgs) != 1 {
					t.Fatalf("%d error messages, want 1", len(msgs))
				}
				if got := len([]rune(text(msgs[0]))); got != maxMessage {
					t.Errorf("message of %d characters shown, want %d", got, maxMessage)
				}
				if !strings.Contains(body, "more characters") || !strings.Contains(text(find(doc, "tr", "error")[0]), "23505") {
					t.Error("the clipped message does not say so, or the code is missing")
				}
			},
		},
		{
			name: "names and messages with markup",
			specs: []policy.Spec{spec(script, policy.Pass{Name: script, Table: `"` + script + `"`, Retention: time.Hour,
				Mode: policy.ModeBatched})},
			runs: map[string][]wire.HistoryRun{script: {func() wire.HistoryRun {
				r := run(script, script, 3, 1, 100, wire.StopBatchError)
				r.Error = &wire.ErrorInfo{Code: script, Pass: script, Message: script + `" onload="x`}
				return r
			}()}},
			status: http.StatusOK,
			check: func(t *testing.T, doc *html.Node, body string) {
				if strings.Contains(body, "<script") {
					t.Error("a <script> reached the page unescaped")
				}
				if len(find(doc, "script", "")) != 0 {
					t.Error("the parsed page holds a script element")
				}
				if got := attr(find(doc, "tbody", "sweep")[0], "data-sweep"); got != script {
					t.Errorf("data-sweep %q, want the name as text", got)
				}
				if !strings.Contains(text(find(doc, "span", "message")[0]), script) {
					t.Error("the message is not shown as text")
				}
			},
		},
		{
			name:   "secrets masked in errors",
			specs:  []policy.Spec{spec("leaky", pass("p", "t"))},
			runs:   map[string][]wire.HistoryRun{"leaky": {leaky}},
			status: http.StatusOK,
			check: func(t *testing.T, _ *html.Node, body string) {
				for _, secret := range []string{"hunter2-secret", "k3y-0123456789abcdef"} {
					if strings.Contains(body, secret) {
						t.Errorf("the page shows %q", secret)
					}
				}
			},
		},
		{
			name:    "history unreadable",
			specs:   []policy.Spec{spec("notifications", pass("read", "notifications"))},
			histErr: errors.New("connection refused"),
			status:  http.StatusServiceUnavailable,
			check: func(t *testing.T, doc *html.Node, body string) {
				if len(find(doc, "p", "problem")) != 1 || strings.Contains(body, "connection refused") {
					t.Error("want a notice without the error's text")
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := NewHandler(Deps{Specs: tc.specs, History: fixedHistory{runs: tc.runs, err: tc.histErr},
				Redactor: redact.New("k3y-0123456789abcdef"), Now: func() time.Time { return now }})
			res, body := get(t, h, http.MethodGet, Route)
			if res.StatusCode != tc.status {
				t.Fatalf("HTTP %d, want %d", res.StatusCode, tc.status)
			}
			if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			doc, err := html.Parse(strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, doc, body)
		})
	}
}

// TestPageHeaders checks the policy the browser enforces: the page's one stylesheet is the one
// its hash allows, and nothing else may load or run.
func TestPageHeaders(t *testing.T) {
	t.Parallel()
	h := NewHandler(Deps{Specs: []policy.Spec{spec("s", pass("p", "t"))}, History: fixedHistory{}})
	res, body := get(t, h, http.MethodGet, Route)
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(csp, "script-src") {
		t.Errorf("policy %q loosens something", csp)
	}
	_, style, _ := strings.Cut(body, "<style>")
	style, _, _ = strings.Cut(style, "</style>")
	sum := sha256.Sum256([]byte(style))
	if hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, "style-src "+hash) {
		t.Errorf("policy %q does not allow the page's stylesheet (%s)", csp, hash)
	}
	for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
		"Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	for _, tag := range []string{"<script", "<img", "<link", "<iframe", "http://", "https://", "style=\""} {
		if strings.Contains(body, tag) {
			t.Errorf("the page holds %q: it must load nothing and need no inline style", tag)
		}
	}
}

// TestRoutes checks the listener's surface: the page, a redirect to it, nothing that writes.
func TestRoutes(t *testing.T) {
	t.Parallel()
	h := NewHandler(Deps{Specs: []policy.Spec{spec("s", pass("p", "t"))}, History: fixedHistory{}})
	cases := []struct {
		name, method, target string
		status               int
	}{
		{"the page", http.MethodGet, "/status", http.StatusOK},
		{"the page, HEAD", http.MethodHead, "/status", http.StatusOK},
		{"the root points at the page", http.MethodGet, "/", http.StatusFound},
		{"no POST", http.MethodPost, "/status", http.StatusMethodNotAllowed},
		{"no sweep route", http.MethodPost, "/internal/sweep-s", http.StatusNotFound},
		{"no history route", http.MethodGet, "/internal/runs", http.StatusNotFound},
		{"no metrics", http.MethodGet, "/metrics", http.StatusNotFound},
		{"no subpath", http.MethodGet, "/status/x", http.StatusNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, _ := get(t, h, tc.method, tc.target)
			if res.StatusCode != tc.status {
				t.Errorf("%s %s: HTTP %d, want %d", tc.method, tc.target, res.StatusCode, tc.status)
			}
			if res.Header.Get("Content-Security-Policy") == "" {
				t.Error("answer without the security headers")
			}
		})
	}
}

// find returns the elements named tag under n whose class list holds class (any, when empty).
func find(n *html.Node, tag, class string) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && d.Data == tag && (class == "" || hasClass(d, class)) {
			out = append(out, d)
		}
	}
	return out
}

func hasClass(n *html.Node, class string) bool {
	for _, c := range strings.Fields(attr(n, "class")) {
		if c == class {
			return true
		}
	}
	return false
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b bytes.Buffer
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}
