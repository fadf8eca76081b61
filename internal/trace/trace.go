// Package trace owns sweeprail's OpenTelemetry tracing: the tracer provider, off unless an OTLP
// endpoint is configured; the HTTP middleware that continues a caller's W3C trace context; and
// the run → pass → batch spans, so that the runner never touches the OpenTelemetry API itself.
// Exporter options come from the environ map the binary passes in (Variables); the SDK reads the
// sampler, span limits and resource from the process environment, which environ is built from.
// A nil *Tracing, like one that is off, records nothing, so callers need no "if tracing".
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

// New builds the process's tracing from environ: off without OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT
// or with OTEL_SDK_DISABLED=true, else spans batched to the endpoint by OTLP/HTTP, service the
// service.name unless OTEL_SERVICE_NAME is set. A malformed variable is an error naming it and
// its value (never a header's). Export failures go to logger at warn (nil discards them), through
// OpenTelemetry's process-wide error handler, the only way the SDK reports them.
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
