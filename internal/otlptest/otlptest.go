// Package otlptest is an in-process OTLP/HTTP trace receiver for tests: a real HTTP server that
// decodes every export request the SDK's exporter sends, gzip included, so that a test checks
// what would reach a collector rather than what a span recorder holds.
package otlptest

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver records every export request it gets. Its URL is the OTLP endpoint to configure.
type Receiver struct {
	URL string
	mu  sync.Mutex
	got []Export
}

// Export is one export request as received.
type Export struct {
	Path   string
	Header http.Header
	Req    *coltracepb.ExportTraceServiceRequest
	// Err is why the request could not be decoded, nil when it was.
	Err error
}

// New starts a receiver, closed when t ends.
func New(t testing.TB) *Receiver {
	t.Helper()
	rc := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := Export{Path: r.URL.Path, Header: r.Header.Clone()}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				e.Err = err
			} else {
				body = zr
			}
		}
		b, err := io.ReadAll(body)
		e.Err = errors.Join(e.Err, err)
		e.Req = &coltracepb.ExportTraceServiceRequest{}
		e.Err = errors.Join(e.Err, proto.Unmarshal(b, e.Req))
		rc.mu.Lock()
		rc.got = append(rc.got, e)
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL
	return rc
}

// Exports returns the export requests received so far.
func (rc *Receiver) Exports() []Export {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Export(nil), rc.got...)
}

// Spans returns every span of every export received so far, in order.
func (rc *Receiver) Spans() []*tracepb.Span {
	var out []*tracepb.Span
	for _, e := range rc.Exports() {
		for _, rs := range e.Req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				out = append(out, ss.GetSpans()...)
			}
		}
	}
	return out
}
