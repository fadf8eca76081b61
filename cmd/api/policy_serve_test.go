package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/signing"
)

// TestServePolicyFile: a user's own table and a policy file written here, the real serve started
// with it, its route swept through a signed request: exactly the eligible rows are gone.
func TestServePolicyFile(t *testing.T) {
	u := dbtest.URL(t)
	pool, err := dbpool.NewPool(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE user_sessions (id bigserial PRIMARY KEY, user_id bigint NOT NULL, kind text NOT NULL, expires_at timestamptz NOT NULL)`,
		`CREATE INDEX user_sessions_expires_at ON user_sessions (expires_at) WHERE kind = 'web'`,
		// Eligible: web sessions expired more than 14 days ago. Kept: fresher ones, and api
		// sessions however old (the where condition).
		`INSERT INTO user_sessions (user_id, kind, expires_at)
		 SELECT i, 'web', now() - interval '20 days' FROM generate_series(1, 40) i`,
		`INSERT INTO user_sessions (user_id, kind, expires_at)
		 SELECT i, 'web', now() - interval '10 days' FROM generate_series(1, 7) i`,
		`INSERT INTO user_sessions (user_id, kind, expires_at)
		 SELECT i, 'api', now() - interval '90 days' FROM generate_series(1, 5) i`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	policy := filepath.Join(t.TempDir(), "sweeps.yaml")
	if err := os.WriteFile(policy, []byte(`sweeps:
  - name: sessions
    passes:
      - name: expired-web
        table: user_sessions
        age_column: expires_at
        retention: 14d
        where: "kind = 'web'"
`), 0o600); err != nil {
		t.Fatal(err)
	}

	s := startServe(t, map[string]string{"DATABASE_URL": u, "INTERNAL_SIGNING_KEY": serveKey, "SWEEP_POLICY_FILE": policy})
	body := []byte(`{}`)
	req, err := http.NewRequest(http.MethodPost, s.url+"/internal/sweep-sessions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	signing.SignRequest(req, body, []byte(serveKey), time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Sweep      string `json:"sweep"`
		Deleted    int64  `json:"deleted"`
		StopReason string `json:"stopReason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, decode %v", resp.StatusCode, err)
	}
	if answer.Sweep != "sessions" || answer.Deleted != 40 || answer.StopReason != "exhausted" {
		t.Fatalf("answer = %+v, want 40 deleted, exhausted", answer)
	}
	var web, fresh, api int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = 'web' AND expires_at < now() - interval '14 days'),
		count(*) FILTER (WHERE kind = 'web' AND expires_at >= now() - interval '14 days'),
		count(*) FILTER (WHERE kind = 'api') FROM user_sessions`).Scan(&web, &fresh, &api); err != nil {
		t.Fatal(err)
	}
	if web != 0 || fresh != 7 || api != 5 {
		t.Fatalf("left %d eligible, %d fresh web, %d api sessions; want 0, 7, 5", web, fresh, api)
	}

	// The bundled routes are not served: the policy file replaces the catalog.
	req, _ = http.NewRequest(http.MethodPost, s.url+"/internal/sweep-notifications", bytes.NewReader(body))
	signing.SignRequest(req, body, []byte(serveKey), time.Now())
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusNotFound {
		t.Fatalf("bundled route under a user policy: status %d, want 404", resp2.StatusCode)
	}
}

// TestServeRefusesBadPolicy: a policy the live schema contradicts keeps the API from starting.
func TestServeRefusesBadPolicy(t *testing.T) {
	u := dbtest.URL(t)
	cases := []struct{ name, yaml, mention string }{
		{"unknown table", "sweeps:\n  - name: s\n    passes:\n      - name: p\n        table: nope\n        age_column: created_at\n        retention: 1d\n",
			`sweeps.yaml:5`},
		{"unindexed pass", "sweeps:\n  - name: s\n    passes:\n      - name: p\n        table: notifications\n        age_column: created_at\n        retention: 1d\n",
			`CREATE INDEX CONCURRENTLY`},
		{"malformed YAML", "sweeps:\n  - name: s\n    passes: [\n", `sweeps.yaml:`},
		{"retention below the floor", "sweeps:\n  - name: s\n    passes:\n      - name: p\n        table: notifications\n        age_column: read_at\n        retention: 5m\n",
			`below the floor`},
		{"condition that ends the statement", "sweeps:\n  - name: s\n    passes:\n      - name: p\n        table: notifications\n        age_column: read_at\n        retention: 1d\n        where: \"true; DROP TABLE accounts\"\n",
			`sweeps.yaml:8`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			policy := filepath.Join(t.TempDir(), "sweeps.yaml")
			if err := os.WriteFile(policy, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var stdout, stderr syncBuffer
			err := serve(ctx, nil, map[string]string{"DATABASE_URL": u, "LISTEN_ADDR": "127.0.0.1:0", "SWEEP_POLICY_FILE": policy}, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("err = %v, want one naming %q", err, tc.mention)
			}
			if strings.Contains(stdout.String(), "listening") {
				t.Fatal("serve listened with a refused policy")
			}
		})
	}
}
