package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// request is what a signature covers besides t and the nonce.
type request struct {
	method, path, query string
	body                []byte
}

func goodRequest() request {
	return request{method: "POST", path: sweepPath, query: "", body: []byte(testBody)}
}

func (r request) sign(ks [][]byte, at time.Time, nonce string) string {
	return Sign(ks, at, nonce, r.method, r.path, r.query, r.body)
}

func (r request) verify(v *Verifier, header string) error {
	return v.Verify(header, r.method, r.path, r.query, r.body)
}

// v1For is one v1 value over the good request at base time, computed without Sign, for headers
// built by hand.
func v1For(key string) string {
	return hex.EncodeToString(mac([]byte(key), message("1700000000", testNonce, "POST", sweepPath, "", []byte(testBody))))
}

func TestVerify(t *testing.T) {
	good := goodRequest()
	tampered := func(f func(*request)) request {
		r := goodRequest()
		f(&r)
		return r
	}
	tests := []struct {
		name      string
		verifyKey [][]byte // nil: current and previous
		header    string
		at        time.Duration // the server clock, relative to the signing time
		req       request       // zero: the good request
		want      Reason
	}{
		{name: "valid", header: good.sign(keys(curKey), base(), testNonce)},
		{name: "wrong key", header: good.sign(keys(otherKey), base(), testNonce), want: ReasonBad},
		{name: "previous key accepted during rotation", header: good.sign(keys(prevKey), base(), testNonce)},
		{name: "two v1, current and previous", header: good.sign(keys(curKey, prevKey), base(), testNonce)},
		{name: "two v1, previous and current", header: good.sign(keys(prevKey, curKey), base(), testNonce)},
		{name: "two v1, only the second matches", header: good.sign(keys(otherKey, curKey), base(), testNonce)},
		{name: "previous key alone configured", verifyKey: [][]byte{nil, []byte(prevKey)}, header: good.sign(keys(prevKey), base(), testNonce)},
		{name: "previous key after rotation ended", verifyKey: keys(curKey), header: good.sign(keys(prevKey), base(), testNonce), want: ReasonBad},
		{name: "key that is a prefix of the right one", header: good.sign(keys(curKey[:len(curKey)-1]), base(), testNonce), want: ReasonBad},

		{name: "body tampered", header: good.sign(keys(curKey), base(), testNonce),
			req: tampered(func(r *request) { r.body = []byte(`{"dryRun":false}`) }), want: ReasonBad},
		{name: "body dropped", header: good.sign(keys(curKey), base(), testNonce),
			req: tampered(func(r *request) { r.body = nil }), want: ReasonBad},
		{name: "path tampered", header: good.sign(keys(curKey), base(), testNonce),
			req: tampered(func(r *request) { r.path = "/internal/sweep-account-erasure" }), want: ReasonBad},
		{name: "query tampered", header: good.sign(keys(curKey), base(), testNonce),
			req: tampered(func(r *request) { r.query = "batchSize=50000" }), want: ReasonBad},
		{name: "method tampered", header: good.sign(keys(curKey), base(), testNonce),
			req: tampered(func(r *request) { r.method = "PUT" }), want: ReasonBad},
		{name: "method case is significant", header: good.sign(keys(curKey), base(), testNonce),
			req: tampered(func(r *request) { r.method = "post" }), want: ReasonBad},
		{name: "query moved into path", header: tampered(func(r *request) { r.query = "a=1" }).sign(keys(curKey), base(), testNonce),
			req: tampered(func(r *request) { r.path += "\na=1" }), want: ReasonBad},
		{name: "nonce swapped", header: strings.Replace(good.sign(keys(curKey), base(), testNonce), testNonce, uuid.NewString(), 1), want: ReasonBad},
		{name: "timestamp swapped", header: strings.Replace(good.sign(keys(curKey), base(), testNonce), "t=1700000000", "t=1700000001", 1), want: ReasonBad},
		{name: "v1 last digit changed", header: flipLast(good.sign(keys(curKey), base(), testNonce)), want: ReasonBad},

		{name: "exactly maxAge old accepted", header: good.sign(keys(curKey), base(), testNonce), at: window},
		{name: "exactly maxAge ahead accepted", header: good.sign(keys(curKey), base(), testNonce), at: -window},
		{name: "just past maxAge old is stale", header: good.sign(keys(curKey), base(), testNonce), at: window + time.Nanosecond, want: ReasonStale},
		{name: "just past maxAge ahead is stale", header: good.sign(keys(curKey), base(), testNonce), at: -window - time.Nanosecond, want: ReasonStale},
		{name: "an hour old is stale", header: good.sign(keys(curKey), base(), testNonce), at: time.Hour, want: ReasonStale},
		{name: "milliseconds sent as seconds is stale", header: strings.Replace(good.sign(keys(curKey), base(), testNonce), "t=1700000000", "t=1700000000000", 1), want: ReasonStale},
		{name: "t near the int64 limit is stale", header: strings.Replace(good.sign(keys(curKey), base(), testNonce), "t=1700000000", "t=9223372036854775807", 1), want: ReasonStale},
		{name: "t zero is stale", header: strings.Replace(good.sign(keys(curKey), base(), testNonce), "t=1700000000", "t=0", 1), want: ReasonStale},
		{name: "stale is checked before the MAC", header: good.sign(keys(otherKey), base(), testNonce), at: time.Hour, want: ReasonStale},
		{name: "malformed is checked before stale", header: good.sign(keys(curKey), base(), "x"), at: time.Hour, want: ReasonMalformed},

		{name: "unknown scheme ignored", header: "v2=not-even-hex," + good.sign(keys(curKey), base(), testNonce) + ",v0=abc,foo=bar=baz,x="},
		{name: "fields in any order", header: "v1=" + v1For(curKey) + ",n=" + testNonce + ",t=1700000000"},
		{name: "spaces around elements", header: " t=1700000000 ,\tn=" + testNonce + ", v1=" + v1For(curKey) + " "},
		{name: "uppercase hex", header: "t=1700000000,n=" + testNonce + ",v1=" + strings.ToUpper(v1For(curKey))},
		{name: "uppercase nonce as signed", header: good.sign(keys(curKey), base(), strings.ToUpper(testNonce))},
		{name: "same v1 twice", header: good.sign(keys(curKey, curKey), base(), testNonce)},
		{name: "only an unknown scheme", header: "t=1700000000,n=" + testNonce + ",v2=" + v1For(curKey), want: ReasonMalformed},
		{name: "header at the 4 KiB cap", header: pad(good.sign(keys(curKey), base(), testNonce), maxHeaderLen)},
		{name: "header one byte over the cap", header: pad(good.sign(keys(curKey), base(), testNonce), maxHeaderLen+1), want: ReasonMalformed},

		{name: "missing", header: "", want: ReasonMissing},
		{name: "blank", header: " \t ", want: ReasonMissing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ks := tc.verifyKey
			if ks == nil {
				ks = keys(curKey, prevKey)
			}
			req := tc.req
			if req.method == "" {
				req = good
			}
			v := NewVerifier(ks, window, newClock(base().Add(tc.at)).now, 100)
			// CheckHeader, which runs before the body is read, agrees with Verify on every
			// reason that needs no body, and passes what only the body can refuse.
			pre := tc.want
			if pre == ReasonBad {
				pre = ""
			}
			wantReason(t, v.CheckHeader(tc.header), pre)
			wantReason(t, req.verify(v, tc.header), tc.want)
		})
	}
}

// TestCheckHeaderRecordsNothing: the pre-body check neither burns a nonce nor needs a key that
// matches, so a header that passes it may still be refused, and a good one still passes Verify.
func TestCheckHeaderRecordsNothing(t *testing.T) {
	v := NewVerifier(keys(curKey), window, newClock(base()).now, 1)
	h := goodRequest().sign(keys(curKey), base(), testNonce)
	for range 3 {
		wantReason(t, v.CheckHeader(h), "")
	}
	wantReason(t, goodRequest().verify(v, h), "")
	wantReason(t, goodRequest().verify(v, h), ReasonReplayed)
	wantReason(t, NewVerifier(nil, window, newClock(base()).now, 1).CheckHeader(h), ReasonBad)
}

// flipLast changes the last hex digit of h, the end of its last v1.
func flipLast(h string) string {
	last := h[len(h)-1]
	repl := "0"
	if last == '0' {
		repl = "1"
	}
	return h[:len(h)-1] + repl
}

// TestVerifyStaleDetail checks that the detail of a stale timestamp tells an operator which
// way the clocks disagree and by how much.
func TestVerifyStaleDetail(t *testing.T) {
	tests := []struct {
		name   string
		t      string
		at     time.Duration
		detail string
	}{
		{"behind", "1700000000", time.Hour, "timestamp 1700000000 is -3600s from the server clock 1700003600, the window is ±1m0s"},
		{"ahead", "1700000000", -90 * time.Second, "timestamp 1700000000 is +90s from the server clock 1699999910"},
		{"milliseconds", "1700000000000", 0, "milliseconds instead of seconds?"},
		{"int64 max", "9223372036854775807", 0, "milliseconds instead of seconds?"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := strings.Replace(goodRequest().sign(keys(curKey), base(), testNonce), "t=1700000000", "t="+tc.t, 1)
			v := NewVerifier(keys(curKey), window, newClock(base().Add(tc.at)).now, 10)
			err := goodRequest().verify(v, h)
			wantReason(t, err, ReasonStale)
			if !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("Verify = %q, want it to contain %q", err, tc.detail)
			}
		})
	}
}

// pad grows a valid header to n bytes with an unknown element, which Verify would otherwise ignore.
func pad(h string, n int) string {
	const prefix = ",pad="
	return h + prefix + strings.Repeat("x", n-len(h)-len(prefix))
}

func TestVerifyMalformed(t *testing.T) {
	v1 := v1For(curKey)
	n := testNonce
	tests := []struct{ name, header string }{
		{"garbage", "garbage"},
		{"just a comma", ","},
		{"t only", "t=1700000000"},
		{"no t", "n=" + n + ",v1=" + v1},
		{"no n", "t=1700000000,v1=" + v1},
		{"no v1", "t=1700000000,n=" + n},
		{"uppercase keys are other keys", "T=1700000000,N=" + n + ",V1=" + v1},
		{"t empty", "t=,n=" + n + ",v1=" + v1},
		{"t not a number", "t=abc,n=" + n + ",v1=" + v1},
		{"t fractional", "t=1700000000.5,n=" + n + ",v1=" + v1},
		{"t negative", "t=-1700000000,n=" + n + ",v1=" + v1},
		{"t with plus sign", "t=+1700000000,n=" + n + ",v1=" + v1},
		{"t leading zero", "t=01700000000,n=" + n + ",v1=" + v1},
		{"t with inner space", "t= 1700000000,n=" + n + ",v1=" + v1},
		{"t hex", "t=0x6553f100,n=" + n + ",v1=" + v1},
		{"t past int64", "t=99999999999999999999,n=" + n + ",v1=" + v1},
		{"t twice, same value", "t=1700000000,t=1700000000,n=" + n + ",v1=" + v1},
		{"t twice, different values", "t=1700000000,n=" + n + ",v1=" + v1 + ",t=1700000001"},
		{"n twice, same value", "t=1700000000,n=" + n + ",n=" + n + ",v1=" + v1},
		{"n twice, different values", "t=1700000000,n=" + n + ",n=" + uuid.NewString() + ",v1=" + v1},
		{"n empty", "t=1700000000,n=,v1=" + v1},
		{"n not a uuid", "t=1700000000,n=abc,v1=" + v1},
		{"n a uuid without hyphens", "t=1700000000,n=" + strings.ReplaceAll(n, "-", "") + ",v1=" + v1},
		{"n a uuid in braces", "t=1700000000,n={" + n + "},v1=" + v1},
		{"n a uuid urn", "t=1700000000,n=urn:uuid:" + n + ",v1=" + v1},
		{"n a uuid with junk", "t=1700000000,n=" + n + "x,v1=" + v1},
		{"n with a bad hex digit", "t=1700000000,n=" + "g" + n[1:] + ",v1=" + v1},
		{"n with hyphens misplaced", "t=1700000000,n=0b6f5d2e6-c1a-4f8e-9a53-3c2d1e0f4a7b,v1=" + v1},
		{"v1 empty", "t=1700000000,n=" + n + ",v1="},
		{"v1 not hex", "t=1700000000,n=" + n + ",v1=" + strings.Repeat("z", 64)},
		{"v1 odd length", "t=1700000000,n=" + n + ",v1=" + v1[:63]},
		{"v1 short", "t=1700000000,n=" + n + ",v1=" + v1[:62]},
		{"v1 long", "t=1700000000,n=" + n + ",v1=" + v1 + "00"},
		// The next two decode to the right 32 bytes before the error: the hex error must count.
		{"v1 one extra digit", "t=1700000000,n=" + n + ",v1=" + v1 + "0"},
		{"v1 trailing junk", "t=1700000000,n=" + n + ",v1=" + v1 + "z"},
		{"v1 sha1 length", "t=1700000000,n=" + n + ",v1=" + v1[:40]},
		{"v1 base64", "t=1700000000,n=" + n + ",v1=cQZCCkLVxt14CqPHw+sEFhLOdtGohjI+oOFKgXxlIUc="},
		{"one good v1 and one broken", "t=1700000000,n=" + n + ",v1=" + v1 + ",v1=xyz"},
		{"element without =", "t=1700000000,n=" + n + ",v1=" + v1 + ",junk"},
		{"empty key", "t=1700000000,n=" + n + ",v1=" + v1 + ",=x"},
		{"empty element", "t=1700000000,,n=" + n + ",v1=" + v1},
		{"trailing comma", "t=1700000000,n=" + n + ",v1=" + v1 + ","},
		{"semicolons", "t=1700000000;n=" + n + ";v1=" + v1},
		{"way too long", "t=1700000000,n=" + n + ",v1=" + v1 + strings.Repeat(",v1="+v1, 100)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := NewVerifier(keys(curKey, prevKey), window, newClock(base()).now, 100)
			wantReason(t, goodRequest().verify(v, tc.header), ReasonMalformed)
		})
	}
}

func TestVerifyNoKeys(t *testing.T) {
	// A MAC under the empty key, made by hand since Sign refuses to make one.
	h := hmac.New(sha256.New, nil)
	h.Write(message("1700000000", testNonce, "POST", sweepPath, "", []byte(testBody)))
	emptyKeyHeader := "t=1700000000,n=" + testNonce + ",v1=" + hex.EncodeToString(h.Sum(nil))

	tests := []struct {
		name   string
		keys   [][]byte
		header string
	}{
		{"nil keys, good header", nil, goodRequest().sign(keys(curKey), base(), testNonce)},
		{"no keys, empty-key header", [][]byte{}, emptyKeyHeader},
		{"only empty keys, empty-key header", [][]byte{nil, {}}, emptyKeyHeader},
		{"only empty keys, missing header", [][]byte{nil, {}}, ""},
		{"only empty keys, garbage header", [][]byte{nil, {}}, "garbage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := NewVerifier(tc.keys, window, newClock(base()).now, 100)
			wantReason(t, goodRequest().verify(v, tc.header), ReasonBad)
		})
	}
	t.Run("an empty current key does not disable the previous one", func(t *testing.T) {
		v := NewVerifier([][]byte{{}, []byte(prevKey)}, window, newClock(base()).now, 100)
		wantReason(t, goodRequest().verify(v, emptyKeyHeader), ReasonBad)
		wantReason(t, goodRequest().verify(v, goodRequest().sign(keys(prevKey), base(), testNonce)), "")
	})
	t.Run("keys are copied", func(t *testing.T) {
		ks := keys(curKey)
		v := NewVerifier(ks, window, newClock(base()).now, 100)
		copy(ks[0], otherKey)
		wantReason(t, goodRequest().verify(v, goodRequest().sign(keys(curKey), base(), testNonce)), "")
	})
}

// step is one Verify call in a sequence against one Verifier.
type step struct {
	name   string
	at     time.Duration // server clock relative to base
	signAt time.Duration // t relative to base
	nonce  string
	key    string // default curKey
	want   Reason
}

func runSteps(t *testing.T, cacheSize int, steps []step) {
	t.Helper()
	clk := newClock(base())
	v := NewVerifier(keys(curKey, prevKey), window, clk.now, cacheSize)
	for i, s := range steps {
		clk.set(base().Add(s.at))
		key := s.key
		if key == "" {
			key = curKey
		}
		h := goodRequest().sign(keys(key), base().Add(s.signAt), s.nonce)
		err := goodRequest().verify(v, h)
		t.Run(fmt.Sprintf("%d %s", i, s.name), func(t *testing.T) { wantReason(t, err, s.want) })
	}
}

func TestVerifyReplay(t *testing.T) {
	const a, b = testNonce, "5e2b3c1d-0000-7000-8000-00000000000b"
	sec := time.Second
	tests := []struct {
		name  string
		steps []step
	}{
		{"same header twice", []step{
			{name: "first", nonce: a},
			{name: "again", at: sec, nonce: a, want: ReasonReplayed},
			{name: "other nonce", at: sec, nonce: b},
		}},
		{"nonce reused with a fresh t and the other key", []step{
			{name: "first", nonce: a},
			{name: "re-signed later", at: 30 * sec, signAt: 30 * sec, nonce: a, key: prevKey, want: ReasonReplayed},
		}},
		{"nonce reused in another spelling", []step{
			{name: "lowercase", nonce: a},
			{name: "uppercase", nonce: strings.ToUpper(a), want: ReasonReplayed},
		}},
		{"accepted again after its window", []step{
			{name: "first", nonce: a},
			{name: "at the last instant of the window", at: window, signAt: window, nonce: a, want: ReasonReplayed},
			{name: "just after the window", at: window + sec, signAt: window + sec, nonce: a},
			{name: "and recorded anew", at: window + sec, signAt: window + sec, nonce: a, want: ReasonReplayed},
		}},
		{"a future-dated nonce is kept until its own window ends", []step{
			{name: "signed maxAge ahead", signAt: window, nonce: a},
			{name: "replayed late in its window", at: 2 * window, signAt: window, nonce: a, want: ReasonReplayed},
			{name: "re-signed just after", at: 2*window + sec, signAt: 2*window + sec, nonce: a},
		}},
		{"forged nonce does not poison the cache", []step{
			{name: "forged", nonce: a, key: otherKey, want: ReasonBad},
			{name: "genuine", nonce: a},
		}},
		{"stale nonce does not poison the cache", []step{
			{name: "stale", at: 2 * window, nonce: a, want: ReasonStale},
			{name: "genuine", at: 2 * window, signAt: 2 * window, nonce: a},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, 100, tc.steps) })
	}
}

func TestVerifyCacheFull(t *testing.T) {
	n := func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
	sec := time.Second
	t.Run("fails closed, drains with time", func(t *testing.T) {
		runSteps(t, 2, []step{
			{name: "first", nonce: n(1)},
			{name: "second", at: 10 * sec, signAt: 10 * sec, nonce: n(2)},
			{name: "third refused while both live", at: 20 * sec, signAt: 20 * sec, nonce: n(3), want: ReasonReplayed},
			{name: "first still refused: nothing was evicted", at: 20 * sec, nonce: n(1), want: ReasonReplayed},
			{name: "forged requests are not recorded either", at: 20 * sec, signAt: 20 * sec, nonce: n(4), key: otherKey, want: ReasonBad},
			{name: "third accepted once the first expired", at: window + sec, signAt: window + sec, nonce: n(3)},
			{name: "full again", at: window + sec, signAt: window + sec, nonce: n(5), want: ReasonReplayed},
			{name: "second expires in turn", at: window + 11*sec, signAt: window + 11*sec, nonce: n(5)},
		})
	})
	t.Run("forged requests never fill it", func(t *testing.T) {
		var steps []step
		for i := range 5 {
			steps = append(steps, step{name: "forged", nonce: n(i), key: otherKey, want: ReasonBad})
		}
		steps = append(steps, step{name: "genuine", nonce: n(9)})
		runSteps(t, 1, steps)
	})
	t.Run("a size below one refuses everything", func(t *testing.T) {
		runSteps(t, 0, []step{{name: "any", nonce: n(1), want: ReasonReplayed}})
	})
	t.Run("expiries out of insertion order", func(t *testing.T) {
		// Entries expire by their own t, not by arrival: the heap must find the earliest.
		runSteps(t, 3, []step{
			{name: "late", signAt: 50 * sec, nonce: n(1)},
			{name: "early", signAt: -50 * sec, nonce: n(2)},
			{name: "middle", nonce: n(3)},
			{name: "full", nonce: n(4), want: ReasonReplayed},
			{name: "early expired", at: 11 * sec, signAt: 11 * sec, nonce: n(4)},
			{name: "full again", at: 11 * sec, signAt: 11 * sec, nonce: n(5), want: ReasonReplayed},
			{name: "middle expired", at: window + sec, signAt: window + sec, nonce: n(5)},
			{name: "late still refused", at: window + sec, signAt: window + sec, nonce: n(1), want: ReasonReplayed},
		})
	})
}

// TestVerifyConcurrent runs many goroutines over shared and private nonces at once: each nonce
// must be accepted exactly once. Run with -race.
func TestVerifyConcurrent(t *testing.T) {
	const (
		workers = 32
		shared  = 64
		private = 16
	)
	clk := newClock(base())
	v := NewVerifier(keys(curKey, prevKey), window, clk.now, workers*private+shared)
	req := goodRequest()

	sharedHeaders := make([]string, shared)
	for i := range sharedHeaders {
		sharedHeaders[i] = req.sign(keys(curKey), base(), uuid.NewString())
	}
	var accepted [shared]atomic.Int32
	var privateAccepted, unexpected atomic.Int32

	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range shared {
				j := (i + w*7) % shared // each worker in its own order
				err := req.verify(v, sharedHeaders[j])
				if err == nil {
					accepted[j].Add(1)
				} else if e, ok := err.(*Error); !ok || e.Reason != ReasonReplayed {
					unexpected.Add(1)
				}
				if i%(shared/private) == 0 {
					key := curKey
					if w%2 == 1 {
						key = prevKey
					}
					if err := req.verify(v, req.sign(keys(key), base(), uuid.NewString())); err == nil {
						privateAccepted.Add(1)
					} else {
						unexpected.Add(1)
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()

	for i := range accepted {
		if got := accepted[i].Load(); got != 1 {
			t.Errorf("shared nonce %d accepted %d times, want exactly 1", i, got)
		}
	}
	if got := privateAccepted.Load(); got != workers*private {
		t.Errorf("private nonces accepted %d, want %d", got, workers*private)
	}
	if got := unexpected.Load(); got != 0 {
		t.Errorf("%d unexpected errors", got)
	}
}
