package sweep_test

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/trace"
)

// TestRunTracing checks the runner's spans: one run, its pass under it, and each batch under the pass.
func TestRunTracing(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	at := dbNow(t, pool)
	exec(t, pool, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com')`)
	exec(t, pool, `INSERT INTO notifications (account_id, kind, read_at)
		SELECT '00000000-0000-0000-0000-000000000001', 'old', $1::timestamptz - interval '40 days' FROM generate_series(1, 250)`, at)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(ctx) })
	r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec(t, "notifications")}, Settings: fixed(settings(), 100),
		AsOf: fixedAsOf(at), Tracing: trace.Wrap(tp)})
	if res := run(t, r, "notifications"); res.Deleted != 250 {
		t.Fatalf("deleted %d", res.Deleted)
	}
	var runs, passes, batches int
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
		switch s.Name() {
		case trace.SpanRun:
			runs++
		case trace.SpanPass:
			passes++
		case trace.SpanBatch:
			batches++
		}
	}
	if runs != 1 || passes != 1 || batches != 3 {
		t.Fatalf("spans: %d runs, %d passes, %d batches; want 1, 1, 3", runs, passes, batches)
	}
	if byName[trace.SpanPass].Parent().SpanID() != byName[trace.SpanRun].SpanContext().SpanID() ||
		byName[trace.SpanBatch].Parent().SpanID() != byName[trace.SpanPass].SpanContext().SpanID() {
		t.Fatal("the spans do not nest run → pass → batch")
	}
	// Each span's duration is its own, as the runner's clock measured it.
	for name, s := range byName {
		for _, kv := range s.Attributes() {
			if kv.Key == trace.AttrDurationMs && kv.Value.AsFloat64() <= 0 {
				t.Errorf("%s: %s = %v, want the span's duration", name, kv.Key, kv.Value.AsFloat64())
			}
		}
	}
}
