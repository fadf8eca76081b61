package trace

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// recorded returns a Tracing over an SDK provider that records every span in memory.
func recorded(t *testing.T) (*Tracing, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return Wrap(tp), rec
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		traceparent string
		// continues: the server span is a child of the caller's span.
		continues bool
		status    int
		wantError bool
	}{
		{"traceparent", "00-" + callerTrace + "-" + callerSpan + "-01", true, 200, false},
		{"no traceparent", "", false, 200, false},
		{"malformed traceparent", "00-" + callerTrace + "-zz-01", false, 200, false},
		{"all-zero trace id", "00-00000000000000000000000000000000-" + callerSpan + "-01", false, 200, false},
		{"client error", "00-" + callerTrace + "-" + callerSpan + "-01", true, 401, false},
		{"server error", "00-" + callerTrace + "-" + callerSpan + "-01", true, 500, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, rec := recorded(t)
			var inner string
			h := tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// The run's spans start from the request's context.
				_, run := tr.StartRun(r.Context(), "notifications", "run-1")
				run.End(Result{})
				inner = TraceID(r.Context())
				w.WriteHeader(tc.status)
			}))
			req := httptest.NewRequest(http.MethodPost, "/internal/sweep-notifications", nil)
			if tc.traceparent != "" {
				req.Header.Set("traceparent", tc.traceparent)
			}
			rw := httptest.NewRecorder()
			h.ServeHTTP(rw, req)

			spans := rec.Ended()
			if len(spans) != 2 {
				t.Fatalf("%d spans ended, want the run's and the request's", len(spans))
			}
			run, server := spans[0], spans[1]
			if server.SpanKind() != oteltrace.SpanKindServer || server.Name() != "POST" {
				t.Errorf("server span %q kind %v, want POST server", server.Name(), server.SpanKind())
			}
			tid := server.SpanContext().TraceID().String()
			if got := tc.continues; got != (tid == callerTrace) {
				t.Errorf("server span trace id %s, caller's %s: continues=%v, want %v", tid, callerTrace, tid == callerTrace, tc.continues)
			}
			if tc.continues {
				if p := server.Parent(); !p.IsRemote() || p.SpanID().String() != callerSpan {
					t.Errorf("server span parent %v, want the caller's span %s (remote)", p, callerSpan)
				}
			} else if server.Parent().IsValid() {
				t.Errorf("server span has a parent %v without a valid traceparent", server.Parent())
			}
			if inner != tid {
				t.Errorf("TraceID in the handler = %q, want the server span's %s", inner, tid)
			}
			if run.Parent().SpanID() != server.SpanContext().SpanID() || run.SpanContext().TraceID().String() != tid {
				t.Error("the run span is not a child of the request's span")
			}
			a := attrs(server)
			if a["http.response.status_code"].AsInt64() != int64(tc.status) || a["url.path"].AsString() != "/internal/sweep-notifications" ||
				a["http.request.method"].AsString() != "POST" {
				t.Errorf("server span attributes %v", a)
			}
			if got := server.Status().Code == codes.Error; got != tc.wantError {
				t.Errorf("server span status %v, want error=%v", server.Status(), tc.wantError)
			}
		})
	}
}

func TestHandlerDetails(t *testing.T) {
	t.Parallel()
	t.Run("status without WriteHeader", func(t *testing.T) {
		t.Parallel()
		tr, rec := recorded(t)
		tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("ok"))
			w.WriteHeader(http.StatusTeapot) // superfluous: the status was sent with the body
		})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if s := rec.Ended()[0]; attrs(s)["http.response.status_code"].AsInt64() != 200 {
			t.Errorf("status %v, want 200", attrs(s)["http.response.status_code"])
		}
	})
	t.Run("unknown method", func(t *testing.T) {
		t.Parallel()
		tr, rec := recorded(t)
		tr.Handler(&nopHandler{}).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("BREW", "/", nil))
		if s := rec.Ended()[0]; s.Name() != "_OTHER" {
			t.Errorf("span name %q, want _OTHER", s.Name())
		}
	})
	t.Run("ResponseController reaches the writer", func(t *testing.T) {
		t.Parallel()
		tr, _ := recorded(t)
		rw := httptest.NewRecorder()
		tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("Flush through the wrapper: %v", err)
			}
		})).ServeHTTP(rw, httptest.NewRequest(http.MethodGet, "/", nil))
		if !rw.Flushed {
			t.Error("not flushed")
		}
	})
	t.Run("span ends on panic", func(t *testing.T) {
		t.Parallel()
		tr, rec := recorded(t)
		func() {
			defer func() { _ = recover() }()
			tr.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })).
				ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
		}()
		if n := len(rec.Ended()); n != 1 {
			t.Errorf("%d spans ended, want 1", n)
		}
	})
}
