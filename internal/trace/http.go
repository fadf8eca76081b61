package trace

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// Handler wraps next so that each request runs in a server span, child of the caller's W3C
// traceparent when valid, the run's spans its children; with tracing off it returns next. It
// trusts those headers (trace id, sampling, tracestate), so wrap only authenticated handlers.
// The span is named by the method alone, as OpenTelemetry's HTTP conventions say without a route
// template, so a scanner's probes make no span names; the path is the url.path attribute.
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
