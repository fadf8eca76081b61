package signing

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzVerify feeds arbitrary headers and requests to Verify. It must never panic, must only ever
// return nil or a *Error with a known Reason, must never accept anything without a key, and must
// refuse a second use of whatever it accepted. As a round trip, what Sign produces for the same
// fuzzed request must verify exactly once.
//
//	go test -run='^$' -fuzz=FuzzVerify -fuzztime=20s ./internal/signing/
func FuzzVerify(f *testing.F) {
	good := goodRequest()
	valid := good.sign(keys(curKey), base(), testNonce)
	v1 := v1For(curKey)
	for _, h := range []string{
		valid,
		good.sign(keys(curKey, prevKey), base(), testNonce),
		good.sign(keys(prevKey), base(), testNonce),
		good.sign(keys(otherKey), base(), testNonce),
		"v2=abc," + valid + ",x=y",
		" t=1700000000 , n=" + testNonce + " , v1=" + v1,
		"",
		" ",
		",",
		"=",
		"garbage",
		"t=1700000000",
		"t=1700000000,n=" + testNonce,
		"t=1700000000,t=1700000000,n=" + testNonce + ",v1=" + v1,
		"t=1700000000,n=" + testNonce + ",n=" + testNonce + ",v1=" + v1,
		"t=-1,n=" + testNonce + ",v1=" + v1,
		"t=9223372036854775807,n=" + testNonce + ",v1=" + v1,
		"t=99999999999999999999,n=" + testNonce + ",v1=" + v1,
		"t=1700000000,n=not-a-uuid,v1=" + v1,
		"t=1700000000,n=" + testNonce + ",v1=" + v1[:63],
		"t=1700000000,n=" + testNonce + ",v1=" + strings.Repeat("zz", 32),
		pad(valid, maxHeaderLen),
		pad(valid, maxHeaderLen+1),
	} {
		f.Add(h, good.method, good.path, good.query, good.body)
	}
	f.Add(valid, "GET", "/internal/sweeps", "a=1&b=%20", []byte(nil))
	f.Add(valid, "POST", "/internal/sweep-x\nq", "", []byte("\x00\xff"))

	f.Fuzz(func(t *testing.T, header, method, path, rawQuery string, body []byte) {
		check := func(what string, err error) Reason {
			t.Helper()
			if err == nil {
				return ""
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%s: Verify = %v (%T), want nil or *Error", what, err, err)
			}
			if !slices.Contains(Reasons(), e.Reason) {
				t.Fatalf("%s: unknown reason %q", what, e.Reason)
			}
			return e.Reason
		}

		v := NewVerifier(keys(curKey, prevKey), window, newClock(base()).now, 8)
		if check("fuzzed header", v.Verify(header, method, path, rawQuery, body)) == "" {
			if r := check("fuzzed header again", v.Verify(header, method, path, rawQuery, body)); r != ReasonReplayed {
				t.Fatalf("accepted header %q verified again with reason %q, want %q", header, r, ReasonReplayed)
			}
		}

		none := NewVerifier(nil, window, newClock(base()).now, 8)
		if r := check("no keys", none.Verify(header, method, path, rawQuery, body)); r != ReasonBad {
			t.Fatalf("verifier without keys gave reason %q, want %q", r, ReasonBad)
		}

		signed := Sign(keys(prevKey), base(), testNonce, method, path, rawQuery, body)
		rt := NewVerifier(keys(curKey, prevKey), window, newClock(base()).now, 8)
		if r := check("round trip", rt.Verify(signed, method, path, rawQuery, body)); r != "" {
			t.Fatalf("Sign(%q %q %q) = %q, refused with %q", method, path, rawQuery, signed, r)
		}
		if r := check("round trip again", rt.Verify(signed, method, path, rawQuery, body)); r != ReasonReplayed {
			t.Fatalf("round trip replay gave reason %q, want %q", r, ReasonReplayed)
		}
	})
}
