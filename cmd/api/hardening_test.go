package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/demo"
)

// withParam returns the URL u with one more query parameter.
func withParam(t *testing.T, u, key, value string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Set(key, value)
	p.RawQuery = q.Encode()
	return p.String()
}

// demoRows counts the rows of every table seed-demo writes.
func demoRows(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var total int64
	for _, table := range demo.Tables() {
		total += count(t, pool, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize())
	}
	return total
}

// TestSeedDemoRefuses: seed-demo must never plant fake but real-looking rows in a populated
// production database. It refuses APP_ENV=production outright, whatever the flags, and a
// database where any table it writes holds rows unless --force.
func TestSeedDemoRefuses(t *testing.T) {
	ctx := context.Background()
	// populate puts one row in one table seed-demo writes, never in accounts: --if-empty must
	// look at every table, not at accounts alone.
	populate := func(t *testing.T, pool *pgxpool.Pool) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
VALUES ('order', 'o-1', 'order.paid', '{}')`); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name      string
		appEnv    string
		populated bool
		args      []string
		// refused names a part of the error; "" means success.
		refused string
		// seeds: rows are added.
		seeds bool
	}{
		{name: "production, empty database", appEnv: "production", refused: "APP_ENV=production"},
		{name: "production, --force", appEnv: "production", args: []string{"--force"}, refused: "--force does not override this"},
		{name: "production in another case", appEnv: " Production", args: []string{"--force"}, refused: "APP_ENV= Production"},
		{name: "production, populated, --if-empty", appEnv: "production", populated: true, args: []string{"--if-empty"}, refused: "APP_ENV=production"},
		{name: "populated", populated: true, refused: "outbox_events hold rows already"},
		{name: "populated, --if-empty: nothing, and success", populated: true, args: []string{"--if-empty"}},
		{name: "populated, --force", populated: true, args: []string{"--force"}, seeds: true},
		{name: "--force with --if-empty", args: []string{"--force", "--if-empty"}, refused: "contradict"},
		{name: "empty database", seeds: true},
		{name: "development in another case, empty database", appEnv: "Development", seeds: true},
		{name: "an APP_ENV that is neither", appEnv: "prod", refused: `APP_ENV="prod" is neither development nor production`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := dbtest.URL(t)
			pool, err := dbpool.NewPool(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			if tc.populated {
				populate(t, pool)
			}
			before := demoRows(t, pool)
			env := map[string]string{"DATABASE_URL": u}
			if tc.appEnv != "" {
				env["APP_ENV"] = tc.appEnv
			}
			var out bytes.Buffer
			err = run(ctx, append([]string{"api", "seed-demo", "--rows", "200"}, tc.args...), env, &out, &out)
			switch {
			case tc.refused != "" && err == nil:
				t.Fatalf("seed-demo succeeded, want it refused naming %q:\n%s", tc.refused, out.String())
			case tc.refused != "" && !strings.Contains(err.Error(), tc.refused):
				t.Errorf("error %q does not name %q", err, tc.refused)
			case tc.refused == "" && err != nil:
				t.Fatalf("seed-demo: %v\n%s", err, out.String())
			}
			after := demoRows(t, pool)
			if tc.seeds && after <= before {
				t.Errorf("seed-demo added no rows (%d before, %d after)", before, after)
			}
			if !tc.seeds && after != before {
				t.Errorf("seed-demo added %d rows", after-before)
			}
		})
	}
}

// Connection strings whose password pgx's own masking leaks, in whole or in part, when it quotes
// them in a parse error, and ones that parse but cannot connect.
var secretDSNs = []struct {
	dsn    string
	secret []string
}{
	{`host=127.0.0.1 port=abc user=app password = S3cretPW dbname=app`, []string{"S3cretPW"}},
	{`host=127.0.0.1 port=abc user=app password=S3cret\ PWtail dbname=app`, []string{"S3cret", "PWtail"}},
	{`host=127.0.0.1 port=abc user=app password='it\'s S3cret PWtail' dbname=app`, []string{"S3cret", "PWtail"}},
	{`host=127.0.0.1 port=abc user=app PASSWORD=S3cretPW dbname=app`, []string{"S3cretPW"}},
	{`postgres://app:S3c@retPW@127.0.0.1:abc/app?port=abc`, []string{"retPW"}},
	{`postgres://app:S3cretPW@127.0.0.1:abc/app`, []string{"S3cretPW"}},
	{`host=127.0.0.1 port=1 user=app password='a b S3cret' dbname=app connect_timeout=2`, []string{"a b S3cret", "S3cret"}},
	{`postgres://app:S3cretPW@127.0.0.1:1/app?connect_timeout=2`, []string{"S3cretPW"}},
}

// TestDSNRedacted: no subcommand prints DATABASE_URL's password, in its error, its output or its
// log, whatever form the password is written in.
func TestDSNRedacted(t *testing.T) {
	commands := [][]string{{"serve"}, {"migrate", "up"}, {"migrate", "status"}, {"seed-demo", "--rows", "200"}, {"policy", "check"}}
	for _, d := range secretDSNs {
		for _, cmd := range commands {
			t.Run(strings.Join(cmd, " ")+" "+d.dsn, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				env := map[string]string{"DATABASE_URL": d.dsn, "LISTEN_ADDR": "127.0.0.1:0", "INTERNAL_SIGNING_KEY": serveKey}
				var stdout, stderr syncBuffer
				err := run(ctx, append([]string{"api"}, cmd...), env, &stdout, &stderr)
				if err == nil {
					t.Fatal("succeeded against a database it cannot reach")
				}
				for _, s := range d.secret {
					for what, text := range map[string]string{"error": err.Error(), "stdout": stdout.String(), "log": stderr.String()} {
						if strings.Contains(text, s) {
							t.Errorf("the %s shows %q:\n%s", what, s, text)
						}
					}
				}
			})
		}
	}
}

// holdDryRuns starts n signed dry runs of notifications against s and returns once each is
// blocked on an ACCESS EXCLUSIVE lock the test holds on notifications, seen in pg_blocking_pids.
// Calling the returned func releases the lock and waits for their answers.
func holdDryRuns(t *testing.T, s *served, pool *pgxpool.Pool, n int) (release func() []int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE notifications IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := signedRequest(t, http.MethodPost, s.url+"/internal/sweep-notifications", `{"dryRun": true}`)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	released := false
	release = func() []int {
		if !released {
			released = true
			_ = tx.Rollback(ctx)
			conn.Release()
			wg.Wait()
		}
		return statuses
	}
	t.Cleanup(func() { release() })
	deadline := time.Now().Add(30 * time.Second)
	for count(t, pool, fmt.Sprintf(`SELECT count(*) FROM pg_stat_activity WHERE %d = ANY (pg_blocking_pids(pid))`, pid)) != int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d dry runs never all blocked on the lock", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return release
}

// TestReadyzWhileDryRunsHoldThePool: dry runs holding every connection of the
// sweeps' pool (pool_max_conns=2, MAX_CONCURRENT_DRY_RUNS=2) neither let a third in (429, at
// once: its replay check runs on the probe's pool) nor reach /readyz, which answers from that
// pool: a 503 database_unreachable there would make Kubernetes pull a healthy pod.
func TestReadyzWhileDryRunsHoldThePool(t *testing.T) {
	u := dbtest.URL(t)
	pool := seedNotifications(t, u, 10)
	s := startServe(t, map[string]string{
		"DATABASE_URL":            withParam(t, u, "pool_max_conns", "2"),
		"INTERNAL_SIGNING_KEY":    serveKey,
		"MAX_CONCURRENT_DRY_RUNS": "2",
		"COUNT_TIMEOUT":           "60s", // the held counts must outlast the test
	})
	release := holdDryRuns(t, s, pool, 2)

	// The answer is due at once, not when a held count gives its connection back (COUNT_TIMEOUT,
	// 60s): the third request's replay check must not queue for the pool they hold.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req := signedRequest(t, http.MethodPost, s.url+"/internal/sweep-notifications", `{"dryRun": true}`)
	status, body := do(t, req.WithContext(ctx))
	if status != http.StatusTooManyRequests || !strings.Contains(string(body), `"error":"busy"`) {
		t.Errorf("a third dry run: HTTP %d %s, want 429 busy", status, body)
	}
	for i := range 5 {
		if status, body := get(t, s.url+"/readyz"); status != http.StatusOK {
			t.Fatalf("/readyz poll %d while the dry runs hold the pool: HTTP %d %s, want 200", i, status, body)
		}
	}
	for i, st := range release() {
		if st != http.StatusOK {
			t.Errorf("held dry run %d: HTTP %d, want 200", i, st)
		}
	}
}

// TestServeResetsSessions (by another route than a policy condition): a trigger
// on a swept table sets default_transaction_read_only for the session; with one pooled
// connection, every later sweep would run on that session and fail 25006. Each connection is
// reset on release, so the next sweep runs.
func TestServeResetsSessions(t *testing.T) {
	ctx := context.Background()
	u := dbtest.URL(t)
	pool := seedNotifications(t, u, 5)
	if _, err := pool.Exec(ctx, `
CREATE FUNCTION leave_read_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM set_config('default_transaction_read_only', 'on', false); RETURN NULL; END $$;
CREATE TRIGGER leave_read_only AFTER DELETE ON notifications FOR EACH STATEMENT EXECUTE FUNCTION leave_read_only();`); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, map[string]string{
		"DATABASE_URL":         withParam(t, u, "pool_max_conns", "1"),
		"INTERNAL_SIGNING_KEY": serveKey,
	})
	for _, sweep := range []string{"notifications", "refresh-tokens", "notifications"} {
		status, body := do(t, signedRequest(t, http.MethodPost, s.url+"/internal/sweep-"+sweep, `{}`))
		if status != http.StatusOK || !strings.Contains(string(body), `"stopReason":"exhausted"`) {
			t.Fatalf("sweep %s after the trigger ran: HTTP %d %s, want 200 exhausted", sweep, status, body)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("%d notifications left", n)
	}
}
