package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// traceparentHeader is the W3C Trace Context header. sweepcron has no tracer of its own (it would
// link the OpenTelemetry SDK for spans nobody exports); it makes up the caller's side of the
// context so that every span the API records for one tick shares a trace id, which the report
// prints for finding them.
const traceparentHeader = "traceparent"

// traceID is a W3C trace id: 16 random bytes, never all zero.
type traceID [16]byte

func (t traceID) String() string { return hex.EncodeToString(t[:]) }

func newTraceID() traceID {
	var t traceID
	for t == (traceID{}) {
		// crypto/rand.Read never fails (it panics if the kernel cannot give randomness).
		_, _ = rand.Read(t[:])
	}
	return t
}

// newSpanID is a W3C parent id: 8 random bytes, never all zero, one per request.
func newSpanID() [8]byte {
	var s [8]byte
	for s == ([8]byte{}) {
		_, _ = rand.Read(s[:])
	}
	return s
}

type traceKey struct{}

// withTrace returns ctx whose requests all carry trace id t.
func withTrace(ctx context.Context, t traceID) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// traceparent returns the header value for one request: version 00, the trace id of ctx (a fresh
// one when ctx has none), a fresh parent id, and the sampled flag, since the API samples what its
// caller samples by default and an unsampled call would leave no trace to find.
func traceparent(ctx context.Context) string {
	t, ok := ctx.Value(traceKey{}).(traceID)
	if !ok {
		t = newTraceID()
	}
	s := newSpanID()
	return "00-" + t.String() + "-" + hex.EncodeToString(s[:]) + "-01"
}
