package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/signing"
)

// TestSignature drives the signature middleware over HTTP. Every refused request must answer 401
// with its own reason, count that reason once, and reach the database not at all: no connection,
// no query, no lease, no row deleted.
func TestSignature(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *options) { o.keys = []string{currentKey, previousKey} })

	const (
		route = "/internal/sweep-notifications"
		body  = `{"batchSize": 500}`
	)
	valid := func() signature { return signatureFor(http.MethodPost, route, body) }
	cases := []struct {
		name string
		// method, target and body are what is sent.
		method, target, body string
		// sig is what is signed; nil sends no signature header.
		sig func() signature
		// header, when set, is sent verbatim as the signature header instead.
		header string
		// extraHeader is sent as a second signature header.
		extraHeader string
		// replay sends the same request once before, expecting it to pass.
		replay bool
		status int
		code   string
	}{
		{name: "valid", sig: valid, status: http.StatusOK},
		{name: "previous key during rotation", status: http.StatusOK,
			sig: func() signature { s := valid(); s.keys = []string{previousKey}; return s }},
		{name: "current and previous key both sent", status: http.StatusOK,
			sig: func() signature { s := valid(); s.keys = []string{otherKey, currentKey}; return s }},
		{name: "wrong key", code: string(signing.ReasonBad),
			sig: func() signature { s := valid(); s.keys = []string{otherKey}; return s }},
		{name: "body tampered", body: `{"batchSize": 50000}`, code: string(signing.ReasonBad), sig: valid},
		{name: "path tampered", target: "/internal/sweep-refresh-tokens", code: string(signing.ReasonBad), sig: valid},
		{name: "query tampered", target: route + "?force=1", code: string(signing.ReasonBad),
			sig: func() signature { s := valid(); s.query = "force=0"; return s }},
		{name: "query added", target: route + "?force=1", code: string(signing.ReasonBad), sig: valid},
		{name: "method tampered", method: http.MethodPut, code: string(signing.ReasonBad), sig: valid},
		{name: "timestamp stale", code: string(signing.ReasonStale),
			sig: func() signature { s := valid(); s.at = time.Now().Add(-maxAge - 2*time.Second); return s }},
		{name: "timestamp in the future", code: string(signing.ReasonStale),
			sig: func() signature { s := valid(); s.at = time.Now().Add(maxAge + 2*time.Second); return s }},
		{name: "nonce replayed", replay: true, code: string(signing.ReasonReplayed), sig: valid},
		{name: "malformed header", header: "t=abc,n=nonce,v1=zz", code: string(signing.ReasonMalformed)},
		{name: "signature header twice", sig: valid, extraHeader: valid().header(), code: string(signing.ReasonMalformed)},
		{name: "missing header", code: string(signing.ReasonMissing)},
		{name: "catalog unsigned", method: http.MethodGet, target: "/internal/sweeps", body: "-", code: string(signing.ReasonMissing)},
		// Unknown names and paths under /internal/ are refused before routing, so an unsigned
		// caller cannot tell which sweeps exist.
		{name: "unknown sweep unsigned", target: "/internal/sweep-nope", code: string(signing.ReasonMissing)},
		{name: "unknown path unsigned", method: http.MethodGet, target: "/internal/nope", body: "-", code: string(signing.ReasonMissing)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method, target, sent := tc.method, tc.target, tc.body
			if method == "" {
				method = http.MethodPost
			}
			if target == "" {
				target = route
			}
			switch sent {
			case "":
				sent = body
			case "-":
				sent = ""
			}
			hdr := map[string]string{"Content-Type": "application/json"}
			switch {
			case tc.header != "":
				hdr[signing.Header] = tc.header
			case tc.sig != nil:
				hdr[signing.Header] = tc.sig().header()
			}
			h.seedNotifications(5)
			if tc.replay {
				if a := h.send(method, target, sent, hdr); a.status != http.StatusOK {
					t.Fatalf("first use of the signature: HTTP %d, want 200: %s", a.status, a.body)
				}
			}

			eligible := h.eligibleNotifications()
			leases := h.count(`SELECT count(*) FROM lease_audit`)
			connects, queries := h.trace.snapshot()
			failures := h.authFailures()

			var a answer
			if tc.extraHeader != "" {
				a = h.sendTwoSignatures(method, target, sent, hdr[signing.Header], tc.extraHeader)
			} else {
				a = h.send(method, target, sent, hdr)
			}

			if tc.status == http.StatusOK {
				if a.status != http.StatusOK {
					t.Fatalf("HTTP %d, want 200: %s", a.status, a.body)
				}
				var res struct {
					StopReason string `json:"stopReason"`
					Deleted    int64  `json:"deleted"`
				}
				decode(t, a, &res)
				if res.StopReason != "exhausted" || res.Deleted != eligible {
					t.Errorf("answer %s, want exhausted with %d deleted", a.body, eligible)
				}
				return
			}

			if a.status != http.StatusUnauthorized {
				t.Fatalf("HTTP %d, want 401: %s", a.status, a.body)
			}
			if code, _ := envelope(t, a); code != tc.code {
				t.Errorf("error = %q, want %q", code, tc.code)
			}
			if got := a.header.Get("WWW-Authenticate"); got != signing.Header {
				t.Errorf("WWW-Authenticate = %q, want %q", got, signing.Header)
			}
			// Nothing reached the database.
			c2, q2 := h.trace.snapshot()
			if c2 != connects || len(q2) != len(queries) {
				t.Errorf("the refused request reached the database: %d connects, queries %q", c2-connects, q2[len(queries):])
			}
			if n := h.count(`SELECT count(*) FROM lease_audit`); n != leases {
				t.Errorf("a lease was written by a refused request")
			}
			if n := h.eligibleNotifications(); n != eligible {
				t.Errorf("eligible notifications went from %d to %d on a refused request", eligible, n)
			}
			// Its reason, and only its reason, was counted.
			after := h.authFailures()
			for reason, before := range failures {
				want := before
				if reason == tc.code {
					want++
				}
				if after[reason] != want {
					t.Errorf("sweeprail_auth_failures_total{reason=%q} = %v, want %v", reason, after[reason], want)
				}
			}
		})
	}
}

// sendTwoSignatures sends a request carrying two signature headers.
func (h *harness) sendTwoSignatures(method, target, body, first, second string) answer {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, h.url+target, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add(signing.Header, first)
	req.Header.Add(signing.Header, second)
	return doRequest(h.t, http.DefaultClient, req)
}

// TestSigningNotConfigured: with no key, /internal/* is closed, whatever the request carries,
// and nothing reaches the database; the unauthenticated routes still answer.
func TestSigningNotConfigured(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *options) { o.keys = nil })
	h.seedNotifications(3)
	cases := []struct {
		name, method, target, body string
	}{
		{"sweep, signed", http.MethodPost, "/internal/sweep-notifications", `{}`},
		{"sweep, unsigned", http.MethodPost, "/internal/sweep-notifications", ``},
		{"dry run", http.MethodPost, "/internal/sweep-notifications", `{"dryRun":true}`},
		{"catalog", http.MethodGet, "/internal/sweeps", ``},
		{"unknown sweep", http.MethodPost, "/internal/sweep-nope", `{}`},
		{"unknown path", http.MethodGet, "/internal/nope", ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			connects, queries := h.trace.snapshot()
			a := h.signed(tc.method, tc.target, tc.body)
			if a.status != http.StatusServiceUnavailable {
				t.Fatalf("HTTP %d, want 503: %s", a.status, a.body)
			}
			if code, _ := envelope(t, a); code != "signing_not_configured" {
				t.Errorf("error = %q, want signing_not_configured", code)
			}
			if c2, q2 := h.trace.snapshot(); c2 != connects || len(q2) != len(queries) {
				t.Errorf("reached the database: %q", q2[len(queries):])
			}
		})
	}
	if n := h.eligibleNotifications(); n != 3 {
		t.Errorf("eligible notifications = %d, want the 3 seeded", n)
	}
	if a := h.send(http.MethodGet, "/healthz", "", nil); a.status != http.StatusOK {
		t.Errorf("/healthz: HTTP %d, want 200", a.status)
	}
}
