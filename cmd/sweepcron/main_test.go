package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/classify"
	"github.com/sweeprail/sweeprail/internal/wire"
)

func TestRunCallsEveryRouteAndReportsEachFailure(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t,
		fakeSweep{name: "a-ok", h: answer(200, okBody("a-ok"))},
		fakeSweep{name: "b-batch", route: "/internal/sweep-b-batch", h: answer(500, batchErrorBody("b-batch"))},
		fakeSweep{name: "c-unauth", h: answer(401, `{"error":{"code":"bad_signature","message":"no v1 matches"}}`)},
		fakeSweep{name: "d-html", h: answer(200, "<html>hello</html>")},
		fakeSweep{name: "e-trunc", h: answer(200, truncatedBody("e-trunc"))},
		fakeSweep{name: "f-skip", h: answer(200, skippedBody("f-skip"))},
		fakeSweep{name: "g-notsweep", h: answer(200, `{"status":"ok"}`)},
	)
	code, stdout, _, err := runCron(t, t.Context(), f.env())
	if code != exitFailed {
		t.Fatalf("exit = %d (%v), want %d\n%s", code, err, exitFailed, stdout)
	}
	want := []string{
		"/internal/sweep-a-ok", "/internal/sweep-b-batch", "/internal/sweep-c-unauth", "/internal/sweep-d-html",
		"/internal/sweep-e-trunc", "/internal/sweep-f-skip", "/internal/sweep-g-notsweep",
	}
	if got := f.routeCalls(); !slices.Equal(got, want) {
		t.Fatalf("routes called = %v, want %v", got, want)
	}
	ls := lines(stdout)
	if len(ls) != len(want)+1 {
		t.Fatalf("stdout has %d lines, want %d:\n%s", len(ls), len(want)+1, stdout)
	}
	for i, w := range []struct{ name, cat, has string }{
		{"a-ok", "ok", "deleted=12 batches=2 duration=34ms stop=exhausted"},
		{"b-batch", "batch-error", `error=23503 pass="p"`},
		{"c-unauth", "fail", "HTTP 401: bad_signature: no v1 matches"},
		{"d-html", "unparseable", "not JSON"},
		{"e-trunc", "truncated", "deleted=1000 archived=1000 batches=1000 duration=90000ms stop=batch-cap"},
		{"f-skip", "skipped", "stop=lease-held"},
		{"g-notsweep", "unparseable", `no "sweep"`},
	} {
		fields := strings.Fields(ls[i])
		if len(fields) < 2 || fields[0] != w.name || fields[1] != w.cat || !strings.Contains(ls[i], w.has) {
			t.Errorf("line %d = %q, want %s %s …%s…", i, ls[i], w.name, w.cat, w.has)
		}
	}
	summary := ls[len(ls)-1]
	for _, s := range []string{"7 routes called", "ok=1", "truncated=1", "skipped=1", "batch-error=1", "fail=1", "unparseable=2"} {
		if !strings.Contains(summary, s) {
			t.Errorf("summary %q lacks %q", summary, s)
		}
	}
	for _, s := range []string{"4 of 7 routes failed", "b-batch (batch-error)", "c-unauth (fail)", "d-html (unparseable)"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

func TestRunHealthyRoutesExitZero(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t,
		fakeSweep{name: "a", h: answer(200, okBody("a"))},
		fakeSweep{name: "b", h: answer(200, truncatedBody("b"))},
		fakeSweep{name: "c", h: answer(200, skippedBody("c"))},
	)
	code, stdout, _, err := runCron(t, t.Context(), f.env())
	if code != exitOK || err != nil {
		t.Fatalf("exit = %d (%v), want 0\n%s", code, err, stdout)
	}
	if got := f.routeCalls(); len(got) != 3 {
		t.Errorf("routes called = %v", got)
	}
	// Every request, discovery included, carried a signature the real verifier accepts (the
	// fake API fails the test otherwise); the POSTs signed exactly the body "{}".
	for _, c := range f.allCalls() {
		if c.SigErr != nil {
			t.Errorf("%s %s: %v", c.Method, c.Path, c.SigErr)
		}
		if !regexp.MustCompile(`^t=\d+,n=[0-9a-f-]{36},v1=[0-9a-f]{64}$`).MatchString(c.Signature) {
			t.Errorf("%s %s: signature header %q has the wrong shape", c.Method, c.Path, c.Signature)
		}
		if c.Method == http.MethodPost && string(c.Body) != "{}" {
			t.Errorf("%s body = %q, want {}", c.Path, c.Body)
		}
	}
}

func TestRunStopsWhenTheAPIDies(t *testing.T) {
	t.Parallel()
	var f *fakeAPI
	f = newFakeAPI(t,
		fakeSweep{name: "a", h: func(w http.ResponseWriter, r *http.Request) { f.dropAndStop(w, r) }},
		fakeSweep{name: "b", h: answer(200, okBody("b"))},
		fakeSweep{name: "c", h: answer(200, okBody("c"))},
	)
	code, stdout, _, err := runCron(t, t.Context(), f.env())
	if code != exitUnreachable {
		t.Fatalf("exit = %d (%v), want %d\n%s", code, err, exitUnreachable, stdout)
	}
	if got := f.routeCalls(); !slices.Equal(got, []string{"/internal/sweep-a"}) {
		t.Errorf("routes called = %v, want only the first", got)
	}
	ls := lines(stdout)
	if !strings.HasPrefix(ls[0], "a  unreachable") {
		t.Errorf("first line = %q", ls[0])
	}
	if !strings.Contains(ls[len(ls)-1], "not called (2): b, c") {
		t.Errorf("summary = %q, want the routes not called", ls[len(ls)-1])
	}
	if !strings.Contains(err.Error(), "not called: b, c") {
		t.Errorf("error = %q", err)
	}
}

func TestRunDiscoveryUnreachable(t *testing.T) {
	t.Parallel()
	env := map[string]string{"API_URL": deadAddr(t), "INTERNAL_SIGNING_KEY": testKey, "INTERNAL_FETCH_TIMEOUT": "5s"}
	code, _, _, err := runCron(t, t.Context(), env)
	if code != exitUnreachable {
		t.Fatalf("exit = %d (%v), want %d", code, err, exitUnreachable)
	}
	if !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("error = %q", err)
	}
}

func TestRunDiscoveryFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		catalog http.HandlerFunc
		errHas  string
	}{
		{"401", answer(401, `{"error":{"code":"bad_signature"}}`), "HTTP 401: bad_signature (does INTERNAL_SIGNING_KEY match"},
		{"503", answer(503, `{"error":{"code":"signing_not_configured"}}`), "signing_not_configured"},
		{"not JSON", answer(200, `hello`), "not a catalog"},
		{"no sweeps key", answer(200, `{"bounds":{"serverWriteTimeoutMs":1000}}`), `no "sweeps"`},
		{"empty catalog", answer(200, `{"sweeps":[],"bounds":{"serverWriteTimeoutMs":1000}}`), "lists no sweeps"},
		{"no bounds", answer(200, `{"sweeps":[{"name":"a"}]}`), "serverWriteTimeoutMs"},
		{"zero bound", answer(200, `{"sweeps":[{"name":"a"}],"bounds":{"serverWriteTimeoutMs":0}}`), "serverWriteTimeoutMs"},
		{"nameless sweep", answer(200, `{"sweeps":[{"route":"/internal/sweep-a"}],"bounds":{"serverWriteTimeoutMs":1000}}`), "no name"},
		{"duplicate name", answer(200, `{"sweeps":[{"name":"a"},{"name":"a"}],"bounds":{"serverWriteTimeoutMs":1000}}`), "twice"},
		{"foreign route", answer(200, `{"sweeps":[{"name":"a","route":"http://evil/x"}],"bounds":{"serverWriteTimeoutMs":1000}}`), "not an absolute path"},
		{"dot route", answer(200, `{"sweeps":[{"name":"a","route":"/internal/../admin"}],"bounds":{"serverWriteTimeoutMs":1000}}`), "dot segment"},
		{"broken body", hijackMidBody, "body broke"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, fakeSweep{name: "a", h: answer(200, okBody("a"))})
			f.catalog = tc.catalog
			code, _, _, err := runCron(t, t.Context(), f.env())
			if code != exitFailed {
				t.Fatalf("exit = %d (%v), want %d", code, err, exitFailed)
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("error = %q, want it to contain %q", err, tc.errHas)
			}
			if got := f.routeCalls(); len(got) != 0 {
				t.Errorf("routes called = %v, want none", got)
			}
		})
	}
}

func TestRunBrokenBodyIsTruncatedBodyAndTheRunGoesOn(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t,
		fakeSweep{name: "a", h: hijackMidBody},
		fakeSweep{name: "b", h: answer(200, okBody("b"))},
	)
	code, stdout, _, err := runCron(t, t.Context(), f.env())
	if code != exitFailed {
		t.Fatalf("exit = %d (%v), want %d\n%s", code, err, exitFailed, stdout)
	}
	if got := f.routeCalls(); len(got) != 2 {
		t.Fatalf("routes called = %v, want both", got)
	}
	ls := lines(stdout)
	if !strings.HasPrefix(ls[0], "a  truncated-body") || !strings.HasPrefix(ls[1], "b  ok") {
		t.Errorf("stdout:\n%s", stdout)
	}
}

func TestRunTimeouts(t *testing.T) {
	t.Parallel()
	// The server's write timeout is reported as 100ms, so a 300ms fetch timeout passes the bound.
	slowHeaders := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	slowBody := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		_, _ = w.Write([]byte(`{"sweep":"b",`))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}

	t.Run("during the body is truncated-body", func(t *testing.T) {
		t.Parallel()
		f := newFakeAPI(t, fakeSweep{name: "b", h: slowBody}, fakeSweep{name: "c", h: answer(200, okBody("c"))})
		f.writeTimeoutMs = 100
		env := f.env()
		env["INTERNAL_FETCH_TIMEOUT"] = "300ms"
		code, stdout, _, err := runCron(t, t.Context(), env)
		if code != exitFailed {
			t.Fatalf("exit = %d (%v), want %d\n%s", code, err, exitFailed, stdout)
		}
		if !strings.HasPrefix(stdout, "b  truncated-body") || len(f.routeCalls()) != 2 {
			t.Errorf("calls %v, stdout:\n%s", f.routeCalls(), stdout)
		}
	})
	t.Run("before the headers is unreachable", func(t *testing.T) {
		t.Parallel()
		f := newFakeAPI(t, fakeSweep{name: "a", h: slowHeaders}, fakeSweep{name: "c", h: answer(200, okBody("c"))})
		f.writeTimeoutMs = 100
		env := f.env()
		env["INTERNAL_FETCH_TIMEOUT"] = "300ms"
		code, stdout, _, err := runCron(t, t.Context(), env)
		if code != exitUnreachable {
			t.Fatalf("exit = %d (%v), want %d\n%s", code, err, exitUnreachable, stdout)
		}
		if !strings.HasPrefix(stdout, "a  unreachable") || len(f.routeCalls()) != 1 {
			t.Errorf("calls %v, stdout:\n%s", f.routeCalls(), stdout)
		}
	})
}

func TestRunRefusesFetchTimeoutNotAboveWriteTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fetch   string
		writeMs int64
		want    string
	}{
		{"120s", 120000, "INTERNAL_FETCH_TIMEOUT=120s must be > the server's SERVER_WRITE_TIMEOUT=120s"},
		{"90s", 120000, "INTERNAL_FETCH_TIMEOUT=90s must be > the server's SERVER_WRITE_TIMEOUT=120s"},
		{"1500ms", 2000, "INTERNAL_FETCH_TIMEOUT=1500ms must be > the server's SERVER_WRITE_TIMEOUT=2s"},
	}
	for _, tc := range tests {
		t.Run(tc.fetch, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, fakeSweep{name: "a", h: answer(200, okBody("a"))})
			f.writeTimeoutMs = tc.writeMs
			env := f.env()
			env["INTERNAL_FETCH_TIMEOUT"] = tc.fetch
			code, _, _, err := runCron(t, t.Context(), env)
			if code != exitConfig {
				t.Fatalf("exit = %d (%v), want %d", code, err, exitConfig)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want %q", err, tc.want)
			}
			if got := f.routeCalls(); len(got) != 0 {
				t.Errorf("routes called = %v, want none", got)
			}
		})
	}
	t.Run("one millisecond above passes", func(t *testing.T) {
		t.Parallel()
		f := newFakeAPI(t, fakeSweep{name: "a", h: answer(200, okBody("a"))})
		f.writeTimeoutMs = 120000
		env := f.env()
		env["INTERNAL_FETCH_TIMEOUT"] = "120001ms"
		if code, _, _, err := runCron(t, t.Context(), env); code != exitOK {
			t.Fatalf("exit = %d (%v), want 0", code, err)
		}
	})
}

func TestRunConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		has  []string
	}{
		{"no API_URL", map[string]string{"INTERNAL_SIGNING_KEY": testKey}, nil, []string{"API_URL"}},
		{"no key", map[string]string{"API_URL": "http://127.0.0.1:1"}, nil, []string{"INTERNAL_SIGNING_KEY"}},
		{"short key", map[string]string{"API_URL": "http://127.0.0.1:1", "INTERNAL_SIGNING_KEY": "short"}, nil, []string{"INTERNAL_SIGNING_KEY"}},
		{"bad URL", map[string]string{"API_URL": "ftp://x", "INTERNAL_SIGNING_KEY": testKey}, nil, []string{"API_URL", "ftp://x"}},
		{"bad timeout", map[string]string{"API_URL": "http://127.0.0.1:1", "INTERNAL_SIGNING_KEY": testKey, "INTERNAL_FETCH_TIMEOUT": "abc"}, nil, []string{"INTERNAL_FETCH_TIMEOUT", "abc"}},
		{"negative timeout", map[string]string{"API_URL": "http://127.0.0.1:1", "INTERNAL_SIGNING_KEY": testKey, "INTERNAL_FETCH_TIMEOUT": "-5s"}, nil, []string{"INTERNAL_FETCH_TIMEOUT", "-5s"}},
		{"unknown flag", nil, []string{"--bogus"}, []string{"bogus"}},
		{"stray argument", nil, []string{"extra"}, []string{`"extra"`}},
		{"batch size zero", nil, []string{"--batch-size", "0"}, []string{"--batch-size=0"}},
		{"batch size too big", nil, []string{"--batch-size=50001"}, []string{"--batch-size=50001"}},
		{"every zero", nil, []string{"--every", "0s"}, []string{"--every=0s"}},
		{"every malformed", nil, []string{"--every", "soon"}, []string{"soon"}},
		{"only empty name", nil, []string{"--only", "a,,b"}, []string{"empty name"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := tc.env
			if env == nil {
				env = map[string]string{"API_URL": deadAddr(t), "INTERNAL_SIGNING_KEY": testKey}
			}
			code, _, _, err := runCron(t, t.Context(), env, tc.args...)
			if code != exitConfig {
				t.Fatalf("exit = %d (%v), want %d", code, err, exitConfig)
			}
			for _, h := range tc.has {
				if !strings.Contains(err.Error(), h) {
					t.Errorf("error = %q, want it to name %q", err, h)
				}
			}
		})
	}
}

func TestRunHelpExitsZero(t *testing.T) {
	t.Parallel()
	code, _, stderr, err := runCron(t, t.Context(), nil, "-h")
	if code != exitOK || !strings.Contains(stderr, "Usage:") {
		t.Errorf("exit = %d (%v), stderr:\n%s", code, err, stderr)
	}
}

func TestRunOnly(t *testing.T) {
	t.Parallel()
	newAPI := func(t *testing.T) *fakeAPI {
		return newFakeAPI(t,
			fakeSweep{name: "a", h: answer(200, okBody("a"))},
			fakeSweep{name: "b", h: answer(200, okBody("b"))},
			fakeSweep{name: "c", h: answer(200, okBody("c"))},
		)
	}
	t.Run("restricts and keeps the order given", func(t *testing.T) {
		t.Parallel()
		f := newAPI(t)
		code, stdout, _, err := runCron(t, t.Context(), f.env(), "--only", "c, a,c")
		if code != exitOK {
			t.Fatalf("exit = %d (%v)\n%s", code, err, stdout)
		}
		if got := f.routeCalls(); !slices.Equal(got, []string{"/internal/sweep-c", "/internal/sweep-a"}) {
			t.Errorf("routes called = %v", got)
		}
	})
	t.Run("an unknown name calls nothing", func(t *testing.T) {
		t.Parallel()
		f := newAPI(t)
		code, _, _, err := runCron(t, t.Context(), f.env(), "--only=a,nope")
		if code != exitConfig {
			t.Fatalf("exit = %d (%v), want %d", code, err, exitConfig)
		}
		if !strings.Contains(err.Error(), "unknown sweeps nope; the catalog holds a, b, c") {
			t.Errorf("error = %q", err)
		}
		if got := f.routeCalls(); len(got) != 0 {
			t.Errorf("routes called = %v", got)
		}
	})
}

func TestRunJSON(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t,
		fakeSweep{name: "a", h: answer(200, okBody("a"))},
		fakeSweep{name: "b", h: answer(500, batchErrorBody("b"))},
		fakeSweep{name: "c", h: answer(404, `{"error":{"code":"unknown_sweep"}}`)},
	)
	code, stdout, _, err := runCron(t, t.Context(), f.env(), "--json")
	if code != exitFailed {
		t.Fatalf("exit = %d (%v), want %d", code, err, exitFailed)
	}
	var rep struct {
		Routes []struct {
			Sweep      string            `json:"sweep"`
			Route      string            `json:"route"`
			Category   classify.Category `json:"category"`
			Failed     bool              `json:"failed"`
			StatusCode int               `json:"statusCode"`
			Detail     string            `json:"detail"`
			Answer     *classify.Answer  `json:"answer"`
		} `json:"routes"`
		NotCalled []string                  `json:"notCalled"`
		Summary   map[classify.Category]int `json:"summary"`
		ExitCode  int                       `json:"exitCode"`
		Error     string                    `json:"error"`
	}
	// json.Unmarshal refuses trailing data, so this also checks stdout holds nothing else.
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout)
	}
	if len(rep.Routes) != 3 || rep.ExitCode != exitFailed || rep.Error == "" || rep.NotCalled == nil {
		t.Fatalf("report = %+v", rep)
	}
	a, b, c := rep.Routes[0], rep.Routes[1], rep.Routes[2]
	if a.Sweep != "a" || a.Category != classify.OK || a.Failed || a.Answer == nil || a.Answer.Deleted != 12 {
		t.Errorf("a = %+v", a)
	}
	if b.Category != classify.BatchError || !b.Failed || b.StatusCode != 500 || b.Answer.Error.Code != "23503" {
		t.Errorf("b = %+v", b)
	}
	if c.Category != classify.Fail || c.Route != "/internal/sweep-c" || !strings.Contains(c.Detail, "unknown_sweep") {
		t.Errorf("c = %+v", c)
	}
	if rep.Summary[classify.OK] != 1 || rep.Summary[classify.BatchError] != 1 || rep.Summary[classify.Fail] != 1 ||
		len(rep.Summary) != len(classify.Categories()) {
		t.Errorf("summary = %v", rep.Summary)
	}
}

func TestRunJSONReportsADiscoveryFailure(t *testing.T) {
	t.Parallel()
	env := map[string]string{"API_URL": deadAddr(t), "INTERNAL_SIGNING_KEY": testKey}
	code, stdout, _, _ := runCron(t, t.Context(), env, "--json")
	var rep struct {
		ExitCode int    `json:"exitCode"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if code != exitUnreachable || rep.ExitCode != exitUnreachable || !strings.Contains(rep.Error, "unreachable") {
		t.Errorf("exit %d, report %+v", code, rep)
	}
}

func TestRunDryRunAndBatchSize(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t,
		fakeSweep{name: "a", h: echoAnswer("a")},
		fakeSweep{name: "b", h: echoAnswer("b")},
	)
	code, stdout, _, err := runCron(t, t.Context(), f.env(), "--dry-run", "--batch-size", "500")
	if code != exitOK {
		t.Fatalf("exit = %d (%v)\n%s", code, err, stdout)
	}
	var posts int
	for _, c := range f.allCalls() {
		if c.Method != http.MethodPost {
			continue
		}
		posts++
		if string(c.Body) != `{"dryRun":true,"batchSize":500}` {
			t.Errorf("%s body = %s", c.Path, c.Body)
		}
	}
	if posts != 2 {
		t.Errorf("%d POSTs, want 2", posts)
	}
	if !strings.Contains(stdout, "a  ok             dry-run [p eligible=7 estimate=9 indexed]") {
		t.Errorf("stdout:\n%s", stdout)
	}
}

// TestFormatDryRunPass checks the dry-run line of a pass, delete_with's children included.
func TestFormatDryRunPass(t *testing.T) {
	t.Parallel()
	n := int64(900)
	got := formatDryRunPass(classify.DryRunPass{Pass: "terminal", Eligible: &n, Estimate: 880, Indexed: true,
		Children: []wire.ChildRows{{Table: "deliveries", Column: "event_id", Rows: 1350}, {Table: "app.receipts", Column: "event_id", Rows: 900}}})
	if want := "[terminal eligible=900 estimate=880 +deliveries=1350 +app.receipts=900 indexed]"; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestRunDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, fakeSweep{name: "a", h: func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://example.invalid/elsewhere", http.StatusTemporaryRedirect)
	}})
	code, stdout, _, err := runCron(t, t.Context(), f.env())
	if code != exitFailed || !strings.HasPrefix(stdout, "a  fail") || !strings.Contains(stdout, "HTTP 307") {
		t.Errorf("exit = %d (%v)\n%s", code, err, stdout)
	}
}

func TestRunEveryStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := newFakeAPI(t, fakeSweep{name: "a", h: answer(200, okBody("a"))}, fakeSweep{name: "b", h: answer(500, batchErrorBody("b"))})
	f.catalog = func(w http.ResponseWriter, r *http.Request) {
		if f.discoveries() >= 3 {
			cancel()
		}
		f.serveCatalog(w)
	}
	done := make(chan struct{})
	var code int
	var stdout, stderr string
	var err error
	go func() {
		defer close(done)
		code, stdout, stderr, err = runCron(t, ctx, f.env(), "--every", "10ms")
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context was cancelled")
	}
	if code != exitOK || err != nil {
		t.Fatalf("exit = %d (%v), want 0", code, err)
	}
	// Every tick re-discovers; the tick that saw the cancel stopped between routes.
	if n := f.discoveries(); n != 3 {
		t.Errorf("%d discoveries, want 3", n)
	}
	if got := f.routeCalls(); len(got) != 4 {
		t.Errorf("routes called = %v, want two full ticks", got)
	}
	if n := strings.Count(stdout, "run at "); n != 3 {
		t.Errorf("%d ticks printed, want 3:\n%s", n, stdout)
	}
	// A failing tick is reported and the loop goes on.
	if n := strings.Count(stderr, "1 of 2 routes failed"); n != 2 {
		t.Errorf("stderr has %d tick failures, want 2:\n%s", n, stderr)
	}
	if !strings.Contains(stdout, "not called (2): a, b; interrupted") {
		t.Errorf("stdout lacks the interrupted tick:\n%s", stdout)
	}
}

func TestRunEveryExitsConfigOnBoundViolation(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, fakeSweep{name: "a", h: answer(200, okBody("a"))})
	f.writeTimeoutMs = 10000
	// The timeout only keeps a broken guard from hanging the test: the loop must end by itself.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	code, _, _, err := runCron(t, ctx, f.env(), "--every", "10ms")
	if code != exitConfig {
		t.Fatalf("exit = %d (%v), want %d", code, err, exitConfig)
	}
}

func TestRunSingleRunInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	f := newFakeAPI(t,
		fakeSweep{name: "a", h: func(w http.ResponseWriter, r *http.Request) {
			// The signal arrives while a route is in flight: it finishes and is reported.
			cancel()
			answer(200, okBody("a"))(w, r)
		}},
		fakeSweep{name: "b", h: answer(200, okBody("b"))},
	)
	code, stdout, _, err := runCron(t, ctx, f.env())
	if code != exitFailed {
		t.Fatalf("exit = %d (%v), want %d", code, err, exitFailed)
	}
	if got := f.routeCalls(); len(got) != 1 {
		t.Errorf("routes called = %v, want only the one in flight", got)
	}
	if !strings.HasPrefix(stdout, "a  ok") || !strings.Contains(err.Error(), "interrupted; not called: b") {
		t.Errorf("err %v, stdout:\n%s", err, stdout)
	}
}

// TestRunEveryExitsZeroOnSIGTERM sends the process a real SIGTERM. It is not parallel: Go runs
// the serial tests before resuming the parallel ones, so no other run() sees the signal.
func TestRunEveryExitsZeroOnSIGTERM(t *testing.T) {
	f := newFakeAPI(t, fakeSweep{name: "a", h: answer(200, okBody("a"))})
	sent := make(chan struct{})
	var once sync.Once
	f.catalog = func(w http.ResponseWriter, r *http.Request) {
		// run has installed its signal handler before it makes any request.
		if f.discoveries() >= 2 {
			once.Do(func() {
				if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
					t.Errorf("kill: %v", err)
				}
				close(sent)
			})
		}
		f.serveCatalog(w)
	}
	done := make(chan error, 1)
	go func() {
		_, _, _, err := runCron(t, context.Background(), f.env(), "--every", "10ms")
		done <- err
	}()
	select {
	case err := <-done:
		if code := exitCode(err); code != exitOK {
			t.Fatalf("exit = %d (%v), want 0", code, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}
	<-sent
}

func TestRunEveryStopsWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := newFakeAPI(t, fakeSweep{name: "a", h: answer(200, okBody("a"))})
	go func() {
		// Cancel once the first tick is surely over and the loop waits out its hour.
		for len(f.routeCalls()) == 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	done := make(chan error, 1)
	go func() {
		_, _, _, err := runCron(t, ctx, f.env(), "--every", "1h")
		done <- err
	}()
	select {
	case err := <-done:
		if code := exitCode(err); code != exitOK {
			t.Fatalf("exit = %d (%v), want 0", code, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context was cancelled while waiting")
	}
	if n := f.discoveries(); n != 1 {
		t.Errorf("%d ticks, want 1", n)
	}
}
