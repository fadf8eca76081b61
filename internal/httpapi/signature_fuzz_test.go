package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// fuzzServer returns a maker of the real router over a runner whose pool points at a closed
// port, traced: any contact with the database shows as a connect attempt, and fails fast. The
// pool and the runner are shared by every input of one fuzz worker (a worker runs its inputs one
// at a time, so the trace's counts before and after an input are that input's); each call makes a
// fresh verifier, so the replay cache of one input never decides another's answer.
func fuzzServer(f *testing.F) func() (http.Handler, *dbTrace) {
	cfg, err := pgxpool.ParseConfig("postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		f.Fatal(err)
	}
	trace := &dbTrace{}
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(pool.Close)
	logger := slog.New(slog.DiscardHandler)
	runner, err := sweep.NewRunner(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: defaultOptions().settings, Logger: logger})
	if err != nil {
		f.Fatal(err)
	}
	return func() (http.Handler, *dbTrace) {
		v := signing.NewVerifier(byteKeys(currentKey), maxAge, time.Now, 16)
		return httpapi.NewServer(httpapi.Deps{Logger: logger, Runner: runner, Pool: pool, Verifier: v}), trace
	}
}

// contact is what one input did to the database: connects and queries seen since before.
func contact(trace *dbTrace, connectsBefore int, queriesBefore []string) (connects int, queries []string) {
	c, q := trace.snapshot()
	return c - connectsBefore, q[len(queriesBefore):]
}

// serve sends one request to h, built by hand so that any method, path and query the fuzzer
// makes reaches the router as it is.
func serve(h http.Handler, method, path, rawQuery string, header http.Header, body []byte) *httptest.ResponseRecorder {
	req := &http.Request{
		Method:        method,
		URL:           &url.URL{Path: path, RawQuery: rawQuery},
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Host:          "sweeprail.test",
		RemoteAddr:    "127.0.0.1:1",
		RequestURI:    path,
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(ctx))
	return rec
}

// FuzzUnsignedRequest sends /internal/* requests with any method, path, query, body and
// signature header, none of them signed with the server's key. Every one is refused (401, or 413
// for a body over the cap behind a fresh, well-formed header; never the router's 405, whatever the
// method) with a JSON envelope, a 401 names a known reason, and not one reaches the database: the
// signature is checked before anything else.
//
//	go test -run='^$' -fuzz=FuzzUnsignedRequest -fuzztime=20s ./internal/httpapi/
func FuzzUnsignedRequest(f *testing.F) {
	now := time.Now()
	forged := signing.Sign(byteKeys(otherKey), now, signing.NewNonce(), http.MethodPost, "/internal/sweep-notifications", "", []byte(`{}`))
	for _, s := range []struct{ header, method, path, query, body string }{
		{forged, http.MethodPost, "sweep-notifications", "", `{}`},
		{"", http.MethodPost, "sweep-notifications", "", `{"batchSize": 50000}`},
		{"t=1,n=x,v1=00", http.MethodGet, "sweeps", "", ``},
		{forged + "," + forged, http.MethodPost, "sweep-nope", "a=1", `{}`},
		{"v1=" + strings.Repeat("0", 64), http.MethodDelete, "../healthz", "", ``},
		{forged, "BREW", "sweep-notifications", "", `{}`},
		{"t=" + strings.Repeat("9", 30), http.MethodPost, "sweep-outbox", "", strings.Repeat("x", 70<<10)},
	} {
		f.Add(s.header, s.method, s.path, s.query, []byte(s.body))
	}
	newServer := fuzzServer(f)
	f.Fuzz(func(t *testing.T, sig, method, path, rawQuery string, body []byte) {
		h, trace := newServer()
		c0, q0 := trace.snapshot()
		header := http.Header{"Content-Type": {"application/json"}}
		if sig != "" {
			header.Set(signing.Header, sig)
		}
		rec := serve(h, method, "/internal/"+path, rawQuery, header, body)

		if !slices.Contains([]int{http.StatusUnauthorized, http.StatusRequestEntityTooLarge}, rec.Code) {
			t.Fatalf("%s /internal/%s?%s with header %q: HTTP %d, want 401 or 413: %s", method, path, rawQuery, sig, rec.Code, rec.Body)
		}
		var env struct{ Error, Message string }
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Error == "" || env.Message == "" {
			t.Fatalf("HTTP %d: not an error envelope: %q", rec.Code, rec.Body)
		}
		if rec.Code == http.StatusUnauthorized && !slices.Contains(signing.Reasons(), signing.Reason(env.Error)) {
			t.Fatalf("401 with error %q, not a signing reason", env.Error)
		}
		if connects, queries := contact(trace, c0, q0); connects != 0 || len(queries) != 0 {
			t.Fatalf("an unsigned request reached the database: %d connects, queries %q", connects, queries)
		}
	})
}

// FuzzSignedBody sends correctly signed sweep requests with any body and Content-Type. A body
// the route does not take is refused with its 4xx before the database; only a body that is JSON
// (or empty) may reach it, and a 5xx (the database is down here) only comes from one that did.
//
//	go test -run='^$' -fuzz=FuzzSignedBody -fuzztime=20s ./internal/httpapi/
func FuzzSignedBody(f *testing.F) {
	for _, s := range []struct{ contentType, body string }{
		{"application/json", `{"dryRun": true}`},
		{"application/json", `{"batchSize": 0}`},
		{"application/json", `{"batchSize": 100, "force": true}`},
		{"application/json; charset=utf-8", ``},
		{"", `{}`},
		{"text/plain", `{}`},
		{"application/json", `dryRun=true`},
		{"application/json", `{"dryRun": true, "dryRun": false}`},
		{"application/json", `{"dryRun": false, "pad": "` + strings.Repeat("x", 64<<10) + `"}`},
	} {
		f.Add(s.contentType, []byte(s.body))
	}
	newServer := fuzzServer(f)
	const route = "/internal/sweep-notifications"
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		h, trace := newServer()
		c0, q0 := trace.snapshot()
		header := http.Header{}
		if contentType != "" {
			header.Set("Content-Type", contentType)
		}
		header.Set(signing.Header, signing.Sign(byteKeys(currentKey), time.Now(), signing.NewNonce(), http.MethodPost, route, "", body))
		rec := serve(h, http.MethodPost, route, "", header, body)

		connects, queries := contact(trace, c0, q0)
		reached := connects != 0 || len(queries) != 0
		switch {
		case rec.Code == http.StatusUnauthorized:
			t.Fatalf("a correctly signed request was refused: %s", rec.Body)
		case rec.Code >= 400 && rec.Code < 500 && reached:
			t.Fatalf("HTTP %d, yet the request reached the database (%d connects): %s", rec.Code, connects, rec.Body)
		case rec.Code >= 500 && !reached:
			t.Fatalf("HTTP %d without touching the database: %s", rec.Code, rec.Body)
		case reached && len(bytes.Trim(body, " \t\r\n")) > 0 && !json.Valid(body):
			t.Fatalf("a body that is not JSON reached the database: %q", body)
		}
	})
}
