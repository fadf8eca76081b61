package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"

	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/trace"
)

// ctxKey is the type of this package's context keys, so no other package can collide with them.
type ctxKey int

const (
	requestIDKey ctxKey = iota
	// verifiedKey marks a request whose signature requireSignature accepted.
	verifiedKey
	// signedKey holds the *bool that requireSignature sets once the signature passed, for
	// countUnsigned, which sits outside it, to read when the answer is done.
	signedKey
)

// countUnsigned counts each request answered without a valid signature: those start no trace
// span (requireSignature starts the span only after the signature), and the count is what is left
// of them to watch.
func countUnsigned(m *metrics.Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			signed := new(bool)
			// Deferred, so that a request whose handler panics is counted as what it was.
			defer func() {
				if !*signed {
					m.UnsignedRequest()
				}
			}()
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), signedKey, signed)))
		})
	}
}

// requestIDHeader carries the request id both ways: taken from a caller that sets it (a proxy),
// returned on every answer so a client's report can be matched to the server's log.
const requestIDHeader = "X-Request-Id"

// requestIDFrom returns the request id set by requestID, or "".
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// requestID gives each request an id: the caller's when it is a sane token, a fresh uuid v7
// otherwise (time-ordered, so ids sort like the log).
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(requestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(requestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

func newRequestID() string {
	if id, err := uuid.NewV7(); err == nil {
		return id.String()
	}
	return uuid.NewString()
}

// validRequestID accepts 1 to 128 characters of letters, digits and ._:- : anything longer or
// stranger is not an id a proxy made, and is not worth carrying into logs.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// quietPaths are polled by probes and scrapers every few seconds; their successes are logged at
// debug level so they do not drown the sweeps in the log.
var quietPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// accessLog logs one line per request. It logs in a deferred call, so a request whose handler
// aborts (a panic after the answer began) is still logged.
func accessLog(logger *slog.Logger, now func() time.Time) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			defer func() {
				status := ww.Status()
				if status == 0 {
					// Nothing was written: net/http answers 200 with an empty body, or the
					// handler aborted and the connection is dropped.
					status = http.StatusOK
				}
				level := slog.LevelInfo
				switch {
				case status >= 500:
					level = slog.LevelError
				case quietPaths[r.URL.Path] && status < 300:
					level = slog.LevelDebug
				}
				logger.LogAttrs(r.Context(), level, "request",
					slog.String("request_id", requestIDFrom(r.Context())),
					slog.String("method", r.Method),
					slog.String("path", r.URL.Path),
					slog.Int("status", status),
					slog.Int("bytes", ww.BytesWritten()),
					slog.Int64("duration_ms", now().Sub(start).Milliseconds()),
					slog.String("remote_addr", r.RemoteAddr),
					slog.String("user_agent", r.UserAgent()),
				)
			}()
			next.ServeHTTP(ww, r)
		})
	}
}

// recoverPanic turns a panic into a logged 500 envelope. When the answer had already begun, a
// proper answer is impossible, so it aborts the connection instead: the client then sees a broken
// answer, not a complete-looking truncated one.
func recoverPanic(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				rec := recover()
				if rec == nil {
					return
				}
				if rec == http.ErrAbortHandler { // net/http compares it the same way
					panic(rec)
				}
				logger.Error("panic", "request_id", requestIDFrom(r.Context()), "panic", fmt.Sprint(rec), "stack", string(debug.Stack()))
				if ww, ok := w.(middleware.WrapResponseWriter); ok && ww.Status() != 0 {
					panic(http.ErrAbortHandler)
				}
				writeJSON(w, r, logger, http.StatusInternalServerError,
					errorBody{Error: codeInternal, Message: "internal error; the server log has the details"})
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// internalPrefix is the part of the URL space behind the signature.
const internalPrefix = "/internal"

// isInternal reports whether a request for u must meet the signature check: its path, decoded or
// raw, cleaned or not, is /internal or under it. Generous on purpose: a path that only looks
// internal costs its sender a 401, while one the router sends into /internal unchecked would be
// a way around the signature.
func isInternal(u *url.URL) bool {
	for _, p := range []string{u.Path, u.RawPath} {
		for _, q := range []string{p, path.Clean("/" + p)} {
			if q == internalPrefix || strings.HasPrefix(q, internalPrefix+"/") {
				return true
			}
		}
	}
	return false
}

// signInternal sends every /internal request through check before the router sees it. It sits
// in front of routing because chi answers a method it does not know (FOO, a lower-case post) with
// 405 before any subrouter's middleware runs, which told an unsigned caller which paths exist.
func signInternal(check func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		checked := check(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isInternal(r.URL) {
				checked.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// ensureSigned is the /internal subrouter's own line: a request that reached it without passing
// signInternal (a path isInternal failed to recognise) meets the check here, never skips it.
func ensureSigned(check func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		checked := check(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ok, _ := r.Context().Value(verifiedKey).(bool); ok {
				next.ServeHTTP(w, r)
				return
			}
			checked.ServeHTTP(w, r)
		})
	}
}

// requireSignature guards /internal/*, cheapest refusal first: a configured key (503; no key must
// never mean an open door), the header alone, the body (under maxBodyBytes, within bodyTimeout),
// then the MAC and the replay check. Only a verified request reaches the database, the handler
// or the tracing: an unsigned caller can neither make a span nor steer a trace.
func requireSignature(logger *slog.Logger, v *signing.Verifier, m *metrics.Metrics, bodyTimeout time.Duration, tr *trace.Tracing) func(http.Handler) http.Handler {
	refused := func(w http.ResponseWriter, r *http.Request, err error) {
		var se *signing.Error
		if errors.As(err, &se) {
			m.AuthFailure(string(se.Reason))
			logger.Warn("signature refused", "request_id", requestIDFrom(r.Context()), "reason", se.Reason,
				"detail", se.Detail, "method", r.Method, "path", r.URL.Path, "remote_addr", r.RemoteAddr)
		}
	}
	return func(next http.Handler) http.Handler {
		traced := tr.Handler(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v == nil {
				refuseUnread(w, r, logger, bodyTimeout, newError(http.StatusServiceUnavailable, codeSigningNotConfigured,
					"no signing key is configured on the server (INTERNAL_SIGNING_KEY): /internal/* is closed"))
				return
			}
			if err := checkHeader(v, r); err != nil {
				refused(w, r, err)
				refuseUnread(w, r, logger, bodyTimeout, err)
				return
			}
			if r.ContentLength > maxBodyBytes {
				refuseUnread(w, r, logger, bodyTimeout, &http.MaxBytesError{Limit: maxBodyBytes})
				return
			}
			body, err := readBody(w, r, bodyTimeout)
			if err != nil {
				writeError(w, r, logger, err)
				return
			}
			if err := verify(v, r, body); err != nil {
				refused(w, r, err)
				writeError(w, r, logger, err)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			if signed, ok := r.Context().Value(signedKey).(*bool); ok {
				*signed = true
			}
			traced.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey, true)))
		})
	}
}

// checkHeader runs the checks that need no body.
func checkHeader(v *signing.Verifier, r *http.Request) error {
	if n := len(r.Header.Values(signing.Header)); n > 1 {
		return &signing.Error{Reason: signing.ReasonMalformed, Detail: fmt.Sprintf("%s given %d times", signing.Header, n)}
	}
	return v.CheckHeader(r.Header.Get(signing.Header))
}

// readBody reads the body under maxBodyBytes within timeout of now. The deadline is the
// connection's, so a client that sends its body a byte at a time is cut when it passes, however
// long the server's ReadTimeout is; it is lifted once the body is in, since net/http's background
// read would otherwise cancel the request's context when it passed.
func readBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) ([]byte, error) {
	rc := http.NewResponseController(w)
	// Not supported only under a test recorder, where no client can be slow.
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
		return body, nil
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, err
	case errors.Is(err, os.ErrDeadlineExceeded):
		// Whatever is left of the body is still on the wire: the connection cannot serve another request.
		w.Header().Set("Connection", "close")
		return nil, newError(http.StatusRequestTimeout, codeBodyTimeout,
			"the request body did not arrive within %s", timeout)
	}
	return nil, badRequest("read the request body: %v", err)
}

// refuseUnread answers err to a request whose body was not read, and closes the connection: after
// the answer, net/http would drain the body to keep the connection, for as long as the client
// takes to send it. The drain gets drainTimeout, so a client whose body was already on its way
// still reads the answer rather than a reset.
func refuseUnread(w http.ResponseWriter, r *http.Request, logger *slog.Logger, drainTimeout time.Duration, err error) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(drainTimeout))
	writeError(w, r, logger, err)
}

// verify checks r's signature over body. Two signature headers are malformed rather than "take
// the first": which one a proxy or a client meant is a guess, and guessing in an auth check is how
// one header gets checked and another one trusted.
func verify(v *signing.Verifier, r *http.Request, body []byte) error {
	if n := len(r.Header.Values(signing.Header)); n > 1 {
		return &signing.Error{Reason: signing.ReasonMalformed, Detail: fmt.Sprintf("%s given %d times", signing.Header, n)}
	}
	return v.VerifyContext(r.Context(), r.Header.Get(signing.Header), r.Method, r.URL.Path, r.URL.RawQuery, body)
}
