package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/signing"
)

// testKey is a signing key of the length config.LoadCron requires.
const testKey = "test-signing-key-0123456789abcdef"

// call is one request the fake API received.
type call struct {
	Method, Path string
	RawQuery     string
	Body         []byte
	Signature    string
	SigErr       error
	// Traceparent is the W3C trace context header as received.
	Traceparent string
}

// fakeSweep is one route of the fake catalog.
type fakeSweep struct {
	name  string
	route string // empty: the catalog omits it and the client must fall back
	h     http.HandlerFunc
}

// fakeAPI plays the API for client-behaviour tests: it serves a catalog, verifies every
// request's signature with the real verifier, records every call and hands each route to its
// handler.
type fakeAPI struct {
	t              testing.TB
	srv            *httptest.Server
	verifier       *signing.Verifier
	writeTimeoutMs int64
	sweeps         []fakeSweep
	// catalog, when set, replaces the catalog answer.
	catalog http.HandlerFunc
	// runs, when set, answers GET /internal/runs; unset, the route is unknown (404).
	runs http.HandlerFunc

	mu    sync.Mutex
	calls []call
}

func newFakeAPI(t testing.TB, sweeps ...fakeSweep) *fakeAPI {
	t.Helper()
	f := &fakeAPI{
		t:              t,
		verifier:       signing.NewVerifier([][]byte{[]byte(testKey)}, time.Minute, nil, 1000),
		writeTimeoutMs: 1000,
		sweeps:         sweeps,
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) env() map[string]string {
	return map[string]string{
		"API_URL":                f.srv.URL,
		"INTERNAL_SIGNING_KEY":   testKey,
		"INTERNAL_FETCH_TIMEOUT": "5s",
	}
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("read request body: %v", err)
		return
	}
	sig := r.Header.Get(signing.Header)
	sigErr := f.verifier.Verify(sig, r.Method, r.URL.Path, r.URL.RawQuery, body)
	f.mu.Lock()
	f.calls = append(f.calls, call{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Body: body, Signature: sig, SigErr: sigErr, Traceparent: r.Header.Get("traceparent")})
	f.mu.Unlock()
	// Handlers get the body again, as read.
	r.Body = io.NopCloser(bytes.NewReader(body))
	if sigErr != nil {
		f.t.Errorf("%s %s: signature refused: %v", r.Method, r.URL.Path, sigErr)
		http.Error(w, `{"error":{"code":"bad_signature"}}`, http.StatusUnauthorized)
		return
	}
	if r.URL.Path == "/internal/sweeps" {
		if r.Method != http.MethodGet {
			f.t.Errorf("discovery with %s", r.Method)
		}
		if f.catalog != nil {
			f.catalog(w, r)
			return
		}
		f.serveCatalog(w)
		return
	}
	if r.URL.Path == "/internal/runs" && f.runs != nil {
		f.runs(w, r)
		return
	}
	for _, s := range f.sweeps {
		if r.URL.Path == routeOf(s) {
			if r.Method != http.MethodPost {
				f.t.Errorf("%s with %s", r.URL.Path, r.Method)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				f.t.Errorf("%s: Content-Type %q", r.URL.Path, ct)
			}
			s.h(w, r)
			return
		}
	}
	http.Error(w, `{"error":{"code":"unknown_sweep"}}`, http.StatusNotFound)
}

func routeOf(s fakeSweep) string {
	if s.route == "" {
		return "/internal/sweep-" + s.name
	}
	return s.route
}

func (f *fakeAPI) serveCatalog(w http.ResponseWriter) {
	type entry struct {
		Name   string   `json:"name"`
		Route  string   `json:"route,omitempty"`
		Passes []string `json:"passes"`
	}
	var sweeps []entry
	for _, s := range f.sweeps {
		sweeps = append(sweeps, entry{Name: s.name, Route: s.route, Passes: []string{"p"}})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"sweeps": sweeps,
		"bounds": map[string]any{"serverWriteTimeoutMs": f.writeTimeoutMs, "sweepDeadlineMs": 90000},
	})
}

// routeCalls returns the paths of the sweep routes called, in order.
func (f *fakeAPI) routeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.Path != "/internal/sweeps" {
			out = append(out, c.Path)
		}
	}
	return out
}

func (f *fakeAPI) allCalls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func (f *fakeAPI) discoveries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.Path == "/internal/sweeps" {
			n++
		}
	}
	return n
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// answer returns a handler answering status with body.
func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// echoAnswer answers a run or dry-run answer for the sweep name, shaped by the request body, the
// way the real API does.
func echoAnswer(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			DryRun bool `json:"dryRun"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.DryRun {
			answer(200, fmt.Sprintf(`{"sweep":%q,"dryRun":true,"passes":[{"pass":"p","eligible":7,"estimate":9,"countTimedOut":false,"indexed":true}]}`, name))(w, r)
			return
		}
		answer(200, okBody(name))(w, r)
	}
}

func okBody(name string) string {
	return fmt.Sprintf(`{"sweep":%q,"runId":"r1","dryRun":false,"skipped":false,"deleted":12,"batchCount":2,"durationMs":34,
"truncated":false,"stopReason":"exhausted","passes":[{"pass":"p","deleted":12,"batchCount":2,"stopReason":"exhausted"}],"error":null}`, name)
}

func truncatedBody(name string) string {
	return fmt.Sprintf(`{"sweep":%q,"runId":"r2","deleted":1000,"archived":1000,"batchCount":1000,"durationMs":90000,
"truncated":true,"stopReason":"batch-cap","passes":[{"pass":"p","deleted":1000,"batchCount":1000,"stopReason":"batch-cap"}],"error":null}`, name)
}

func skippedBody(name string) string {
	return fmt.Sprintf(`{"sweep":%q,"runId":"r3","skipped":true,"stopReason":"lease-held","passes":[],"error":null}`, name)
}

func batchErrorBody(name string) string {
	return fmt.Sprintf(`{"sweep":%q,"runId":"r4","deleted":5,"batchCount":1,"durationMs":12,"truncated":false,
"stopReason":"batch-error","passes":[{"pass":"p","deleted":5,"batchCount":1,"stopReason":"batch-error"}],
"error":{"code":"23503","message":"update or delete violates foreign key constraint","pass":"p"}}`, name)
}

// hijackMidBody sends headers promising a longer body than it writes, then drops the connection.
func hijackMidBody(w http.ResponseWriter, _ *http.Request) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{\"sweep\":\"a\",\"deleted\":")
	_ = buf.Flush()
}

// dropAndStop plays an API that dies under the request: the connection closes before any
// response and nothing listens any more.
func (f *fakeAPI) dropAndStop(w http.ResponseWriter, _ *http.Request) {
	_ = f.srv.Listener.Close()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	_ = conn.Close()
}

// deadAddr returns the URL of an address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// runCron runs the program in-process and returns its exit status and output.
func runCron(t *testing.T, ctx context.Context, env map[string]string, args ...string) (int, string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, env, &stdout, &stderr)
	return exitCode(err), stdout.String(), stderr.String(), err
}

func lines(s string) []string {
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}
