package trace

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// Handler wraps next so that each request runs in a server span whose parent is the caller's W3C
// traceparent header, when it carries a valid one; the span is in the request's context, so the
// run's spans become its children. With tracing off (or a nil Tracing) it returns next itself.
//
// It trusts the headers it reads: the caller decides the trace id, whether the request is sampled
// (the default sampler follows the parent) and the tracestate exported. Wrap only handlers whose
// caller was authenticated first (the API starts it after the signature check).
//
// The span is named after the method alone, as OpenTelemetry's HTTP conventions say for a
// server that does not know its route template here: a path in the name would give every probe
// of a scanner a span name of its own. The path is the url.path attribute.
func (t *Tracing) Handler(next http.Handler) http.Handler {
	if !t.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := t.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		method := spanMethod(r.Method)
		ctx, span := t.tracer.Start(ctx, method,
			oteltrace.WithSpanKind(oteltrace.SpanKindServer),
			oteltrace.WithAttributes(
				attribute.String("http.request.method", method),
				attribute.String("url.path", r.URL.Path),
			))
		// Deferred, so that a panic on its way to an outer recoverer still ends the span.
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		// A 4xx is the caller's error, not the server's: only a 5xx marks the server span failed.
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

// spanMethod keeps the method set small: an unknown method is "_OTHER", as the conventions say.
func spanMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// statusWriter remembers the status code written. Unwrap lets http.ResponseController reach the
// connection underneath (flush, hijack, deadlines).
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader && code >= 200 {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
