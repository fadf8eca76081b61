package trace

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// The span names, one per level of a run.
const (
	SpanRun   = "sweep.run"
	SpanPass  = "sweep.pass"
	SpanBatch = "sweep.batch"
	// SpanThrottle is a wait between batches on a budget, a child of its pass's span.
	SpanThrottle = "sweep.throttle"
)

// The attribute keys of the run's spans. The sweep is on every span of a run, the pass on its
// pass and batch spans, so that a backend can filter any of them alone.
const (
	AttrSweep             = attribute.Key("sweeprail.sweep")
	AttrRunID             = attribute.Key("sweeprail.run_id")
	AttrPass              = attribute.Key("sweeprail.pass")
	AttrPath              = attribute.Key("sweeprail.batch.path")
	AttrBatchSize         = attribute.Key("sweeprail.batch.size")
	AttrRows              = attribute.Key("sweeprail.rows")
	AttrProcessed         = attribute.Key("sweeprail.processed")
	AttrArchived          = attribute.Key("sweeprail.archived")
	AttrPartitionsDropped = attribute.Key("sweeprail.partitions_dropped")
	AttrDurationMs        = attribute.Key("sweeprail.duration_ms")
	AttrStopReason        = attribute.Key("sweeprail.stop_reason")
	AttrThrottleCause     = attribute.Key("sweeprail.throttle.cause")
)

// Span is one span of a run. A nil *Span, which a nil *Tracing returns, does nothing.
type Span struct {
	span oteltrace.Span
}

// Result is what a span ends with. Zero fields are left out, except Rows.
type Result struct {
	// Rows is the rows the span deleted; Processed the keys a per-row pass handed to its
	// function that did the work, which are not rows deleted (the answer's processed).
	Rows      int64
	Processed int64
	// Archived and PartitionsDropped are the rows archived and the partitions dropped.
	Archived          int64
	PartitionsDropped int64
	// Duration is the span's duration as the runner measured it with its own clock, which is
	// what its answer and metrics report; the span's own timestamps come from the wall clock.
	Duration time.Duration
	// StopReason is why a run or a pass stopped.
	StopReason string
	// Err marks the span failed and is recorded as an exception event.
	Err error
}

// scope carries the sweep and pass names down to the spans started under them.
type scope struct {
	sweep, pass string
}

type scopeKey struct{}

func scopeOf(ctx context.Context) scope {
	s, _ := ctx.Value(scopeKey{}).(scope)
	return s
}

// StartRun starts the span of one run of sweep, a child of the request's span when ctx holds one.
// End it when the run ends, skipped and failed runs included.
func (t *Tracing) StartRun(ctx context.Context, sweep, runID string) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	ctx = context.WithValue(ctx, scopeKey{}, scope{sweep: sweep})
	return t.start(ctx, SpanRun, AttrSweep.String(sweep), AttrRunID.String(runID))
}

// StartPass starts the span of one pass, a child of the run's span in ctx.
func (t *Tracing) StartPass(ctx context.Context, pass string) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	s := scopeOf(ctx)
	s.pass = pass
	ctx = context.WithValue(ctx, scopeKey{}, s)
	return t.start(ctx, SpanPass, AttrSweep.String(s.sweep), AttrPass.String(pass))
}

// StartBatch starts the span of one batch transaction, a child of the pass's span in ctx. path
// says how the batch removes rows (a batched pass's access path, heap or index; the pass mode,
// single or per-row; or archive, drop-partition), size is the batch size it asked for.
func (t *Tracing) StartBatch(ctx context.Context, path string, size int) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	s := scopeOf(ctx)
	return t.start(ctx, SpanBatch, AttrSweep.String(s.sweep), AttrPass.String(s.pass),
		AttrPath.String(path), AttrBatchSize.Int(size))
}

// Throttled records a wait of d from began, between batches of the pass in ctx, on cause
// (replica-lag, wal-rate, active-sessions), as a span of its own; a wait of 0 records nothing.
func (t *Tracing) Throttled(ctx context.Context, cause string, began time.Time, d time.Duration) {
	if t == nil || d <= 0 {
		return
	}
	s := scopeOf(ctx)
	_, span := t.tracer.Start(ctx, SpanThrottle, oteltrace.WithTimestamp(began), oteltrace.WithAttributes(
		AttrSweep.String(s.sweep), AttrPass.String(s.pass), AttrThrottleCause.String(cause),
		AttrDurationMs.Float64(float64(d.Microseconds())/1000)))
	span.End(oteltrace.WithTimestamp(began.Add(d)))
}

func (t *Tracing) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, *Span) {
	ctx, span := t.tracer.Start(ctx, name, oteltrace.WithAttributes(attrs...))
	return ctx, &Span{span: span}
}

// End ends the span with r.
func (s *Span) End(r Result) {
	if s == nil {
		return
	}
	if s.span.IsRecording() {
		attrs := []attribute.KeyValue{
			AttrRows.Int64(r.Rows),
			AttrDurationMs.Float64(float64(r.Duration.Microseconds()) / 1000),
		}
		if r.Processed != 0 {
			attrs = append(attrs, AttrProcessed.Int64(r.Processed))
		}
		if r.Archived != 0 {
			attrs = append(attrs, AttrArchived.Int64(r.Archived))
		}
		if r.PartitionsDropped != 0 {
			attrs = append(attrs, AttrPartitionsDropped.Int64(r.PartitionsDropped))
		}
		if r.StopReason != "" {
			attrs = append(attrs, AttrStopReason.String(r.StopReason))
		}
		s.span.SetAttributes(attrs...)
		if r.Err != nil {
			s.span.RecordError(r.Err)
			s.span.SetStatus(codes.Error, r.Err.Error())
		}
	}
	s.span.End()
}

// WithSpanFrom returns ctx carrying the span (and the sweep and pass names) of from. The API runs
// a sweep under a context of its own, not the request's, so that a client going away does not
// stop a run midway; this keeps the run's spans children of the request's span all the same.
func WithSpanFrom(ctx, from context.Context) context.Context {
	ctx = oteltrace.ContextWithSpan(ctx, oteltrace.SpanFromContext(from))
	if s, ok := from.Value(scopeKey{}).(scope); ok {
		ctx = context.WithValue(ctx, scopeKey{}, s)
	}
	return ctx
}
