package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// Keys of the length the API requires (32 bytes or more).
const (
	signingKey  = "reliability-signing-key-current-0123456789"
	previousKey = "reliability-signing-key-previous-012345678"
)

var ctx = context.Background()

// long skips a test that takes minutes or needs a PostgreSQL cluster of its own, unless
// RELIABILITY=1 (make test-reliability sets it). It is a deliberate, named skip: make test runs
// the fast subset of this package, and these are not part of it.
func long(t *testing.T) {
	t.Helper()
	if os.Getenv("RELIABILITY") != "1" {
		t.Skip("long reliability test: RELIABILITY=1 runs it (make test-reliability)")
	}
}

// built holds the api and sweepcron binaries, built from this tree once per test binary.
var built struct {
	once      sync.Once
	dir       string
	api, cron string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// binaries returns the paths of the api and sweepcron binaries. Under RELIABILITY=1 and -race
// they are built with -race too, so the load test also hunts data races inside the servers; the
// fast subset builds plain ones, which link in a second from the build cache.
func binaries(t *testing.T) (api, cron string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		// Under CI the fast subset must run, never skip.
		if os.Getenv("CI") == "true" {
			t.Fatal("the go tool is not on PATH and CI=true: cannot build the binaries under test")
		}
		t.Skip("the go tool is not on PATH; cannot build the api and sweepcron binaries")
	}
	built.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			built.err = err
			return
		}
		if built.dir, err = os.MkdirTemp("", "sweeprail-reliability-"); err != nil {
			built.err = err
			return
		}
		args := []string{"build"}
		if raceEnabled && os.Getenv("RELIABILITY") == "1" {
			args = append(args, "-race")
		}
		args = append(args, "-o", built.dir+string(filepath.Separator), "./cmd/api", "./cmd/sweepcron")
		cmd := exec.Command(goTool, args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		built.api, built.cron = filepath.Join(built.dir, "api"), filepath.Join(built.dir, "sweepcron")
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.api, built.cron
}

// moduleRoot is the repository root: two levels up from this package, checked by its go.mod.
func moduleRoot() (string, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.Contains(b, []byte("module github.com/sweeprail/sweeprail")) {
		return "", fmt.Errorf("no sweeprail go.mod at %s (err %v)", root, err)
	}
	return root, nil
}

// lineBuffer collects a process's output; it is safe for the copying goroutine and the test.
type lineBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the complete lines written so far.
func (b *lineBuffer) lines() []string {
	s := b.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		return nil
	}
	return strings.Split(s, "\n")
}

// proc is one process started by a test, killed at cleanup if still running.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr *lineBuffer
	done           chan struct{}
	err            error // cmd.Wait's, once done is closed
}

func startProc(t *testing.T, name, bin string, args []string, env map[string]string) *proc {
	t.Helper()
	p := &proc{name: name, stdout: &lineBuffer{}, stderr: &lineBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = envList(env)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// envList is an explicit environment: nothing of the test's own (a DATABASE_URL, a key) leaks
// into a process under test.
func envList(env map[string]string) []string {
	out := []string{}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// execCommand is a one-shot command bounded by c, with exactly env.
func execCommand(c context.Context, bin string, args []string, env map[string]string) *exec.Cmd {
	cmd := exec.CommandContext(c, bin, args...)
	cmd.Env = envList(env)
	return cmd
}

// exitCode is a finished command's exit status; -1 when it did not exit normally.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitExit waits for the process to end and returns cmd.Wait's error.
func (p *proc) waitExit(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(within):
		t.Fatalf("%s still running %s later\nstderr:\n%s", p.name, within, tail(p.stderr.String(), 40))
		return nil
	}
}

// terminate sends SIGTERM, as an orchestrator does, and returns the exit error.
func (p *proc) terminate(t *testing.T, within time.Duration) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !p.exited() {
		t.Fatalf("SIGTERM %s: %v", p.name, err)
	}
	return p.waitExit(t, within)
}

// kill9 sends SIGKILL: no deferred call, no lease release, no answer.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL %s: %v", p.name, err)
	}
	_ = p.waitExit(t, 10*time.Second)
}

// apiProc is a running api serve.
type apiProc struct {
	*proc
	url string
	// app is the application_name of its database sessions, to find them in pg_stat_activity.
	app string
}

// startAPI runs api serve over the database at dbURL with env on top of the test defaults
// (a free loopback port, signingKey), and waits for its listening line.
func startAPI(t *testing.T, app, dbURL string, env map[string]string) *apiProc {
	t.Helper()
	bin, _ := binaries(t)
	full := map[string]string{
		"DATABASE_URL":         withApp(t, dbURL, app),
		"LISTEN_ADDR":          "127.0.0.1:0",
		"INTERNAL_SIGNING_KEY": signingKey,
	}
	maps.Copy(full, env)
	for k, v := range full {
		if v == "" {
			delete(full, k) // "" in env means: leave the variable unset
		}
	}
	a := &apiProc{proc: startProc(t, app, bin, []string{"serve"}, full), app: app}
	var addr string
	waitFor(t, app+" to print its listening line", 20*time.Second, func() bool {
		if a.exited() {
			t.Fatalf("%s exited before listening: %v\n%s", app, a.err, a.stderr)
		}
		for _, l := range a.stdout.lines() {
			if rest, ok := strings.CutPrefix(l, "listening on "); ok {
				addr = rest
				return true
			}
		}
		return false
	})
	a.url = "http://" + addr
	return a
}

// withApp sets application_name on a connection URL, so that pg_stat_activity tells this
// process's sessions from every other one.
func withApp(t *testing.T, dbURL, app string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

// cronEnv is the environment of a sweepcron calling a, with its fetch timeout.
func cronEnv(a *apiProc, fetch string) map[string]string {
	return map[string]string{"API_URL": a.url, "INTERNAL_SIGNING_KEY": signingKey, "INTERNAL_FETCH_TIMEOUT": fetch}
}

// cronReport is the part of one sweepcron --json document the tests read.
type cronReport struct {
	StartedAt time.Time `json:"startedAt"`
	Routes    []struct {
		Sweep      string `json:"sweep"`
		Category   string `json:"category"`
		StatusCode int    `json:"statusCode"`
		Detail     string `json:"detail"`
		Answer     *struct {
			Deleted    int64  `json:"deleted"`
			StopReason string `json:"stopReason"`
			Error      *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Pass    string `json:"pass"`
			} `json:"error"`
		} `json:"answer"`
	} `json:"routes"`
	NotCalled   []string `json:"notCalled"`
	Interrupted bool     `json:"interrupted"`
	ExitCode    int      `json:"exitCode"`
	Error       string   `json:"error"`
}

// cronReports parses every complete line of a sweepcron --json output.
func cronReports(t *testing.T, out *lineBuffer) []cronReport {
	t.Helper()
	var reps []cronReport
	for _, l := range out.lines() {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var r cronReport
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("sweepcron printed a line that is not a JSON report: %v\n%s", err, l)
		}
		reps = append(reps, r)
	}
	return reps
}

// answer is one HTTP exchange's outcome.
type answer struct {
	status int
	body   []byte
	err    error
	took   time.Duration
}

// result decodes a sweep answer.
func (a answer) result(t *testing.T) wire.Result {
	t.Helper()
	var r wire.Result
	if err := json.Unmarshal(a.body, &r); err != nil {
		t.Fatalf("HTTP %d: not a sweep answer: %v\n%s", a.status, err, a.body)
	}
	return r
}

// envelope decodes an error answer.
func (a answer) envelope(t *testing.T) (code, message string) {
	t.Helper()
	var e struct{ Error, Message string }
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("HTTP %d: not an error envelope: %v\n%s", a.status, err, a.body)
	}
	return e.Error, e.Message
}

// client has no kept-alive connections: a server killed by a test must not leave one behind for
// the next request to trip on.
// client waits for the server's answer to a request that expects 100-continue before it writes
// the body, as a careful client of a large upload does.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: 5 * time.Second}, Timeout: 60 * time.Second}

// signed is what one signature covers, and what is sent.
type signed struct {
	key             string
	at              time.Time
	nonce           string
	method          string
	path, query     string // signed
	sentPath, sentQ string // sent; empty means as signed
	body            string
}

// request builds the request s describes.
func (s signed) request(t *testing.T, base string) *http.Request {
	t.Helper()
	if s.method == "" {
		s.method = http.MethodPost
	}
	if s.nonce == "" {
		s.nonce = signing.NewNonce()
	}
	if s.at.IsZero() {
		s.at = time.Now()
	}
	if s.key == "" {
		s.key = signingKey
	}
	path, query := s.path, s.query
	if s.sentPath != "" {
		path = s.sentPath
	}
	if s.sentQ != "" {
		query = s.sentQ
	}
	target := base + path
	if query != "" {
		target += "?" + query
	}
	req, err := http.NewRequest(s.method, target, strings.NewReader(s.body))
	if err != nil {
		t.Fatal(err)
	}
	if s.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(signing.Header, signing.Sign([][]byte{[]byte(s.key)}, s.at, s.nonce, s.method, s.path, s.query, []byte(s.body)))
	return req
}

func send(req *http.Request) answer {
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return answer{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: b, err: err, took: time.Since(start)}
}

// post sends a freshly signed POST to a sweep route.
func (a *apiProc) post(t *testing.T, sweepName, body string) answer {
	t.Helper()
	return send(signed{path: "/internal/sweep-" + sweepName, body: body}.request(t, a.url))
}

// waitFor polls cond every 20ms until it holds, failing the test after within. It is how tests
// order themselves on real state (a lease row, a blocked backend), never on a sleep.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openPool is the test's own view of the database at u, closed at cleanup.
func openPool(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := dbpool.NewPool(ctx, withApp(t, u, "reliability-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// scalar runs a query of one value.
func scalar[T any](t *testing.T, db querier, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := db.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func exec1(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// account returns the one account of the test database, creating it.
func account(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	return scalar[string](t, pool, `INSERT INTO accounts (email) VALUES ('reliability@example.com')
ON CONFLICT (email) DO UPDATE SET email = EXCLUDED.email RETURNING id::text`)
}

// seedNotifications adds eligible notifications (read 31 days ago, kind 'eligible') and fresh
// ones (kind 'fresh': half unread, half read 29 days ago, a day inside the 30-day window).
func seedNotifications(t *testing.T, pool *pgxpool.Pool, eligible, fresh int) {
	t.Helper()
	acc := account(t, pool)
	exec1(t, pool, `INSERT INTO notifications (account_id, kind, body, read_at)
SELECT $1::uuid, 'eligible', 'old ' || i, now() - interval '31 days' FROM generate_series(1, $2::int) i`, acc, eligible)
	exec1(t, pool, `INSERT INTO notifications (account_id, kind, body, read_at)
SELECT $1::uuid, 'fresh', 'keep ' || i, CASE WHEN i % 2 = 0 THEN now() - interval '29 days' END
FROM generate_series(1, $2::int) i`, acc, fresh)
}

// seedTokens adds refresh tokens expired two days ago (eligible past the 1-day retention, hash
// prefixed 'old:') and fresh ones (hash prefixed 'keep:': half valid, half expired 23 hours ago).
func seedTokens(t *testing.T, pool *pgxpool.Pool, eligible, fresh int) {
	t.Helper()
	acc := account(t, pool)
	exec1(t, pool, `INSERT INTO refresh_tokens (account_id, token_hash, expires_at)
SELECT $1::uuid, 'old:'::bytea || uuid_send(gen_random_uuid()), now() - interval '2 days' FROM generate_series(1, $2::int)`, acc, eligible)
	exec1(t, pool, `INSERT INTO refresh_tokens (account_id, token_hash, expires_at)
SELECT $1::uuid, 'keep:'::bytea || uuid_send(gen_random_uuid()),
       CASE WHEN i % 2 = 0 THEN now() - interval '23 hours' ELSE now() + interval '1 hour' END
FROM generate_series(1, $2::int) i`, acc, fresh)
}

// tableState is what a fault must not change beyond the sweep's own deletes.
type tableState struct {
	eligible int64
	fresh    int64
	// freshSum is an md5 over every fresh row's id and content: equal sums mean the same rows,
	// unchanged.
	freshSum string
}

func notificationsState(t *testing.T, db querier) tableState {
	t.Helper()
	var s tableState
	err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = 'eligible'), count(*) FILTER (WHERE kind = 'fresh'),
  coalesce(md5(string_agg(concat_ws('|', id, account_id, body, created_at, read_at), ',' ORDER BY id) FILTER (WHERE kind = 'fresh')), '')
FROM notifications`).Scan(&s.eligible, &s.fresh, &s.freshSum)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tokensState(t *testing.T, db querier) tableState {
	t.Helper()
	var s tableState
	err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE substr(token_hash, 1, 4) = 'old:'), count(*) FILTER (WHERE substr(token_hash, 1, 5) = 'keep:'),
  coalesce(md5(string_agg(concat_ws('|', id, account_id, token_hash, created_at, expires_at), ',' ORDER BY id) FILTER (WHERE substr(token_hash, 1, 5) = 'keep:')), '')
FROM refresh_tokens`).Scan(&s.eligible, &s.fresh, &s.freshSum)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// blockedBy reports whether a session of app waits on a lock that pid holds.
func blockedBy(t *testing.T, db querier, app string, pid uint32) bool {
	t.Helper()
	return scalar[bool](t, db, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE application_name = $1 AND $2::int = ANY (pg_blocking_pids(pid)))`, app, int(pid))
}

// sessions counts app's sessions in pg_stat_activity.
func sessions(t *testing.T, db querier, app string) int64 {
	t.Helper()
	return scalar[int64](t, db, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app)
}

func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
