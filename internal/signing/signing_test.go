package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Test fixtures. Constants only: the keys are turned into []byte where used.
const (
	curKey    = "sweeprail-test-key-current-0123456789abcdef"
	prevKey   = "sweeprail-test-key-previous-0123456789abcdef"
	otherKey  = "sweeprail-test-key-someone-else-0123456789ab"
	baseUnix  = 1700000000 // 2023-11-14T22:13:20Z
	testNonce = "0b6f5d2e-6c1a-4f8e-9a53-3c2d1e0f4a7b"
	sweepPath = "/internal/sweep-notifications"
	testBody  = `{"dryRun":true}`
	window    = 60 * time.Second
)

func base() time.Time { return time.Unix(baseUnix, 0) }

func keys(ks ...string) [][]byte {
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = []byte(k)
	}
	return out
}

// clock is an injected clock that tests move by hand; locked because Verify reads it from many
// goroutines in the concurrency test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// wantReason fails unless err is nil (want == "") or a *Error, possibly wrapped, with Reason want.
func wantReason(t *testing.T, err error, want Reason) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("Verify = %v, want nil", err)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Verify = %v (%T), want *Error with reason %q", err, err, want)
	}
	if e.Reason != want {
		t.Fatalf("Verify reason = %q (%v), want %q", e.Reason, err, want)
	}
	if e.Detail == "" {
		t.Errorf("Verify %q has no Detail; operators need one in the logs", e.Reason)
	}
}

// TestSignKnownVector pins the wire format. The expected MACs are computed here by hand with
// crypto/hmac from the literal message, and also given as constants produced with openssl:
//
//	H=$(printf '%s' '{"dryRun":true}' | openssl dgst -sha256 -r | cut -d' ' -f1)
//	printf 'v1\n1700000000\n0b6f5d2e-…\nPOST\n/internal/sweep-notifications\n\n%s' "$H" |
//	  openssl dgst -sha256 -hmac "$KEY" -r
//
// If this test fails, the format changed and every deployed client and the documented openssl
// recipe with it.
func TestSignKnownVector(t *testing.T) {
	const emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	tests := []struct {
		name                  string
		keys                  [][]byte
		method, path, query   string
		body                  []byte
		message               string
		openssl               []string
		wantHeaderWithoutMACs string
	}{
		{
			name:   "post with body, two keys",
			keys:   keys(curKey, prevKey),
			method: "POST", path: sweepPath, query: "",
			body: []byte(testBody),
			message: "v1\n1700000000\n" + testNonce + "\nPOST\n/internal/sweep-notifications\n\n" +
				"e59f1698ce59234efe2e872cfe891a303dc5993d05a87ca5476decaa7dfde3f7",
			openssl: []string{
				"7106420a42d5c6dd780aa3c7c3eb041612ce76d1a886323ea0e14a817c652147",
				"2e0f16805c917db8d79606f8b18a339345eb58934d4c6ac195fbc96a43e835cc",
			},
		},
		{
			name:   "get with query, no body",
			keys:   keys(curKey),
			method: "GET", path: "/internal/sweeps", query: "verbose=1&x=%20y",
			body:    nil,
			message: "v1\n1700000000\n" + testNonce + "\nGET\n/internal/sweeps\nverbose=1&x=%20y\n" + emptySHA,
			openssl: []string{"69d93d301da45de4cb04cc6cedcc6fff1a9ccad3bbf2f091f6b6e63ab58f184d"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := "t=1700000000,n=" + testNonce
			for i, k := range tc.keys {
				h := hmac.New(sha256.New, k)
				h.Write([]byte(tc.message))
				byHand := hex.EncodeToString(h.Sum(nil))
				if byHand != tc.openssl[i] {
					t.Fatalf("fixture disagrees with itself: hmac by hand %s, openssl %s", byHand, tc.openssl[i])
				}
				want += ",v1=" + byHand
			}
			// A fractional second must not leak into t: it is truncated, as unix seconds are.
			got := Sign(tc.keys, base().Add(900*time.Millisecond), testNonce, tc.method, tc.path, tc.query, tc.body)
			if got != want {
				t.Fatalf("Sign =\n  %s\nwant\n  %s", got, want)
			}
		})
	}
}

func TestSign(t *testing.T) {
	t.Run("empty keys are skipped", func(t *testing.T) {
		got := Sign([][]byte{nil, []byte(curKey), {}}, base(), testNonce, "POST", sweepPath, "", nil)
		want := Sign(keys(curKey), base(), testNonce, "POST", sweepPath, "", nil)
		if got != want {
			t.Fatalf("Sign with empty keys = %s, want %s", got, want)
		}
	})
	t.Run("body nil and empty sign alike", func(t *testing.T) {
		a := Sign(keys(curKey), base(), testNonce, "POST", sweepPath, "", nil)
		b := Sign(keys(curKey), base(), testNonce, "POST", sweepPath, "", []byte{})
		if a != b {
			t.Fatalf("nil body %s != empty body %s", a, b)
		}
	})
}

func TestNewNonce(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		n := NewNonce()
		id, err := uuid.Parse(n)
		if err != nil || len(n) != 36 {
			t.Fatalf("NewNonce = %q, not a 36-character uuid: %v", n, err)
		}
		if id.Version() != 4 {
			t.Fatalf("NewNonce = %q is version %d, want a random (v4) uuid", n, id.Version())
		}
		if seen[n] {
			t.Fatalf("NewNonce repeated %q", n)
		}
		seen[n] = true
	}
}

func TestSignRequest(t *testing.T) {
	tests := []struct {
		name, method, target string
		body                 []byte
	}{
		{"post with body", http.MethodPost, "http://api:8080/internal/sweep-notifications", []byte(testBody)},
		{"post with query", http.MethodPost, "http://api:8080/internal/sweep-outbox?dryRun=1&batchSize=10", nil},
		{"empty method is GET on the wire", "", "http://api:8080/internal/sweeps", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.target, strings.NewReader(string(tc.body)))
			if err != nil {
				t.Fatal(err)
			}
			req.Method = tc.method // NewRequest turns "" into GET; the client may still build one by hand.
			SignRequest(req, tc.body, []byte(curKey), base())

			// What the server sees of the same request.
			srv := httptest.NewRequest(cmpOr(tc.method, http.MethodGet), tc.target, strings.NewReader(string(tc.body)))
			srv.Header = req.Header
			v := NewVerifier(keys(curKey), window, newClock(base()).now, 10)
			wantReason(t, v.Verify(srv.Header.Get(Header), srv.Method, srv.URL.Path, srv.URL.RawQuery, tc.body), "")
		})
	}
	t.Run("fresh nonce per request", func(t *testing.T) {
		v := NewVerifier(keys(curKey), window, newClock(base()).now, 10)
		for i := range 3 {
			req := httptest.NewRequest(http.MethodPost, sweepPath, nil)
			SignRequest(req, nil, []byte(curKey), base())
			if err := v.Verify(req.Header.Get(Header), req.Method, req.URL.Path, req.URL.RawQuery, nil); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		}
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestReasons(t *testing.T) {
	want := []string{"missing_signature", "malformed_signature", "stale_timestamp", "bad_signature", "replayed"}
	got := Reasons()
	if len(got) != len(want) {
		t.Fatalf("Reasons = %v, want %v", got, want)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("Reasons[%d] = %q, want %q (the JSON codes of docs/DESIGN.md)", i, got[i], want[i])
		}
	}
	got[0] = "changed"
	if Reasons()[0] != ReasonMissing {
		t.Error("Reasons shares its slice between callers")
	}
}

func TestErrorAs(t *testing.T) {
	v := NewVerifier(keys(curKey), window, newClock(base()).now, 10)
	err := fmt.Errorf("middleware: %w", v.Verify("", "POST", sweepPath, "", nil))
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonMissing {
		t.Fatalf("errors.As(%v) = %v, want *Error with %q", err, e, ReasonMissing)
	}
	if !strings.Contains(err.Error(), string(ReasonMissing)) {
		t.Errorf("Error() = %q, want it to name the reason", err.Error())
	}
	if got := (&Error{Reason: ReasonBad}).Error(); got != "signature refused: bad_signature" {
		t.Errorf("Error() without detail = %q", got)
	}
}
