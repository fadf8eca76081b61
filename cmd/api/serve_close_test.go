package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbtest"
)

// TestServeClosesWhatItOpens: whichever way serve returns, it has closed every pool it opened
// (the sweeps', the probe's, the status page's): no session of it is left on the database.
func TestServeClosesWhatItOpens(t *testing.T) {
	t.Parallel()
	t.Run("clean shutdown after every pool served a request", func(t *testing.T) {
		t.Parallel()
		u := dbtest.URL(t)
		s := startServe(t, map[string]string{"DATABASE_URL": u, "STATUS_ADDR": "127.0.0.1:0"})
		var statusURL string
		select {
		case line := <-s.stdout:
			var ok bool
			if statusURL, ok = strings.CutPrefix(line, "status page on "); !ok {
				t.Fatalf("second line of stdout is %q, want status page on <url>", line)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no status page line within 10s")
		}
		for _, url := range []string{s.url + "/readyz", statusURL} {
			if status, body := get(t, url); status != http.StatusOK {
				t.Fatalf("GET %s: HTTP %d %s", url, status, body)
			}
		}
		do(t, signedRequest(t, http.MethodPost, s.url+"/internal/sweep-notifications?dryRun=true", ""))
		if sessions(t, u) == 0 {
			t.Fatal("serve holds no session while serving: the check below would prove nothing")
		}
		if err := s.stop(t, 10*time.Second); err != nil {
			t.Fatalf("serve: %v", err)
		}
		waitNoSessions(t, u)
	})
	t.Run("boot refused after the pools opened", func(t *testing.T) {
		t.Parallel()
		u := dbtest.URL(t)
		file := filepath.Join(t.TempDir(), "sweeps.yaml")
		yaml := "sweeps:\n  - name: s\n    passes:\n      - name: p\n        table: nope\n        age_column: created_at\n        retention: 1d\n"
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var stdout, stderr syncBuffer
		err := serve(ctx, nil, map[string]string{"DATABASE_URL": u, "LISTEN_ADDR": "127.0.0.1:0", "SWEEP_POLICY_FILE": file}, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "refused against the database") {
			t.Fatalf("serve: %v, want the policy refused against the database", err)
		}
		waitNoSessions(t, u)
	})
}

// sessions counts the client sessions on u's database other than its own.
func sessions(t *testing.T, u string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitNoSessions waits, within 10 s, until the server has ended every other session on u's
// database: a closed connection's backend leaves pg_stat_activity a moment after the client.
func waitNoSessions(t *testing.T, u string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n := sessions(t, u); n > 0; n = sessions(t, u) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still open 10s after serve returned: a pool was left open", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
