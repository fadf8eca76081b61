package httpapi_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/otlptest"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/trace"
)

// TestTracesOnlyFromSignedCallers sends requests through the API with tracing on, exporting to a
// real OTLP receiver: an unsigned request, whatever traceparent and tracestate it carries and
// whatever path it asks for, exports no span and is counted instead; a signed one continues the
// caller's trace, keeps its tracestate, and is exported or not as the caller's sampled flag says.
func TestTracesOnlyFromSignedCallers(t *testing.T) {
	t.Parallel()
	rc := otlptest.New(t)
	tr, err := trace.New(ctx, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL}, "sweeprail-api", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *options) { o.tracing = tr })
	h.seedNotifications(3)

	const span = "00f067aa0ba902b7"
	traceID := func(i int) string { return fmt.Sprintf("4bf92f3577b34da6a3ce929d%08x", i) }
	parent := func(i int, flags string) string { return "00-" + traceID(i) + "-" + span + "-" + flags }
	signedWith := func(method, target, tp, ts string) answer {
		hdr := map[string]string{signing.Header: signatureFor(method, target, "").header(), "traceparent": tp}
		if ts != "" {
			hdr["tracestate"] = ts
		}
		return h.send(method, target, "", hdr)
	}

	// Unsigned: refused or public, none traced.
	const strays = 200
	unsigned := 0
	for i := range strays {
		path := fmt.Sprintf("/scan/%d", i)
		if i%2 == 1 {
			path = fmt.Sprintf("/internal/sweeps-%d", i)
		}
		h.send(http.MethodGet, path, "", map[string]string{"traceparent": parent(1, "01"), "tracestate": "stranger=1"})
		unsigned++
	}
	for _, path := range []string{"/healthz", "/metrics", "/internal/sweeps"} {
		h.send(http.MethodGet, path, "", map[string]string{"traceparent": parent(1, "01")})
		unsigned++
	}
	// Signed with a bad signature: as unsigned.
	forged := signatureFor(http.MethodGet, "/internal/sweeps", "")
	forged.keys = []string{"another-key-of-at-least-32-bytes-0000"}
	h.send(http.MethodGet, "/internal/sweeps", "", map[string]string{signing.Header: forged.header(), "traceparent": parent(1, "01")})
	unsigned++

	// Signed: the caller's trace, its tracestate, its sampling decision.
	if a := signedWith(http.MethodGet, "/internal/sweeps", parent(2, "01"), "vendor=abc"); a.status != http.StatusOK {
		t.Fatalf("signed catalog: %d %s", a.status, a.body)
	}
	if a := signedWith(http.MethodGet, "/internal/sweeps", parent(3, "00"), ""); a.status != http.StatusOK {
		t.Fatalf("signed, not sampled: %d %s", a.status, a.body)
	}
	if a := signedWith(http.MethodPost, "/internal/sweep-notifications", parent(4, "01"), ""); a.status != http.StatusOK {
		t.Fatalf("signed sweep: %d %s", a.status, a.body)
	}

	if got := h.metric("sweeprail_unsigned_requests_total", nil); got != float64(unsigned) {
		t.Errorf("sweeprail_unsigned_requests_total = %v, want %d", got, unsigned)
	}
	flush, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(flush); err != nil {
		t.Fatal(err)
	}

	byTrace := map[string][]string{}
	paths := map[string]bool{}
	continued := false
	for _, s := range rc.Spans() {
		id := hex.EncodeToString(s.GetTraceId())
		byTrace[id] = append(byTrace[id], s.GetName())
		for _, kv := range s.GetAttributes() {
			if kv.GetKey() == "url.path" {
				paths[kv.GetValue().GetStringValue()] = true
			}
		}
		if id == traceID(2) {
			continued = true
			if got := hex.EncodeToString(s.GetParentSpanId()); got != span || s.GetTraceState() != "vendor=abc" {
				t.Errorf("signed span: parent %s tracestate %q, want the caller's %s and vendor=abc", got, s.GetTraceState(), span)
			}
		}
	}
	t.Run("no span from an unsigned caller", func(t *testing.T) {
		if names := byTrace[traceID(1)]; len(names) > 0 {
			t.Errorf("unsigned requests exported %q in the trace they named", names)
		}
		for p := range paths {
			if p != "/internal/sweeps" && p != "/internal/sweep-notifications" {
				t.Errorf("a span for path %q: unsigned requests must start none", p)
			}
		}
	})
	t.Run("a signed caller's trace continued", func(t *testing.T) {
		if names := byTrace[traceID(2)]; !continued || len(names) != 1 || names[0] != "GET" {
			t.Errorf("spans %q in the signed caller's trace, want its server span", names)
		}
		if names := byTrace[traceID(4)]; len(names) < 2 {
			t.Errorf("spans %q in the signed sweep's trace, want the server span and the run's", names)
		}
	})
	t.Run("a signed caller's sampling decision honoured", func(t *testing.T) {
		if names := byTrace[traceID(3)]; len(names) > 0 {
			t.Errorf("spans %q exported for a caller that said not sampled", names)
		}
	})
	if len(byTrace) != 2 {
		t.Errorf("spans in %d traces, want the two signed, sampled ones: %v", len(byTrace), byTrace)
	}
}
