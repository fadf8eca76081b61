package httpapi_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/signing"
)

// TestInternalSignatureFirst: every request under /internal meets the signature
// check before the router, whatever its method or path: an unknown method (FOO, a lower-case
// post) must not get chi's 405 with an Allow header, which would name the route unsigned.
func TestInternalSignatureFirst(t *testing.T) {
	h := newHarness(t)
	cases := []struct{ method, target string }{
		{"FOO", "/internal/sweep-notifications"},
		{"post", "/internal/sweep-notifications"},
		{"FOO", "/internal/sweeps"},
		{"PROPFIND", "/internal/nope"},
		{http.MethodDelete, "/internal/sweeps"},
		{http.MethodGet, "/internal"},
		{http.MethodGet, "//internal/sweeps"},
		{http.MethodGet, "/%69nternal/sweeps"},
		{http.MethodGet, "/internal%2Fsweeps"},
		{http.MethodGet, "/internal/../internal/sweeps"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			connects, queries := h.trace.snapshot()
			before := h.authFailures()[string(signing.ReasonMissing)]
			a := h.send(tc.method, tc.target, "", nil)
			if a.status != http.StatusUnauthorized {
				t.Fatalf("HTTP %d, want 401: %s", a.status, a.body)
			}
			if code, _ := envelope(t, a); code != string(signing.ReasonMissing) {
				t.Errorf("error %q, want missing_signature", code)
			}
			if allow := a.header.Get("Allow"); allow != "" {
				t.Errorf("Allow = %q on an unsigned request: it names the route", allow)
			}
			if got := h.authFailures()[string(signing.ReasonMissing)]; got != before+1 {
				t.Errorf("missing_signature counted %v times, want once", got-before)
			}
			if c2, q2 := h.trace.snapshot(); c2 != connects || len(q2) != len(queries) {
				t.Errorf("reached the database: %q", q2[len(queries):])
			}
		})
	}
	// Signed, the same requests reach the router, which then says what it says.
	for _, method := range []string{"FOO", "post"} {
		t.Run("signed "+method, func(t *testing.T) {
			hdr := map[string]string{signing.Header: signatureFor(method, "/internal/sweep-notifications", "").header()}
			if a := h.send(method, "/internal/sweep-notifications", "", hdr); a.status != http.StatusMethodNotAllowed {
				t.Fatalf("HTTP %d, want 405: %s", a.status, a.body)
			}
		})
	}
}

// TestSweepQueryRefused: a query string on a sweep route is refused after the
// signature passes: ?dryRun=true, signed with its query, must never run the sweep for real.
func TestSweepQueryRefused(t *testing.T) {
	h := newHarness(t)
	h.seedNotifications(7)
	const route = "/internal/sweep-notifications"
	for _, target := range []string{route + "?dryRun=true", route + "?", route + "?batchSize=10&dryRun=true"} {
		t.Run(target, func(t *testing.T) {
			a := h.signed(http.MethodPost, target, `{}`)
			if a.status != http.StatusBadRequest {
				t.Fatalf("HTTP %d, want 400: %s", a.status, a.body)
			}
			if code, msg := envelope(t, a); code != "unexpected_query" || !strings.Contains(msg, "JSON body") {
				t.Errorf("error %q %q, want unexpected_query pointing at the body", code, msg)
			}
			if n := h.eligibleNotifications(); n != 7 {
				t.Errorf("eligible notifications went from 7 to %d", n)
			}
			if n := h.count(`SELECT count(*) FROM lease_audit`); n != 0 {
				t.Errorf("a request with a query took the lease")
			}
		})
	}
	t.Run("unsigned: the signature is checked first", func(t *testing.T) {
		a := h.send(http.MethodPost, route+"?dryRun=true", `{}`, nil)
		if code, _ := envelope(t, a); a.status != http.StatusUnauthorized || code != string(signing.ReasonMissing) {
			t.Errorf("HTTP %d %q, want 401 missing_signature", a.status, code)
		}
	})
	t.Run("the same request without the query runs", func(t *testing.T) {
		if a := h.signed(http.MethodPost, route, `{"dryRun": true}`); a.status != http.StatusOK {
			t.Fatalf("HTTP %d: %s", a.status, a.body)
		}
	})
}

// rawRequest is a request written by hand on a raw connection, so that its body can stall.
type rawRequest struct {
	header        string // the signature header's value; "" sends none
	contentLength int
	sent          string // the part of the body sent before stalling
}

// sendStalled writes r to the harness and stalls. It returns the answer, how long it took to
// come, and whether the server then closed the connection (read to EOF). safety bounds every read:
// a server that waits for the rest of the body fails the test instead of hanging it.
func sendStalled(t *testing.T, h *harness, r rawRequest) (resp *http.Response, body []byte, took time.Duration, closed bool) {
	t.Helper()
	const safety = 10 * time.Second
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(safety)); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "POST /internal/sweep-notifications HTTP/1.1\r\nHost: sweeprail.test\r\n")
	fmt.Fprintf(&b, "Content-Type: application/json\r\nContent-Length: %d\r\n", r.contentLength)
	if r.header != "" {
		fmt.Fprintf(&b, "%s: %s\r\n", signing.Header, r.header)
	}
	b.WriteString("\r\n" + r.sent)
	start := time.Now()
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("no answer within %s: the server is waiting for the rest of the body", safety)
		}
		t.Fatalf("read the answer: %v", err)
	}
	took = time.Since(start)
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("read the answer's body: %v", err)
	}
	_, err = br.ReadByte()
	return resp, body, took, errors.Is(err, io.EOF)
}

// TestHeaderBeforeBody: a request whose signature header is missing, malformed
// or stale is refused before its body is read, and its connection is closed rather than drained,
// so a client sending its body a byte at a time holds nothing, not a connection for the whole
// write timeout.
func TestHeaderBeforeBody(t *testing.T) {
	const drain = 200 * time.Millisecond
	h := newHarness(t, func(o *options) { o.bodyTimeout = drain })
	stale := signatureFor(http.MethodPost, "/internal/sweep-notifications", `{}`)
	stale.at = time.Now().Add(-2 * maxAge)
	cases := []struct {
		name, header, code string
		contentLength      int
		status             int
	}{
		{"missing", "", string(signing.ReasonMissing), 1000, http.StatusUnauthorized},
		{"malformed", "t=1,n=2,v1=3", string(signing.ReasonMalformed), 1000, http.StatusUnauthorized},
		{"stale", stale.header(), string(signing.ReasonStale), 1000, http.StatusUnauthorized},
		// A fresh header, but a body over the cap is refused by its declared length alone.
		{"declared body over the cap", signatureFor(http.MethodPost, "/internal/sweep-notifications", `{}`).header(),
			"body_too_large", 70 << 10, http.StatusRequestEntityTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			connects, queries := h.trace.snapshot()
			resp, body, took, closed := sendStalled(t, h, rawRequest{header: tc.header, contentLength: tc.contentLength, sent: "{"})
			if resp.StatusCode != tc.status || !strings.Contains(string(body), `"error":"`+tc.code+`"`) {
				t.Fatalf("HTTP %d %s, want %d %s", resp.StatusCode, body, tc.status, tc.code)
			}
			if !closed {
				t.Error("the connection stayed open after the refusal")
			}
			if c2, q2 := h.trace.snapshot(); c2 != connects || len(q2) != len(queries) {
				t.Errorf("reached the database: %q", q2[len(queries):])
			}
			t.Logf("answered in %s", took.Round(time.Millisecond))
		})
	}
	t.Run("no signing key configured", func(t *testing.T) {
		closedServer := newHarness(t, func(o *options) { o.keys = nil; o.bodyTimeout = drain })
		resp, body, _, closed := sendStalled(t, closedServer, rawRequest{contentLength: 1000, sent: "{"})
		if resp.StatusCode != http.StatusServiceUnavailable || !closed {
			t.Errorf("HTTP %d %s, closed %v: want 503 and the connection closed", resp.StatusCode, body, closed)
		}
	})
}

// TestBodyDeadline: a request whose header passed gets bodyTimeout for its body, not the write
// timeout; past it, 408 and the connection closed. Its nonce is not spent, since the MAC was
// never checked: the same signed request, sent whole, still runs.
func TestBodyDeadline(t *testing.T) {
	const deadline = 300 * time.Millisecond
	h := newHarness(t, func(o *options) { o.bodyTimeout = deadline })
	h.seedNotifications(3)
	const body = `{"dryRun": true}`
	header := signatureFor(http.MethodPost, "/internal/sweep-notifications", body).header()

	resp, answer, took, closed := sendStalled(t, h, rawRequest{header: header, contentLength: len(body), sent: body[:5]})
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(answer), `"error":"body_timeout"`) {
		t.Fatalf("HTTP %d %s, want 408 body_timeout", resp.StatusCode, answer)
	}
	if !closed {
		t.Error("the connection stayed open after the body timed out")
	}
	if took < deadline {
		t.Errorf("answered after %s, before the %s deadline", took, deadline)
	}
	t.Logf("408 after %s (deadline %s)", took.Round(time.Millisecond), deadline)

	a := h.send(http.MethodPost, "/internal/sweep-notifications", body,
		map[string]string{signing.Header: header, "Content-Type": "application/json"})
	if a.status != http.StatusOK {
		t.Fatalf("the same request sent whole: HTTP %d, want 200: %s", a.status, a.body)
	}
}

// TestDryRunsBounded: at most maxDryRuns dry runs count at once; the next
// answers 429 busy with Retry-After at once instead of queueing for a connection; a run is not
// a dry run and is not refused; the slots come back when the counts end. The counts are held on
// a lock the test takes, and waited for through pg_blocking_pids, not with sleeps.
func TestDryRunsBounded(t *testing.T) {
	const slots = 2
	h := newHarness(t, func(o *options) {
		o.maxDryRuns = slots
		o.settings.CountTimeout = time.Minute // the held counts must outlast the test
	})
	h.seedNotifications(4)

	locker, err := h.db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Release()
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE notifications IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var lockerPID int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&lockerPID); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	held := make([]answer, slots)
	for i := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held[i] = h.signed(http.MethodPost, "/internal/sweep-notifications", `{"dryRun": true}`)
		}()
	}
	h.waitFor(fmt.Sprintf("%d dry runs blocked on the lock", slots), func() bool {
		return h.count(`SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, lockerPID) == slots
	})

	a := h.signed(http.MethodPost, "/internal/sweep-refresh-tokens", `{"dryRun": true}`)
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("dry run %d: HTTP %d, want 429: %s", slots+1, a.status, a.body)
	}
	if code, _ := envelope(t, a); code != "busy" {
		t.Errorf("error %q, want busy", code)
	}
	if got := a.header.Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After = %q, want 60 (the count timeout in seconds)", got)
	}
	if a := h.signed(http.MethodPost, "/internal/sweep-refresh-tokens", `{}`); a.status != http.StatusOK {
		t.Errorf("a run while the dry runs are full: HTTP %d, want 200: %s", a.status, a.body)
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, a := range held {
		if a.status != http.StatusOK {
			t.Errorf("held dry run %d: HTTP %d: %s", i, a.status, a.body)
		}
	}
	if a := h.signed(http.MethodPost, "/internal/sweep-notifications", `{"dryRun": true}`); a.status != http.StatusOK {
		t.Errorf("a dry run after the others ended: HTTP %d, want 200: %s", a.status, a.body)
	}
}
