package signing

import (
	"container/heap"
	"context"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// maxHeaderLen caps the header Verify is willing to parse. A real header with two v1 values is
// about 200 bytes; past 4 KiB it is garbage or an attempt to make us split and decode a lot.
const maxHeaderLen = 4096

// maxUnix is 9999-12-31T23:59:59Z. A larger t is no clock anyone runs, and time.Unix would
// overflow its internal representation near the int64 limit, so such a t is stale without
// arithmetic. It keeps a millisecond timestamp sent by mistake a stale_timestamp (which points at
// the clock), not a malformed_signature.
const maxUnix = 253402300799

// Verifier checks signatures against the current key and, during rotation, the previous one.
// It keeps the replay cache, so one Verifier must serve every request of the process.
type Verifier struct {
	keys   [][]byte
	maxAge time.Duration
	now    func() time.Time
	seen   *replayCache
	store  ReplayStore
}

// ReplayStore remembers accepted nonces beyond one process: the second line behind the in-memory
// cache, shared by every replica and kept across restarts (the API's is a table in PostgreSQL).
type ReplayStore interface {
	// Admit records nonce until expires and reports whether it was new; false means replayed.
	Admit(ctx context.Context, nonce uuid.UUID, expires time.Time) (bool, error)
}

// ErrReplayStore wraps the error of a replay store that did not answer: the request was
// refused unchecked, a failure of the server's, not the caller's.
var ErrReplayStore = errors.New("the replay store did not answer")

// WithStore returns v checking every nonce the in-memory cache admits against store too. A store
// that fails refuses the request (fail closed) with the store's error wrapped in ErrReplayStore,
// which is no *Error: the server's failure, not the caller's. With a
// store, a full cache refuses nothing: the store's unique key decides alone (see NewVerifier).
func (v *Verifier) WithStore(store ReplayStore) *Verifier {
	v.store = store
	return v
}

// NewVerifier returns a Verifier for keys in order current, previous (empty keys are ignored; the
// keys are copied), maxAge the replay window each way, now the clock (nil: time.Now). The cache
// holds at most cacheSize live nonces and never evicts one; when full, the store (WithStore)
// decides alone, and without a store the request is refused (ReasonReplayed): docs/SECURITY.md
// says why. With no usable key, Verify refuses everything with ReasonBad.
func NewVerifier(keys [][]byte, maxAge time.Duration, now func() time.Time, cacheSize int) *Verifier {
	var ks [][]byte
	for _, k := range keys {
		if len(k) > 0 {
			// A copy: a caller reusing its buffer must not change what we verify against.
			ks = append(ks, append([]byte(nil), k...))
		}
	}
	if now == nil {
		now = time.Now
	}
	return &Verifier{keys: ks, maxAge: maxAge, now: now, seen: newReplayCache(cacheSize)}
}

// Verify returns nil or *Error; it is safe for concurrent use. It checks, in order: missing →
// malformed (the grammar in docs/DESIGN.md, "Request signing (v1)") → stale (|now − t| > maxAge)
// → MAC (every v1 against every key) → replay, recorded only after the MAC passed, so a forged
// request can neither fill the cache nor burn a nonce. method, path and rawQuery are what the
// server saw: r.Method, r.URL.Path, r.URL.RawQuery.
func (v *Verifier) Verify(header, method, path, rawQuery string, body []byte) error {
	return v.VerifyContext(context.Background(), header, method, path, rawQuery, body)
}

// VerifyContext is Verify with the context that bounds the replay store's check.
func (v *Verifier) VerifyContext(ctx context.Context, header, method, path, rawQuery string, body []byte) error {
	p, now, err := v.checkHeader(header)
	if err != nil {
		return err
	}
	signedAt := time.Unix(p.t, 0)

	msg := message(p.ts, p.nonceText, method, path, rawQuery, body)
	matched := false
	for _, k := range v.keys {
		want := mac(k, msg)
		for _, s := range p.sigs {
			// No early exit: the work does not depend on which key or which v1 matched.
			if hmac.Equal(s, want) {
				matched = true
			}
		}
	}
	if !matched {
		return &Error{Reason: ReasonBad, Detail: fmt.Sprintf("no v1 of %d matches any of %d keys", len(p.sigs), len(v.keys))}
	}

	// The request can no longer pass after its window, so its nonce need not be remembered longer.
	expires := signedAt.Add(v.maxAge)
	switch v.seen.admit(p.nonce, expires, now) {
	case cacheReplayed:
		return &Error{Reason: ReasonReplayed, Detail: "nonce " + p.nonce.String() + " was already used within the window"}
	case cacheFull:
		if v.store == nil {
			return &Error{Reason: ReasonReplayed, Detail: fmt.Sprintf(
				"replay cache is full (%d live nonces) and there is no shared store; refusing rather than forgetting a nonce", v.seen.size)}
		}
		// Not remembered here: the store's unique key is the whole check for this nonce.
	}
	if v.store == nil {
		return nil
	}
	fresh, err := v.store.Admit(ctx, p.nonce, expires)
	switch {
	case err != nil:
		return fmt.Errorf("check nonce in the replay store: %w: %w", ErrReplayStore, err)
	case !fresh:
		return &Error{Reason: ReasonReplayed, Detail: "nonce " + p.nonce.String() + " was already used, by this or another replica"}
	}
	return nil
}

// CheckHeader runs the checks of Verify that need no body: no key configured, missing,
// malformed, stale. A server calls it before reading the body, so that a caller without a fresh,
// well-formed header cannot make it wait for one. It records nothing; Verify must still follow.
func (v *Verifier) CheckHeader(header string) error {
	_, _, err := v.checkHeader(header)
	return err
}

// checkHeader parses header and checks its timestamp against the window. It returns the clock
// reading it used, so that the window and the replay cache agree on one instant.
func (v *Verifier) checkHeader(header string) (parsedHeader, time.Time, error) {
	if len(v.keys) == 0 {
		return parsedHeader{}, time.Time{}, &Error{Reason: ReasonBad, Detail: "no verification key is configured"}
	}
	if strings.Trim(header, " \t") == "" {
		return parsedHeader{}, time.Time{}, &Error{Reason: ReasonMissing, Detail: "no " + Header + " header"}
	}
	p, err := parse(header)
	if err != nil {
		return parsedHeader{}, time.Time{}, err
	}
	now := v.now()
	if p.t > maxUnix {
		return parsedHeader{}, time.Time{}, &Error{Reason: ReasonStale, Detail: fmt.Sprintf(
			"timestamp %d is past the year 9999: milliseconds instead of seconds?", p.t)}
	}
	if skew := now.Sub(time.Unix(p.t, 0)); skew > v.maxAge || skew < -v.maxAge {
		// In whole seconds, which cannot overflow here (t ≤ maxUnix), where a Duration would
		// saturate past 292 years.
		return parsedHeader{}, time.Time{}, &Error{Reason: ReasonStale, Detail: fmt.Sprintf(
			"timestamp %d is %+ds from the server clock %d, the window is ±%s", p.t, p.t-now.Unix(), now.Unix(), v.maxAge)}
	}
	return p, now, nil
}

// parsedHeader is a parsed signature header.
type parsedHeader struct {
	ts        string // t as sent, which is what was signed
	t         int64
	nonceText string // n as sent, which is what was signed
	nonce     uuid.UUID
	sigs      [][]byte
}

// parse splits and validates a signature header; its error is always a *Error with
// ReasonMalformed.
func parse(s string) (parsedHeader, error) {
	var h parsedHeader
	if len(s) > maxHeaderLen {
		return h, malformed("header is %d bytes, over the %d byte limit", len(s), maxHeaderLen)
	}
	var haveT, haveN bool
	for _, el := range strings.Split(s, ",") {
		el = strings.Trim(el, " \t")
		key, val, ok := strings.Cut(el, "=")
		switch {
		case !ok:
			return h, malformed("element %q has no '='", truncate(el))
		case key == "":
			return h, malformed("element %q has an empty key", truncate(el))
		}
		switch key {
		case "t":
			if haveT {
				return h, malformed("t given twice")
			}
			haveT = true
			t, err := parseUnix(val)
			if err != nil {
				return h, malformed("t: %v", err)
			}
			h.ts, h.t = val, t
		case "n":
			if haveN {
				return h, malformed("n given twice")
			}
			haveN = true
			// uuid.Parse also takes urn:uuid:, {braces} and bare hex; one spelling is enough.
			if len(val) != 36 {
				return h, malformed("n %q is not a uuid", truncate(val))
			}
			id, err := uuid.Parse(val)
			if err != nil {
				return h, malformed("n %q is not a uuid: %v", truncate(val), err)
			}
			h.nonceText, h.nonce = val, id
		case scheme:
			sig, err := hex.DecodeString(val)
			if err != nil {
				return h, malformed("v1 is not hex: %v", err)
			}
			if len(sig) != 32 {
				return h, malformed("v1 is %d bytes, want 32", len(sig))
			}
			h.sigs = append(h.sigs, sig)
		default:
			// Another scheme, or a field of a later version: not ours to judge.
		}
	}
	switch {
	case !haveT:
		return h, malformed("no t")
	case !haveN:
		return h, malformed("no n")
	case len(h.sigs) == 0:
		return h, malformed("no v1")
	}
	return h, nil
}

// parseUnix parses canonical non-negative decimal seconds. The signer writes strconv.FormatInt;
// refusing signs, spaces and leading zeros keeps one spelling per instant.
func parseUnix(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not decimal digits", truncate(s))
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%q has a leading zero", truncate(s))
	}
	t, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", truncate(s), err)
	}
	return t, nil
}

func malformed(format string, args ...any) *Error {
	return &Error{Reason: ReasonMalformed, Detail: fmt.Sprintf(format, args...)}
}

// truncate keeps details short: they go to logs, and the header may be up to 4 KiB of junk.
func truncate(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}

// replayCache remembers accepted nonces until their requests' windows close. Memory is
// O(size): a set of live nonces plus a min-heap on expiry, pruned lazily on each admission, so
// it needs no goroutine and follows the injected clock.
type replayCache struct {
	mu    sync.Mutex
	size  int
	live  map[uuid.UUID]struct{}
	order expiryHeap
}

func newReplayCache(size int) *replayCache {
	// Grow on demand: most processes see a handful of requests a minute, far below size.
	return &replayCache{size: size, live: make(map[uuid.UUID]struct{}, min(max(size, 0), 1024))}
}

// cacheAnswer is what the replay cache says of a nonce.
type cacheAnswer int

const (
	cacheAdmitted cacheAnswer = iota // new, and now remembered
	cacheReplayed                    // live already: a replay
	cacheFull                        // not seen, but not remembered either: the cache is full
)

// admit records nonce, live until expires. A nonce already live is a replay; a new one finds the
// cache full when size nonces are live, and is then not recorded (see NewVerifier).
func (c *replayCache) admit(nonce uuid.UUID, expires, now time.Time) cacheAnswer {
	c.mu.Lock()
	defer c.mu.Unlock()
	// An entry is live while now ≤ expires, the same instant the request itself goes stale.
	for len(c.order) > 0 && now.After(c.order[0].expires) {
		delete(c.live, heap.Pop(&c.order).(entry).nonce)
	}
	if _, ok := c.live[nonce]; ok {
		return cacheReplayed
	}
	if len(c.live) >= c.size {
		return cacheFull
	}
	c.live[nonce] = struct{}{}
	heap.Push(&c.order, entry{nonce: nonce, expires: expires})
	return cacheAdmitted
}

// entry is one remembered nonce.
type entry struct {
	nonce   uuid.UUID
	expires time.Time
}

// expiryHeap is a min-heap on expires, for container/heap: its top is the next nonce to forget.
type expiryHeap []entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
