// Package signing is request signing v1 (docs/DESIGN.md, "Request signing (v1)") for both ends,
// Sign and SignRequest for clients, a Verifier for the API, so the format cannot drift:
//
//	X-Sweep-Signature: t=<unix seconds>,n=<uuid nonce>,v1=<hex>[,v1=<hex>…]
//
// where each v1 is the lowercase hex HMAC-SHA256, under one key, of these fields joined by "\n":
//
//	v1
//	<t>
//	<nonce>
//	<METHOD>
//	<path>        (URL path, no query)
//	<raw query>   (empty when none)
//	<hex sha256 of the raw body>
//
// Only the path can hold a newline (a decoded %0A); every other field cannot, so the message
// still splits one way only.
package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Header is the request header carrying the signature.
const Header = "X-Sweep-Signature"

// scheme is the version tag: the first line of the signed message and the header key of each MAC.
// Unknown schemes in the header are ignored, so a v2 can be rolled out next to v1.
const scheme = "v1"

// Reason names why a signature was refused; its string is the JSON error code of the 401.
type Reason string

// The reasons of docs/DESIGN.md, in the order Verify checks them.
const (
	// ReasonMissing: no signature header, or an empty one.
	ReasonMissing Reason = "missing_signature"
	// ReasonMalformed: the header does not parse (see Verifier.Verify for the rules).
	ReasonMalformed Reason = "malformed_signature"
	// ReasonStale: the timestamp is further than the window from the server clock, either way.
	ReasonStale Reason = "stale_timestamp"
	// ReasonBad: no v1 matches any configured key, or no key is configured.
	ReasonBad Reason = "bad_signature"
	// ReasonReplayed: the nonce was already accepted within its window, or the replay cache is
	// full and the verifier fails closed.
	ReasonReplayed Reason = "replayed"
)

// Reasons returns every Reason, for metrics baselines. It returns a fresh slice each call, so a
// caller may keep or change it.
func Reasons() []Reason {
	return []Reason{ReasonMissing, ReasonMalformed, ReasonStale, ReasonBad, ReasonReplayed}
}

// Error is the error Verify returns; callers read Reason with errors.As. Detail is for logs: it
// says what exactly was wrong (never any MAC or key material) and is not meant for the client.
type Error struct {
	Reason Reason
	Detail string
}

// Error returns the reason and, when set, the detail.
func (e *Error) Error() string {
	if e.Detail == "" {
		return "signature refused: " + string(e.Reason)
	}
	return "signature refused: " + string(e.Reason) + ": " + e.Detail
}

// Sign returns the header value "t=<unix>,n=<nonce>,v1=<hex>[,v1=<hex>…]" with one v1 per key, in
// the order given, over the v1 message of docs/DESIGN.md. t is truncated to whole seconds. The method is
// signed as given (not upper-cased): pass exactly what goes on the wire, since the verifier sees
// that. Empty keys are skipped, because a MAC under an empty key is one anybody can forge and the
// verifier ignores empty keys too.
func Sign(keys [][]byte, t time.Time, nonce, method, path, rawQuery string, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	msg := message(ts, nonce, method, path, rawQuery, body)
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(ts)
	b.WriteString(",n=")
	b.WriteString(nonce)
	for _, k := range keys {
		if len(k) == 0 {
			continue
		}
		b.WriteString("," + scheme + "=")
		b.WriteString(hex.EncodeToString(mac(k, msg)))
	}
	return b.String()
}

// NewNonce returns a fresh nonce (a random uuid string, version 4): 122 random bits, so two
// clients never collide within a replay window.
func NewNonce() string {
	return uuid.NewString()
}

// SignRequest sets Header on req for body with key at now and a fresh nonce (req.URL.Path and
// req.URL.RawQuery are what is signed). For clients such as the cron client. An empty req.Method
// is signed as GET, since that is what net/http sends for it.
func SignRequest(req *http.Request, body []byte, key []byte, now time.Time) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	req.Header.Set(Header, Sign([][]byte{key}, now, NewNonce(), method, req.URL.Path, req.URL.RawQuery, body))
}

// message builds the v1 signed message. ts is the timestamp exactly as it appears in the header.
func message(ts, nonce, method, path, rawQuery string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte(strings.Join([]string{
		scheme,
		ts,
		nonce,
		method,
		path,
		rawQuery,
		hex.EncodeToString(sum[:]),
	}, "\n"))
}

// mac is HMAC-SHA256 of msg under key.
func mac(key, msg []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return h.Sum(nil)
}
