package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/sweeprail/sweeprail/internal/trace"
)

// traceparentRE is a W3C traceparent of version 00 with the sampled flag.
var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-01$`)

// TestTraceparent: every request of a tick, discovery included, carries a traceparent with the
// tick's trace id, which the report prints, and a parent id of its own; the next tick has a new
// trace id.
func TestTraceparent(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t,
		fakeSweep{name: "a", h: echoAnswer("a")},
		fakeSweep{name: "b", h: echoAnswer("b")},
	)
	var traces []string
	for tick := range 2 {
		code, stdout, _, err := runCron(t, t.Context(), f.env(), "--json")
		if code != exitOK {
			t.Fatalf("tick %d: exit %d (%v)", tick, code, err)
		}
		var rep struct {
			TraceID string `json:"traceId"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		traces = append(traces, rep.TraceID)
	}
	calls := f.allCalls()
	if len(calls) != 6 {
		t.Fatalf("%d calls, want 2 ticks × (discovery + 2 routes)", len(calls))
	}
	parents := map[string]bool{}
	for i, c := range calls {
		m := traceparentRE.FindStringSubmatch(c.Traceparent)
		if m == nil {
			t.Errorf("%s %s: traceparent %q is not 00-<32 hex>-<16 hex>-01", c.Method, c.Path, c.Traceparent)
			continue
		}
		if want := traces[i/3]; m[1] != want {
			t.Errorf("call %d (%s): trace id %s, want the tick's %s", i, c.Path, m[1], want)
		}
		if m[1] == strings.Repeat("0", 32) || m[2] == strings.Repeat("0", 16) {
			t.Errorf("call %d: an all-zero id, which W3C declares invalid: %s", i, c.Traceparent)
		}
		if parents[m[2]] {
			t.Errorf("call %d: parent id %s repeated", i, m[2])
		}
		parents[m[2]] = true
	}
	if traces[0] == traces[1] {
		t.Errorf("both ticks have trace id %s", traces[0])
	}
}

// TestTraceparentTextSummary: the text report names the trace id on its summary line.
func TestTraceparentTextSummary(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, fakeSweep{name: "a", h: echoAnswer("a")})
	code, stdout, _, err := runCron(t, t.Context(), f.env())
	if code != exitOK {
		t.Fatalf("exit %d (%v)", code, err)
	}
	m := traceparentRE.FindStringSubmatch(f.allCalls()[0].Traceparent)
	if m == nil {
		t.Fatalf("no traceparent on discovery")
	}
	ls := lines(stdout)
	if summary := ls[len(ls)-1]; !strings.HasSuffix(summary, "; trace "+m[1]) {
		t.Errorf("summary %q does not end with the trace id %s", summary, m[1])
	}
}

// TestTraceparentReachesAPISpans runs a tick against the fake API behind internal/trace's
// middleware, as the API serves it: the server span of every request is a child of the parent id
// sweepcron sent, in the trace the report names.
func TestTraceparentReachesAPISpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := trace.Wrap(tp)

	f := newFakeAPI(t, fakeSweep{name: "a", h: echoAnswer("a")})
	srv := httptest.NewServer(tr.Handler(http.HandlerFunc(f.serve)))
	t.Cleanup(srv.Close)
	env := f.env()
	env["API_URL"] = srv.URL
	code, stdout, _, err := runCron(t, t.Context(), env, "--json")
	if code != exitOK {
		t.Fatalf("exit %d (%v)", code, err)
	}
	var rep struct {
		TraceID string `json:"traceId"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	calls, spans := f.allCalls(), rec.Ended()
	if len(spans) != len(calls) || len(spans) != 2 {
		t.Fatalf("%d server spans for %d calls, want 2 and 2", len(spans), len(calls))
	}
	for i, s := range spans {
		sent := traceparentRE.FindStringSubmatch(calls[i].Traceparent)
		if sent == nil {
			t.Fatalf("call %d: traceparent %q", i, calls[i].Traceparent)
		}
		if s.SpanKind() != oteltrace.SpanKindServer || s.SpanContext().TraceID().String() != rep.TraceID ||
			s.Parent().SpanID().String() != sent[2] || !s.Parent().IsRemote() || !s.SpanContext().IsSampled() {
			t.Errorf("span %d (%s): trace %s parent %s remote=%v sampled=%v; want trace %s parent %s, remote and sampled",
				i, calls[i].Path, s.SpanContext().TraceID(), s.Parent().SpanID(), s.Parent().IsRemote(), s.SpanContext().IsSampled(),
				rep.TraceID, sent[2])
		}
	}
}

// TestNoDatabaseOrTracingSDK: sweepcron links neither the PostgreSQL driver nor the OpenTelemetry
// SDK. It runs next to the API with only a URL and a key, and a traceparent needs neither.
func TestNoDatabaseOrTracingSDK(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/jackc/") || strings.HasPrefix(dep, "go.opentelemetry.io/") {
			t.Errorf("sweepcron links %s", dep)
		}
	}
}
