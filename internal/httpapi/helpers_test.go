package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/trace"
)

// Keys of the length config.LoadAPI requires.
const (
	currentKey  = "httpapi-test-key-current-0123456789abcdef"
	previousKey = "httpapi-test-key-previous-0123456789abcdef"
	otherKey    = "httpapi-test-key-someone-else-0123456789ab"
	maxAge      = time.Minute
	writeBound  = 2 * time.Minute
)

var ctx = context.Background()

// dbTrace counts what the server's pool sends to PostgreSQL: every query and every connection
// attempt. A request refused before the database shows zero of both.
type dbTrace struct {
	mu       sync.Mutex
	connects int
	queries  []string
}

func (d *dbTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queries = append(d.queries, data.SQL)
	return ctx
}

func (d *dbTrace) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (d *dbTrace) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.connects++
	return ctx
}

func (d *dbTrace) TraceConnectEnd(context.Context, pgx.TraceConnectEndData) {}

// snapshot returns how many connects and queries were seen so far.
func (d *dbTrace) snapshot() (connects int, queries []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.connects, slices.Clone(d.queries)
}

// harness is a real HTTP server over NewServer, on a fresh migrated database of its own.
type harness struct {
	t      *testing.T
	url    string
	db     *pgxpool.Pool // untraced: the test's own view of the database
	trace  *dbTrace      // what the server's pool did
	reg    *prometheus.Registry
	runner *sweep.Runner
	logs   *syncBuffer
}

// options change a harness before it is built.
type options struct {
	keys       []string // nil: no verifier at all
	settings   sweep.Settings
	runContext context.Context
	bounds     httpapi.Bounds
	// bodyTimeout and maxDryRuns are passed as they are: 0 leaves NewServer's default.
	bodyTimeout time.Duration
	maxDryRuns  int
	// tracing traces the runner and the server; nil traces nothing.
	tracing *trace.Tracing
	// replayStore is the verifier's shared replay store; nil: none.
	replayStore signing.ReplayStore
}

func defaultOptions() options {
	return options{
		keys: []string{currentKey},
		settings: sweep.Settings{
			Deadline: time.Minute, StatementTimeout: 5 * time.Second, LockTimeout: 2 * time.Second,
			CountTimeout: 5 * time.Second, BatchSize: 1000, MinBatchSize: 100, MaxBatchSize: 50000,
			BatchTarget: 100 * time.Millisecond, MaxBatches: 1000,
		},
		bounds: httpapi.Bounds{ServerWriteTimeout: writeBound, SignatureMaxAge: maxAge, ShutdownGrace: 15 * time.Second},
	}
}

func newHarness(t *testing.T, change ...func(*options)) *harness {
	t.Helper()
	o := defaultOptions()
	for _, c := range change {
		c(&o)
	}
	u := dbtest.URL(t)
	h := &harness{t: t, trace: &dbTrace{}, reg: prometheus.NewRegistry(), logs: &syncBuffer{}}

	cfg, err := dbpool.PoolConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = h.trace
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h.db, err = dbpool.NewPool(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.db.Close)

	specs := policy.Catalog()
	m, err := metrics.New(h.reg, httpapi.MetricLabels(specs))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	runs := history.New(pool, history.DefaultRetention)
	runner, err := sweep.NewRunner(sweep.Config{Pool: pool, Specs: specs, Settings: o.settings, Logger: logger, Metrics: m, History: runs,
		Tracing: o.tracing})
	if err != nil {
		t.Fatal(err)
	}
	h.runner = runner
	var v *signing.Verifier
	if o.keys != nil {
		v = signing.NewVerifier(byteKeys(o.keys...), maxAge, time.Now, 1000)
		if o.replayStore != nil {
			v = v.WithStore(o.replayStore)
		}
	}
	srv := httptest.NewServer(httpapi.NewServer(httpapi.Deps{
		Logger: logger, Runner: h.runner, History: runs, Pool: pool, Verifier: v, Metrics: m, Gatherer: h.reg,
		Bounds: o.bounds, RunContext: o.runContext, BodyTimeout: o.bodyTimeout, MaxDryRuns: o.maxDryRuns,
		Tracing: o.tracing,
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL

	// A trigger records every write of a lease, which a run's deferred release would otherwise
	// erase: "no lease was ever taken" is then a count, not a race.
	h.exec(`CREATE TABLE lease_audit (label text NOT NULL, op text NOT NULL)`)
	h.exec(`CREATE FUNCTION audit_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO lease_audit VALUES (NEW.label, TG_OP); RETURN NEW; END $$`)
	h.exec(`CREATE TRIGGER audit_lease AFTER INSERT OR UPDATE ON sweeprail.sweep_lock FOR EACH ROW EXECUTE FUNCTION audit_lease()`)
	h.exec(`INSERT INTO accounts (email) VALUES ('owner@example.com')`)
	return h
}

func byteKeys(ks ...string) [][]byte {
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = []byte(k)
	}
	return out
}

func (h *harness) exec(sql string, args ...any) {
	h.t.Helper()
	if _, err := h.db.Exec(ctx, sql, args...); err != nil {
		h.t.Fatalf("%v\n%s", err, sql)
	}
}

func (h *harness) count(sql string, args ...any) int64 {
	h.t.Helper()
	var n int64
	if err := h.db.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		h.t.Fatalf("%v\n%s", err, sql)
	}
	return n
}

// seedNotifications adds n read notifications past the 30-day retention and one fresh one.
func (h *harness) seedNotifications(n int) {
	h.t.Helper()
	h.exec(`INSERT INTO notifications (account_id, kind, read_at)
SELECT (SELECT id FROM accounts LIMIT 1), 'mention', now() - interval '31 days'
FROM generate_series(1, $1::int)`, n)
	h.exec(`INSERT INTO notifications (account_id, kind, read_at) SELECT id, 'mention', now() FROM accounts LIMIT 1`)
}

func (h *harness) eligibleNotifications() int64 {
	h.t.Helper()
	return h.count(`SELECT count(*) FROM notifications WHERE read_at < now() - interval '30 days'`)
}

// waitFor polls cond every 10ms for up to 10s, failing the test with what it waited for.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("gave up after 10s waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metric returns the value of one counter or gauge series, failing when it is not exported.
func (h *harness) metric(name string, lbls map[string]string) float64 {
	h.t.Helper()
	v, ok := metricValue(h.t, h.reg, name, lbls)
	if !ok {
		h.t.Fatalf("no series %s%v", name, lbls)
	}
	return v
}

func metricValue(t *testing.T, g prometheus.Gatherer, name string, lbls map[string]string) (float64, bool) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range lbls {
				if got[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// authFailures returns sweeprail_auth_failures_total for every reason.
func (h *harness) authFailures() map[string]float64 {
	h.t.Helper()
	out := map[string]float64{}
	for _, r := range signing.Reasons() {
		out[string(r)] = h.metric("sweeprail_auth_failures_total", map[string]string{"reason": string(r)})
	}
	return out
}

// signature is what a request is signed over; sign builds its header.
type signature struct {
	keys                []string
	at                  time.Time
	nonce               string
	method, path, query string
	body                string
}

func (s signature) header() string {
	return signing.Sign(byteKeys(s.keys...), s.at, s.nonce, s.method, s.path, s.query, []byte(s.body))
}

// signatureFor is the valid signature of a request to target (a path with an optional query).
func signatureFor(method, target, body string) signature {
	path, query, _ := strings.Cut(target, "?")
	return signature{keys: []string{currentKey}, at: time.Now(), nonce: signing.NewNonce(),
		method: method, path: path, query: query, body: body}
}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// send makes one request to the harness; a nil header map sends none.
func (h *harness) send(method, target, body string, header map[string]string) answer {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, h.url+target, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return doRequest(h.t, http.DefaultClient, req)
}

func doRequest(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", req.Method, req.URL, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// signed sends a correctly signed request with a JSON body.
func (h *harness) signed(method, target, body string) answer {
	h.t.Helper()
	hdr := map[string]string{signing.Header: signatureFor(method, target, body).header()}
	if body != "" {
		hdr["Content-Type"] = "application/json"
	}
	return h.send(method, target, body, hdr)
}

// envelope decodes an error answer, failing unless it is exactly the JSON error envelope.
func envelope(t *testing.T, a answer) (code, message string) {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var e map[string]any
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, a.body)
	}
	if len(e) != 2 {
		t.Errorf("envelope has keys %v, want exactly error and message: %s", keys(e), a.body)
	}
	code, _ = e["error"].(string)
	message, _ = e["message"].(string)
	if code == "" || message == "" {
		t.Errorf("envelope without error code or message: %s", a.body)
	}
	return code, message
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// decode decodes a JSON answer into v, failing on anything else.
func decode(t *testing.T, a answer, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(a.body))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode answer: %v\n%s", err, a.body)
	}
}

// syncBuffer is a log sink that the server's goroutines and the test may share.
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
