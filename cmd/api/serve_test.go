package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/config"
	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/pace"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// serveKey is a signing key of the length config.LoadAPI requires.
const serveKey = "serve-test-signing-key-0123456789abcdef"

// TestServeRefusesBadConfiguration: serve refuses to boot, before listening, naming what is wrong.
func TestServeRefusesBadConfiguration(t *testing.T) {
	base := map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", "LISTEN_ADDR": "127.0.0.1:0"}
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		mention []string
	}{
		{name: "malformed duration", env: map[string]string{"SWEEP_DEADLINE": "abc"}, mention: []string{"SWEEP_DEADLINE=abc"}},
		{name: "write timeout inside the run's bound", env: map[string]string{"SWEEP_DEADLINE": "90s", "SERVER_WRITE_TIMEOUT": "60s"},
			mention: []string{"SWEEP_DEADLINE=90s", "SERVER_WRITE_TIMEOUT=60s"}},
		{name: "short signing key", env: map[string]string{"INTERNAL_SIGNING_KEY": "short"}, mention: []string{"INTERNAL_SIGNING_KEY"}},
		{name: "policy file missing", env: map[string]string{"SWEEP_POLICY_FILE": "/etc/sweeprail/policy.yaml"},
			mention: []string{"/etc/sweeprail/policy.yaml", "sweep policy refused"}},
		{name: "database unreachable: the policy cannot be checked", mention: []string{"sweep policy catalog.yaml refused against the database"}},
		{name: "retention naming no pass", env: map[string]string{"SWEEP_RETENTION": "notifications.unread=30d"},
			mention: []string{"SWEEP_RETENTION", "notifications.unread"}},
		{name: "retention below the floor", env: map[string]string{"SWEEP_RETENTION": "notifications.read=5m"},
			mention: []string{"SWEEP_RETENTION", "below the floor"}},
		{name: "retention below a pass's own floor", env: map[string]string{"SWEEP_RETENTION": "audit-log.compliance=1h"},
			mention: []string{"SWEEP_RETENTION", `"audit-log"`, `"compliance"`, "retention 1h", "min_retention of 365d"}},
		{name: "arguments", args: []string{"--port", "80"}, mention: []string{"unexpected arguments"}},
		{name: "WAL rate in an ambiguous unit", env: map[string]string{"MAX_WAL_RATE": "16MB"}, mention: []string{"MAX_WAL_RATE=16MB", "MiB"}},
		{name: "active sessions malformed", env: map[string]string{"MAX_ACTIVE_SESSIONS": "lots"}, mention: []string{"MAX_ACTIVE_SESSIONS=lots"}},
		{name: "critical level under the waiting one", env: map[string]string{"MAX_ACTIVE_SESSIONS": "20", "MAX_ACTIVE_SESSIONS_CRITICAL": "10"},
			mention: []string{"MAX_ACTIVE_SESSIONS_CRITICAL=10 must be > MAX_ACTIVE_SESSIONS=20"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			// Bounded: a configuration wrongly accepted boots a server that would run forever.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var stdout, stderr syncBuffer
			err := serve(ctx, tc.args, env, &stdout, &stderr)
			if err == nil {
				t.Fatal("serve booted")
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error does not name %q:\n%v", m, err)
				}
			}
			if strings.Contains(stdout.String(), "listening") {
				t.Errorf("serve listened before refusing: %s", stdout.String())
			}
		})
	}
}

// TestServeRefusesBlindPacer: with MAX_ACTIVE_SESSIONS set, a DATABASE_URL that names no
// application_name refuses boot, since the rail's sessions could not be told from the others.
func TestServeRefusesBlindPacer(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": dbtest.URL(t), "LISTEN_ADDR": "127.0.0.1:0", "MAX_ACTIVE_SESSIONS": "20"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr syncBuffer
	err := serve(ctx, nil, env, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "MAX_WAL_RATE / MAX_ACTIVE_SESSIONS") || !strings.Contains(err.Error(), "application_name=sweeprail") {
		t.Fatalf("serve = %v, want a refusal naming MAX_ACTIVE_SESSIONS and the application_name to add", err)
	}
}

// served is a serve() running in this process.
type served struct {
	url    string
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
	// stdout holds the lines serve printed after its listening line.
	stdout <-chan string
}

// startServe runs serve with env (LISTEN_ADDR defaults to a free loopback port) until the test
// ends or stop is called.
func startServe(t *testing.T, env map[string]string) *served {
	t.Helper()
	if env["LISTEN_ADDR"] == "" {
		env["LISTEN_ADDR"] = "127.0.0.1:0"
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{logs: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	lines := newLineWriter()
	s.stdout = lines.ch
	go func() { s.done <- serve(ctx, nil, env, lines, s.logs) }()
	select {
	case line := <-lines.ch:
		addr, ok := strings.CutPrefix(line, "listening on ")
		if !ok {
			cancel()
			t.Fatalf("first line of stdout is %q, want listening on <addr>", line)
		}
		s.url = "http://" + addr
	case err := <-s.done:
		cancel()
		t.Fatalf("serve returned before listening: %v\n%s", err, s.logs)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("serve printed no listening line within 10s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not return within 30s of its context ending")
		}
	})
	return s
}

// stop ends serve as SIGTERM would, and returns its error.
func (s *served) stop(t *testing.T, within time.Duration) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(within):
		t.Fatalf("serve did not return within %s of SIGTERM", within)
		return nil
	}
}

// signedRequest builds a request signed with serveKey.
func signedRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	signing.SignRequest(req, []byte(body), []byte(serveKey), time.Now())
	return req
}

// get fetches url (unsigned) and returns the status and body.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestServe boots the real wiring once and checks what only it decides: the catalog's bounds,
// the metrics' zero baselines and their exposition, readiness, a clean shutdown.
func TestServe(t *testing.T) {
	databaseURL := dbtest.URL(t)
	s := startServe(t, map[string]string{
		"DATABASE_URL":           databaseURL,
		"INTERNAL_SIGNING_KEY":   serveKey,
		"SERVER_WRITE_TIMEOUT":   "100s",
		"INTERNAL_FETCH_TIMEOUT": "110s",
		"SWEEP_RETENTION":        "notifications.read=45d",
	})

	t.Run("boot log lists every pass's retention, the overridden one marked", func(t *testing.T) {
		logs := s.logs.String()
		for _, sp := range policy.Catalog() {
			for _, p := range sp.Passes {
				if !strings.Contains(logs, fmt.Sprintf(`"msg":"pass retention","app_env":"development","sweep":%q,"pass":%q,`, sp.Name, p.Name)) {
					t.Errorf("no retention line for %s.%s:\n%s", sp.Name, p.Name, logs)
				}
			}
		}
		if !strings.Contains(logs, `"pass":"read","table":"notifications","age_column":"read_at","retention":"1080h0m0s","overridden":true,"policy_retention":"720h0m0s"`) {
			t.Errorf("the override is not marked with the policy's own retention:\n%s", logs)
		}
		if n := strings.Count(logs, `"overridden":true`); n != 1 {
			t.Errorf("%d passes marked overridden, want 1", n)
		}
	})

	t.Run("catalog reports the configured bounds", func(t *testing.T) {
		status, body := do(t, signedRequest(t, http.MethodGet, s.url+"/internal/sweeps", ""))
		if status != http.StatusOK {
			t.Fatalf("HTTP %d: %s", status, body)
		}
		var c struct {
			Sweeps []struct{ Name, Route string } `json:"sweeps"`
			Bounds map[string]int64               `json:"bounds"`
		}
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Sweeps) != len(policy.Catalog()) {
			t.Errorf("%d sweeps, want the %d of the catalog", len(c.Sweeps), len(policy.Catalog()))
		}
		for k, want := range map[string]int64{
			"serverWriteTimeoutMs": 100_000, "internalFetchTimeoutMs": 110_000, "sweepDeadlineMs": 90_000,
			"batchStatementTimeoutMs": 5000, "signatureMaxAgeMs": 60_000, "shutdownGraceMs": 15_000,
			"leaseTtlMs": 180_000, "minBatchSize": adaptiveMinBatchSize, "maxBatchSize": adaptiveMaxBatchSize,
		} {
			if c.Bounds[k] != want {
				t.Errorf("bounds.%s = %d, want %d", k, c.Bounds[k], want)
			}
		}
	})

	t.Run("readyz and healthz", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			if status, body := get(t, s.url+path); status != http.StatusOK {
				t.Errorf("%s: HTTP %d: %s", path, status, body)
			}
		}
	})

	var exposition []byte
	t.Run("every series at zero before any run", func(t *testing.T) {
		status, body := get(t, s.url+"/metrics")
		if status != http.StatusOK {
			t.Fatalf("HTTP %d: %s", status, body)
		}
		exposition = body
		series := map[string]string{}
		for line := range strings.Lines(string(body)) {
			if name, value, ok := strings.Cut(strings.TrimSpace(line), " "); ok && !strings.HasPrefix(line, "#") {
				series[name] = value
			}
		}
		var want []string
		for _, sw := range policy.Catalog() {
			for _, o := range wire.Outcomes() {
				want = append(want, fmt.Sprintf(`sweeprail_runs_total{outcome=%q,sweep=%q}`, o, sw.Name))
			}
			for _, p := range sw.Passes {
				// A per-row pass's keys are processed: it has no rows deleted series.
				counter := "sweeprail_rows_deleted_total"
				if p.Mode == policy.ModePerRow {
					counter = "sweeprail_rows_processed_total"
				}
				want = append(want, fmt.Sprintf(`%s{pass=%q,sweep=%q,table=%q}`, counter, p.Name, sw.Name, p.Table))
			}
			want = append(want,
				fmt.Sprintf(`sweeprail_last_success_timestamp_seconds{sweep=%q}`, sw.Name),
				fmt.Sprintf(`sweeprail_run_duration_seconds_count{sweep=%q}`, sw.Name),
				fmt.Sprintf(`sweeprail_batch_duration_seconds_count{sweep=%q}`, sw.Name))
			for _, c := range pace.Causes() {
				want = append(want, fmt.Sprintf(`sweeprail_throttled_seconds_total{cause=%q,sweep=%q}`, c, sw.Name))
			}
		}
		for _, r := range signing.Reasons() {
			want = append(want, fmt.Sprintf(`sweeprail_auth_failures_total{reason=%q}`, r))
		}
		for _, name := range want {
			if v, ok := series[name]; !ok || v != "0" {
				t.Errorf("%s = %q, want exported at 0", name, v)
			}
		}
		for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
			if _, ok := series[name]; !ok {
				t.Errorf("%s missing: the Go and process collectors are not registered", name)
			}
		}
	})

	t.Run("promtool check metrics", func(t *testing.T) {
		promtool, err := exec.LookPath("promtool")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("promtool is not on PATH and CI=true: install Debian's prometheus package")
			}
			t.Skip("promtool is not on PATH (Debian package prometheus)")
		}
		if exposition == nil {
			t.Skip("no exposition was fetched")
		}
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(exposition)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	})

	t.Run("a cascading key added after boot stops its pass with schema-changed", func(t *testing.T) {
		conn := dbtest.Conn(t, databaseURL)
		if _, err := conn.Exec(t.Context(), `CREATE SCHEMA other;
CREATE TABLE other.sessions (id bigserial PRIMARY KEY, token_id bigint REFERENCES public.refresh_tokens (id) ON DELETE CASCADE)`); err != nil {
			t.Fatal(err)
		}
		status, body := do(t, signedRequest(t, http.MethodPost, s.url+"/internal/sweep-refresh-tokens", `{}`))
		if status != http.StatusInternalServerError || !strings.Contains(string(body), `"stopReason":"schema-changed"`) ||
			!strings.Contains(string(body), "added: foreign key sessions_token_id_fkey on other.sessions") {
			t.Errorf("HTTP %d: %s", status, body)
		}
	})

	t.Run("clean shutdown returns nil", func(t *testing.T) {
		if err := s.stop(t, 10*time.Second); err != nil {
			t.Errorf("serve returned %v after a clean shutdown", err)
		}
		if !strings.Contains(s.logs.String(), `"msg":"stopped"`) {
			t.Errorf("no stopped log line:\n%s", s.logs)
		}
	})
}

// TestServeWithoutKey: an empty INTERNAL_SIGNING_KEY boots, warns, and keeps /internal/* closed.
func TestServeWithoutKey(t *testing.T) {
	s := startServe(t, map[string]string{"DATABASE_URL": dbtest.URL(t)})
	status, body := do(t, signedRequest(t, http.MethodGet, s.url+"/internal/sweeps", ""))
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"signing_not_configured"`) {
		t.Errorf("HTTP %d %s, want 503 signing_not_configured", status, body)
	}
	if !strings.Contains(s.logs.String(), `"level":"WARN","msg":"INTERNAL_SIGNING_KEY is empty`) {
		t.Errorf("no warning about the missing key:\n%s", s.logs)
	}
}

// seedNotifications adds n read notifications past their 30-day retention.
func seedNotifications(t *testing.T, u string, n int) *pgxpool.Pool {
	t.Helper()
	pool, err := dbpool.NewPool(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	_, err = pool.Exec(context.Background(), `
WITH a AS (INSERT INTO accounts (email) VALUES ('owner@example.com') RETURNING id)
INSERT INTO notifications (account_id, kind, read_at)
SELECT a.id, 'mention', now() - interval '31 days' FROM a, generate_series(1, $1::int)`, n)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

func count(t *testing.T, pool *pgxpool.Pool, sql string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestServeBoundHolds: with a small budget, a run made to last its whole budget still gets its
// 200 answer: SWEEP_DEADLINE + BATCH_STATEMENT_TIMEOUT < SERVER_WRITE_TIMEOUT, checked at boot,
// leaves room for the batch that overruns the budget.
func TestServeBoundHolds(t *testing.T) {
	u := dbtest.URL(t)
	pool := seedNotifications(t, u, 20_000)
	s := startServe(t, map[string]string{
		"DATABASE_URL":            u,
		"INTERNAL_SIGNING_KEY":    serveKey,
		"SWEEP_DEADLINE":          "1500ms",
		"BATCH_STATEMENT_TIMEOUT": "300ms",
		"BATCH_LOCK_TIMEOUT":      "300ms",
		"SERVER_WRITE_TIMEOUT":    "2500ms",
		"COUNT_TIMEOUT":           "1s",
		// The pause stretches the run over its budget with few rows; batches stay small.
		"BATCH_PAUSE": "250ms",
	})
	start := time.Now()
	status, body := do(t, signedRequest(t, http.MethodPost, s.url+"/internal/sweep-notifications", `{"batchSize": 100}`))
	took := time.Since(start)
	if status != http.StatusOK {
		t.Fatalf("HTTP %d after %s, want 200: %s", status, took, body)
	}
	var res wire.Result
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if res.StopReason != wire.StopBudget || !res.Truncated || res.DurationMs < 1500 {
		t.Errorf("answer %s, want stopReason budget, truncated, after at least the 1500ms budget", body)
	}
	if took >= 2500*time.Millisecond {
		t.Errorf("the answer took %s, past the write timeout", took)
	}
	if left := count(t, pool, `SELECT count(*) FROM notifications`); left == 0 || left == 20_000 {
		t.Errorf("%d notifications left, want a partial run", left)
	}
}

// TestWriteTimeoutCuts proves the bound checked at boot guards something real: the server built
// by serve cuts a handler that runs past SERVER_WRITE_TIMEOUT, and its client gets no answer.
func TestWriteTimeoutCuts(t *testing.T) {
	const write = 300 * time.Millisecond
	cases := []struct {
		name  string
		sleep time.Duration
		cut   bool
	}{
		{"within the write timeout: answered", 50 * time.Millisecond, false},
		{"past the write timeout: cut", 2 * write, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(tc.sleep)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"stopReason":"budget"}`)
			})
			srv := newHTTPServer(config.API{ServerWriteTimeout: write}, h, slog.New(slog.DiscardHandler))
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { _ = srv.Close() })

			// A client of its own: no kept-alive connection from another test is reused.
			client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
			resp, err := client.Post("http://"+ln.Addr().String()+"/internal/sweep-notifications", "application/json", strings.NewReader(`{}`))
			var body []byte
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			switch {
			case tc.cut && err == nil:
				t.Fatalf("the client got an answer (HTTP %d %s) from a handler past the write timeout", resp.StatusCode, body)
			case tc.cut && !(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "EOF")):
				t.Errorf("error %v, want the connection closed (EOF or reset)", err)
			case !tc.cut && err != nil:
				t.Fatalf("a handler within the write timeout was cut: %v", err)
			case !tc.cut && resp.StatusCode != http.StatusOK:
				t.Errorf("HTTP %d, want 200", resp.StatusCode)
			}
		})
	}
}

// TestServeGraceRunsOut: a request still in flight when SHUTDOWN_GRACE ends makes serve return
// an error, so the exit status says answers were cut. The request is a client that sent its
// headers and never its body: the handler waits on it, bounded only by the read timeout.
func TestServeGraceRunsOut(t *testing.T) {
	s := startServe(t, map[string]string{
		"DATABASE_URL":            dbtest.URL(t),
		"INTERNAL_SIGNING_KEY":    serveKey,
		"BATCH_STATEMENT_TIMEOUT": "200ms",
		"BATCH_LOCK_TIMEOUT":      "200ms",
		"SHUTDOWN_GRACE":          "500ms",
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /internal/sweep-notifications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	// Let the server read the headers and enter the handler.
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	err = s.stop(t, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "SHUTDOWN_GRACE=500ms") {
		t.Fatalf("serve returned %v, want an error naming SHUTDOWN_GRACE", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("serve took %s to give up after a 500ms grace", took)
	}
}

// lineWriter hands each complete line written to it to ch, never blocking the writer.
type lineWriter struct {
	mu      sync.Mutex
	partial []byte
	ch      chan string
}

func newLineWriter() *lineWriter { return &lineWriter{ch: make(chan string, 100)} }

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		select {
		case l.ch <- string(l.partial[:i]):
		default:
		}
		l.partial = l.partial[i+1:]
	}
}

// syncBuffer is a log sink shared by the server's goroutines and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// scanLines sends each line of r to lines, never blocking on a full channel, and closes drained
// once r is read to its end.
func scanLines(r io.Reader) (lines <-chan string, drained <-chan struct{}) {
	ch, done := make(chan string, 100), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case ch <- sc.Text():
			default:
			}
		}
	}()
	return ch, done
}
