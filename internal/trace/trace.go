// Package trace owns sweeprail's OpenTelemetry tracing: the tracer provider, off unless an OTLP
// endpoint is configured; the HTTP middleware that continues a caller's W3C trace context; and
// the spans of a sweep run (run → pass → batch), so that the runner never touches the OpenTelemetry
// API itself.
//
// Tracing is configured by the standard OTEL_* variables (see Variables), read from the environ map
// the binary passes in, and turned into explicit exporter options, which take precedence over what
// the exporter would read from the process environment. The SDK itself still reads the sampler
// (OTEL_TRACES_SAMPLER), span limits and resource variables from the process environment; the
// binaries build environ from that same environment, so the two agree.
//
// A nil *Tracing, and the *Tracing of New when tracing is off, cost a context lookup per span and
// record nothing, so callers need no "if tracing" of their own.
package trace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// instrumentation is the instrumentation scope of every span this package starts.
const instrumentation = "github.com/sweeprail/sweeprail/internal/trace"

// Tracing starts sweeprail's spans. Build one per process with New and Shutdown it on exit, which
// flushes the spans still buffered.
type Tracing struct {
	tracer     oteltrace.Tracer
	propagator propagation.TextMapPropagator
	enabled    bool
	shutdown   func(context.Context) error
}

// New builds the process's tracing from environ. Without OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), or with OTEL_SDK_DISABLED=true, it returns a Tracing that
// records nothing and whose Handler is the handler itself. Otherwise spans are batched and sent
// by OTLP over HTTP to the endpoint. service is the service.name unless OTEL_SERVICE_NAME is set.
// A malformed variable is an error naming it and its value (header values are never shown).
//
// Export failures are logged on logger at warn level: New routes OpenTelemetry's process-wide
// error handler there, the only way the SDK reports them. Nil discards them.
func New(ctx context.Context, environ map[string]string, service string, logger *slog.Logger) (*Tracing, error) {
	cfg, err := loadConfig(environ, service)
	if err != nil {
		return nil, err
	}
	if !cfg.enabled {
		return &Tracing{tracer: noop.NewTracerProvider().Tracer(instrumentation), propagator: propagation.TraceContext{}}, nil
	}
	exp, err := otlptracehttp.New(ctx, cfg.exporter...)
	if err != nil {
		return nil, fmt.Errorf("build OTLP exporter: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: export failed", "err", err)
	}))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(cfg.resource),
		sdktrace.WithSampler(cfg.sampler),
	)
	t := Wrap(tp)
	t.shutdown = tp.Shutdown
	return t, nil
}

// Wrap returns a Tracing over tp, which the caller owns and shuts down: tests pass an SDK
// provider with a tracetest.SpanRecorder. Its Handler always traces.
func Wrap(tp oteltrace.TracerProvider) *Tracing {
	return &Tracing{
		tracer:     tp.Tracer(instrumentation),
		propagator: propagation.TraceContext{},
		enabled:    true,
	}
}

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t != nil && t.enabled }

// Shutdown flushes the spans still buffered and stops the exporter; ctx bounds the flush (give it
// a few seconds at process exit: the collector may be gone). It is a no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	if err := t.shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("shut down tracing: %w", err)
	}
	return nil
}

// TraceID returns the hex trace id of the span in ctx, or "" when there is none: for logs and
// answers, so that an operator can find a request's trace.
func TraceID(ctx context.Context) string {
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}
