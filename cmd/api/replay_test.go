package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/signing"
)

// TestReplayAcrossReplicas sends one captured signed request to two API processes on one
// database, and again after a restart: only the first answer is a run; every other is replayed.
func TestReplayAcrossReplicas(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t)
	env := func() map[string]string {
		return map[string]string{"DATABASE_URL": u, "INTERNAL_SIGNING_KEY": serveKey}
	}
	a, b := startServe(t, env()), startServe(t, env())
	body := `{"dryRun": true}`
	captured := signedRequest(t, http.MethodPost, a.url+"/internal/sweep-notifications", body)
	send := func(base string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/internal/sweep-notifications", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = captured.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	if status, out := send(a.url); status != http.StatusOK {
		t.Fatalf("first: %d %s", status, out)
	}
	if status, out := send(b.url); status != http.StatusUnauthorized || !strings.Contains(out, string(signing.ReasonReplayed)) {
		t.Fatalf("to the other replica: %d %s, want 401 replayed", status, out)
	}
	if err := a.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	restarted := startServe(t, env())
	if status, out := send(restarted.url); status != http.StatusUnauthorized || !strings.Contains(out, string(signing.ReasonReplayed)) {
		t.Fatalf("after a restart: %d %s, want 401 replayed", status, out)
	}
}
