package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
)

// TestServeLogLevel: LOG_LEVEL reaches serve's logger; debug adds a line per batch, the default
// (info) does not, and a malformed level refuses the boot naming its value.
func TestServeLogLevel(t *testing.T) {
	t.Run("malformed refuses the boot", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var stdout, stderr syncBuffer
		err := serve(ctx, nil, map[string]string{
			"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", "LISTEN_ADDR": "127.0.0.1:0", "LOG_LEVEL": "verbose",
		}, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "LOG_LEVEL=verbose") {
			t.Fatalf("serve returned %v, want a refusal naming LOG_LEVEL=verbose", err)
		}
	})

	for _, tc := range []struct {
		name  string
		level string
		want  bool
	}{{"debug logs each batch", "debug", true}, {"default does not", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"DATABASE_URL": dbtest.URL(t), "INTERNAL_SIGNING_KEY": serveKey}
			if tc.level != "" {
				env["LOG_LEVEL"] = tc.level
			}
			s := startServe(t, env)
			status, body := do(t, signedRequest(t, http.MethodPost, s.url+"/internal/sweep-notifications", "{}"))
			if status != http.StatusOK {
				t.Fatalf("HTTP %d: %s", status, body)
			}
			if err := s.stop(t, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			// An empty table still runs one (short) batch.
			if got := strings.Contains(s.logs.String(), `"msg":"sweep batch"`); got != tc.want {
				t.Errorf("batch line logged: %v, want %v:\n%s", got, tc.want, s.logs)
			}
		})
	}
}
