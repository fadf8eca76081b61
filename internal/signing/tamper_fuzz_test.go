package signing

import (
	"bytes"
	"testing"
)

// FuzzVerifyTampered signs any request with the current key, then changes one of the fields the
// signature covers (method, path, raw query or body) to anything at all. Unchanged, it verifies
// once; changed, it must be refused as bad_signature. A signed message is a fixed prefix, the one
// field, and a fixed suffix, so a changed field is always a changed message: there is no input for
// which tampering may pass, and any that does is a field the MAC forgot.
//
//	go test -run='^$' -fuzz=FuzzVerifyTampered -fuzztime=20s ./internal/signing/
func FuzzVerifyTampered(f *testing.F) {
	good := goodRequest()
	for i, change := range []string{"GET", "/internal/sweep-refresh-tokens", "batchSize=50000", `{"dryRun":false}`, "", sweepPath + "\n", "POST\n"} {
		f.Add(good.method, good.path, good.query, good.body, uint8(i), change)
	}
	f.Add("GET", "/internal/sweeps", "a=1&b=2", []byte(nil), uint8(2), "b=2&a=1")
	f.Add("POST", "/internal/sweep-x", "", []byte("{}"), uint8(3), "{} ")

	f.Fuzz(func(t *testing.T, method, path, query string, body []byte, which uint8, change string) {
		header := Sign(keys(curKey), base(), testNonce, method, path, query, body)
		sent := request{method: method, path: path, query: query, body: body}
		switch which % 4 {
		case 0:
			sent.method = change
		case 1:
			sent.path = change
		case 2:
			sent.query = change
		case 3:
			sent.body = []byte(change)
		}
		unchanged := sent.method == method && sent.path == path && sent.query == query && bytes.Equal(sent.body, body)

		v := NewVerifier(keys(curKey, prevKey), window, newClock(base()).now, 8)
		err := sent.verify(v, header)
		if unchanged {
			if err != nil {
				t.Fatalf("an untouched request was refused: %v", err)
			}
			return
		}
		if err == nil {
			t.Fatalf("field %d changed to %q after signing, and the signature still verified", which%4, change)
		}
		wantReason(t, err, ReasonBad)
	})
}
