package trace

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestRunSpans plays a run the way the runner will: run → two passes → batches, the second
// pass failing, and checks the tree and every attribute.
func TestRunSpans(t *testing.T) {
	t.Parallel()
	tr, rec := recorded(t)
	ctx, run := tr.StartRun(context.Background(), "notifications", "run-7")

	pctx, pass := tr.StartPass(ctx, "read")
	for i, rows := range []int64{1000, 200} {
		_, b := tr.StartBatch(pctx, "batched", 1000+i)
		b.End(Result{Rows: rows, Duration: 12500 * time.Microsecond})
	}
	pass.End(Result{Rows: 1200, Duration: 30 * time.Millisecond, StopReason: "exhausted"})

	failure := errors.New("delete batch: ERROR: update or delete violates foreign key constraint (SQLSTATE 23503)")
	pctx, pass = tr.StartPass(ctx, "unread")
	_, b := tr.StartBatch(pctx, "archive", 500)
	b.End(Result{Rows: 0, Archived: 0, Err: failure})
	pass.End(Result{StopReason: "batch-error", Err: failure})
	run.End(Result{Rows: 1200, Processed: 3, Archived: 40, PartitionsDropped: 2, Duration: time.Second, StopReason: "batch-error", Err: failure})

	spans := rec.Ended()
	if len(spans) != 6 {
		t.Fatalf("%d spans, want 6", len(spans))
	}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID().String()] = s
	}
	parentName := func(s sdktrace.ReadOnlySpan) string {
		if p, ok := byID[s.Parent().SpanID().String()]; ok {
			return p.Name()
		}
		return ""
	}
	type want struct {
		name, parent string
		attrs        map[attribute.Key]any
		failed       bool
	}
	for i, w := range []want{
		{SpanBatch, SpanPass, map[attribute.Key]any{AttrSweep: "notifications", AttrPass: "read", AttrPath: "batched", AttrBatchSize: int64(1000), AttrRows: int64(1000), AttrDurationMs: 12.5}, false},
		{SpanBatch, SpanPass, map[attribute.Key]any{AttrSweep: "notifications", AttrPass: "read", AttrBatchSize: int64(1001), AttrRows: int64(200)}, false},
		{SpanPass, SpanRun, map[attribute.Key]any{AttrSweep: "notifications", AttrPass: "read", AttrRows: int64(1200), AttrDurationMs: 30.0, AttrStopReason: "exhausted"}, false},
		{SpanBatch, SpanPass, map[attribute.Key]any{AttrSweep: "notifications", AttrPass: "unread", AttrPath: "archive", AttrRows: int64(0)}, true},
		{SpanPass, SpanRun, map[attribute.Key]any{AttrPass: "unread", AttrStopReason: "batch-error"}, true},
		{SpanRun, "", map[attribute.Key]any{AttrSweep: "notifications", AttrRunID: "run-7", AttrRows: int64(1200), AttrProcessed: int64(3), AttrArchived: int64(40),
			AttrPartitionsDropped: int64(2), AttrDurationMs: 1000.0, AttrStopReason: "batch-error"}, true},
	} {
		s := spans[i]
		if s.Name() != w.name || parentName(s) != w.parent {
			t.Errorf("span %d: %s under %q, want %s under %q", i, s.Name(), parentName(s), w.name, w.parent)
		}
		if s.SpanContext().TraceID() != spans[5].SpanContext().TraceID() {
			t.Errorf("span %d is in another trace", i)
		}
		got := attrs(s)
		for k, v := range w.attrs {
			if got[k].AsInterface() != v {
				t.Errorf("span %d (%s): %s = %v, want %v", i, s.Name(), k, got[k].AsInterface(), v)
			}
		}
		if failed := s.Status().Code == codes.Error; failed != w.failed {
			t.Errorf("span %d (%s): status %v, want failed=%v", i, s.Name(), s.Status(), w.failed)
		}
		if w.failed && (len(s.Events()) == 0 || s.Events()[0].Name != "exception") {
			t.Errorf("span %d (%s): the error is not recorded as an exception event", i, s.Name())
		}
	}
	// Zero counts are left out, rows excepted.
	if _, ok := attrs(spans[3])[AttrArchived]; ok {
		t.Error("a zero archived count was recorded")
	}
}

func TestNilTracing(t *testing.T) {
	t.Parallel()
	var tr *Tracing
	ctx := context.Background()
	rctx, run := tr.StartRun(ctx, "s", "r")
	pctx, pass := tr.StartPass(rctx, "p")
	_, b := tr.StartBatch(pctx, "batched", 1)
	b.End(Result{Err: errors.New("x")})
	pass.End(Result{})
	run.End(Result{})
	if rctx != ctx || tr.Enabled() || tr.Shutdown(ctx) != nil {
		t.Error("a nil Tracing did something")
	}
	next := &nopHandler{}
	if tr.Handler(next) != next {
		t.Error("a nil Tracing wrapped the handler")
	}
}

// TestWithSpanFrom: a run under the server's run context, not the request's, stays in the
// request's trace.
func TestWithSpanFrom(t *testing.T) {
	t.Parallel()
	tr, rec := recorded(t)
	reqCtx, req := tr.StartRun(context.Background(), "a", "r")
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, pass := tr.StartPass(WithSpanFrom(runCtx, reqCtx), "p")
	pass.End(Result{})
	req.End(Result{})
	spans := rec.Ended()
	if spans[0].Parent().SpanID() != spans[1].SpanContext().SpanID() {
		t.Error("the pass span is not a child of the span carried over")
	}
	if attrs(spans[0])[AttrSweep].AsString() != "a" {
		t.Error("the sweep name was not carried over")
	}
}

// TestThrottledSpan: a wait between batches is a span under its pass, dated as the runner
// measured it, naming its cause; a wait of nothing is no span.
func TestThrottledSpan(t *testing.T) {
	t.Parallel()
	tr, rec := recorded(t)
	ctx, run := tr.StartRun(context.Background(), "notifications", "run-8")
	pctx, pass := tr.StartPass(ctx, "read")
	began := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr.Throttled(pctx, "wal-rate", began, 1500*time.Microsecond)
	tr.Throttled(pctx, "active-sessions", began, 0)
	pass.End(Result{})
	run.End(Result{})
	var nilTracing *Tracing
	nilTracing.Throttled(pctx, "wal-rate", began, time.Second)
	spans := rec.Ended()
	if len(spans) != 3 || spans[0].Name() != SpanThrottle || spans[0].Parent().SpanID() != spans[1].SpanContext().SpanID() {
		t.Fatalf("spans %v, want one %s under the pass", spans, SpanThrottle)
	}
	s := spans[0]
	got := attrs(s)
	for k, v := range map[attribute.Key]any{AttrSweep: "notifications", AttrPass: "read", AttrThrottleCause: "wal-rate", AttrDurationMs: 1.5} {
		if got[k].AsInterface() != v {
			t.Errorf("%s = %v, want %v", k, got[k].AsInterface(), v)
		}
	}
	if !s.StartTime().Equal(began) || s.EndTime().Sub(s.StartTime()) != 1500*time.Microsecond {
		t.Errorf("span from %v for %v, want from %v for 1.5ms", s.StartTime(), s.EndTime().Sub(s.StartTime()), began)
	}
}
