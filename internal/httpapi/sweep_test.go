package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestBadBodies: after a valid signature, a body that is not exactly what the route takes is
// refused with its 4xx envelope, before the database: nothing is counted, nothing deleted.
func TestBadBodies(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.seedNotifications(5)
	const route = "/internal/sweep-notifications"
	cases := []struct {
		name        string
		body        string
		contentType string // "-" sends none
		status      int
		code        string
		// mention is a part of the message, e.g. the field it names.
		mention string
	}{
		{name: "not JSON", body: `dryRun=true`, status: 400, code: "bad_request", mention: "not valid JSON"},
		{name: "unknown field", body: `{"dryRun": true, "force": true}`, status: 400, code: "bad_request", mention: `"force"`},
		{name: "field name in another case", body: `{"dryrun": true}`, status: 400, code: "bad_request", mention: `"dryrun"`},
		{name: "field twice", body: `{"dryRun": true, "dryRun": false}`, status: 400, code: "bad_request", mention: `"dryRun" is given twice`},
		{name: "two objects", body: `{} {}`, status: 400, code: "bad_request", mention: "exactly one JSON object"},
		{name: "trailing data", body: `{"dryRun": true} x`, status: 400, code: "bad_request"},
		{name: "an array", body: `[{"dryRun": true}]`, status: 400, code: "bad_request", mention: "one JSON object"},
		{name: "null", body: `null`, status: 400, code: "bad_request", mention: "one JSON object"},
		{name: "cut short", body: `{"dryRun": true`, status: 400, code: "bad_request", mention: "cut short"},
		{name: "dryRun not a boolean", body: `{"dryRun": "yes"}`, status: 400, code: "bad_request", mention: "dryRun"},
		{name: "dryRun null", body: `{"dryRun": null}`, status: 400, code: "bad_request", mention: "dryRun"},
		{name: "batchSize 0", body: `{"batchSize": 0}`, status: 400, code: "bad_request", mention: "batchSize"},
		{name: "batchSize -1", body: `{"batchSize": -1}`, status: 400, code: "bad_request", mention: "batchSize"},
		{name: "batchSize 50001", body: `{"batchSize": 50001}`, status: 400, code: "bad_request", mention: "batchSize"},
		{name: "batchSize huge", body: `{"batchSize": 99999999999999999999999}`, status: 400, code: "bad_request", mention: "batchSize"},
		{name: "batchSize fraction", body: `{"batchSize": 10.5}`, status: 400, code: "bad_request", mention: "batchSize"},
		{name: "batchSize exponent", body: `{"batchSize": 1e3}`, status: 400, code: "bad_request", mention: "batchSize"},
		{name: "batchSize string", body: `{"batchSize": "100"}`, status: 400, code: "bad_request", mention: "batchSize"},
		{name: "batchSize null", body: `{"batchSize": null}`, status: 400, code: "bad_request", mention: "batchSize"},
		{name: "oversized body", body: `{"dryRun": true, "pad": "` + strings.Repeat("x", 64<<10) + `"}`, status: 413, code: "body_too_large"},
		{name: "text/plain", body: `{}`, contentType: "text/plain", status: 415, code: "unsupported_media_type"},
		{name: "form", body: `{}`, contentType: "application/x-www-form-urlencoded", status: 415, code: "unsupported_media_type"},
		{name: "broken Content-Type", body: `{}`, contentType: "application/json; =", status: 415, code: "unsupported_media_type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{signing.Header: signatureFor(http.MethodPost, route, tc.body).header()}
			switch tc.contentType {
			case "":
				hdr["Content-Type"] = "application/json"
			case "-":
			default:
				hdr["Content-Type"] = tc.contentType
			}
			connects, queries := h.trace.snapshot()
			failures := h.authFailures()
			a := h.send(http.MethodPost, route, tc.body, hdr)
			if a.status != tc.status {
				t.Fatalf("HTTP %d, want %d: %s", a.status, tc.status, a.body)
			}
			code, msg := envelope(t, a)
			if code != tc.code {
				t.Errorf("error = %q, want %q", code, tc.code)
			}
			if !strings.Contains(msg, tc.mention) {
				t.Errorf("message %q does not mention %q", msg, tc.mention)
			}
			if c2, q2 := h.trace.snapshot(); c2 != connects || len(q2) != len(queries) {
				t.Errorf("a bad body reached the database: %q", q2[len(queries):])
			}
			for reason, n := range h.authFailures() {
				if n != failures[reason] {
					t.Errorf("a bad body counted an auth failure %q", reason)
				}
			}
		})
	}
	if n := h.eligibleNotifications(); n != 5 {
		t.Errorf("eligible notifications = %d after bad bodies, want the 5 seeded", n)
	}
	if n := h.count(`SELECT count(*) FROM lease_audit`); n != 0 {
		t.Errorf("bad bodies took %d leases", n)
	}
}

// resultKeys are the keys of a sweep answer, as docs/DESIGN.md shows it.
var resultKeys = []string{"archived", "batchCount", "deleted", "dryRun", "durationMs", "error", "passes", "referenceTime", "runId", "skipped", "stopReason", "sweep", "throttledMs", "truncated"}

// sweepAnswer decodes a sweep answer and checks it has exactly docs/DESIGN.md's keys.
func sweepAnswer(t *testing.T, a answer) wire.Result {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var raw map[string]any
	decode(t, a, &raw)
	if got := keys(raw); !slices.Equal(got, resultKeys) {
		t.Errorf("answer keys %v, want %v", got, resultKeys)
	}
	var res wire.Result
	decode(t, a, &res)
	return res
}

func TestSweep(t *testing.T) {
	t.Parallel()
	t.Run("run deletes and answers", func(t *testing.T) {
		h := newHarness(t)
		h.seedNotifications(250)
		a := h.signed(http.MethodPost, "/internal/sweep-notifications", `{"batchSize": 100}`)
		if a.status != http.StatusOK {
			t.Fatalf("HTTP %d, want 200: %s", a.status, a.body)
		}
		res := sweepAnswer(t, a)
		if res.Sweep != "notifications" || res.RunID == "" || res.DryRun || res.Skipped || res.Deleted != 250 ||
			res.Truncated || res.StopReason != wire.StopExhausted || res.Error != nil || res.BatchCount < 2 {
			t.Errorf("answer %s", a.body)
		}
		if len(res.Passes) != 1 || res.Passes[0].Pass != "read" || res.Passes[0].Deleted != 250 {
			t.Errorf("passes %+v", res.Passes)
		}
		if n := h.eligibleNotifications(); n != 0 {
			t.Errorf("%d eligible notifications left", n)
		}
		if n := h.count(`SELECT count(*) FROM notifications`); n != 1 {
			t.Errorf("%d notifications left, want the fresh one", n)
		}
		if n := h.count(`SELECT count(*) FROM sweeprail.sweep_lock`); n != 0 {
			t.Errorf("the lease was not released")
		}
	})

	t.Run("empty body is {}", func(t *testing.T) {
		h := newHarness(t)
		h.seedNotifications(3)
		// No Content-Type either: curl -X POST with no data sends none.
		hdr := map[string]string{signing.Header: signatureFor(http.MethodPost, "/internal/sweep-notifications", "").header()}
		a := h.send(http.MethodPost, "/internal/sweep-notifications", "", hdr)
		if a.status != http.StatusOK {
			t.Fatalf("HTTP %d, want 200: %s", a.status, a.body)
		}
		if res := sweepAnswer(t, a); res.Deleted != 3 {
			t.Errorf("deleted %d, want 3", res.Deleted)
		}
	})

	t.Run("batch error answers 500 with the same body", func(t *testing.T) {
		h := newHarness(t)
		// A table the outbox guard does not know references an eligible event: the foreign key
		// fails the batch.
		h.exec(`CREATE TABLE invoices (outbox_event_id bigint REFERENCES outbox_events (id))`)
		h.exec(`WITH e AS (INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, dispatched_at)
VALUES ('order', 'o1', 'order.paid', now() - interval '8 days') RETURNING id)
INSERT INTO invoices SELECT id FROM e`)
		a := h.signed(http.MethodPost, "/internal/sweep-outbox", `{}`)
		if a.status != http.StatusInternalServerError {
			t.Fatalf("HTTP %d, want 500: %s", a.status, a.body)
		}
		res := sweepAnswer(t, a)
		if res.StopReason != wire.StopBatchError || res.Error == nil || res.Error.Code != "23503" || res.Error.Pass != "dispatched" {
			t.Errorf("answer %s, want batch-error with error.code 23503 in pass dispatched", a.body)
		}
		if n := h.count(`SELECT count(*) FROM outbox_events`); n != 1 {
			t.Errorf("%d outbox events left, want the referenced one", n)
		}
		if n := h.count(`SELECT count(*) FROM sweeprail.sweep_lock`); n != 0 {
			t.Errorf("the lease was not released after a batch error")
		}
	})

	t.Run("dry run counts and deletes nothing", func(t *testing.T) {
		h := newHarness(t)
		h.seedNotifications(42)
		a := h.signed(http.MethodPost, "/internal/sweep-notifications", `{"dryRun": true}`)
		if a.status != http.StatusOK {
			t.Fatalf("HTTP %d, want 200: %s", a.status, a.body)
		}
		var raw map[string]any
		decode(t, a, &raw)
		if got, want := keys(raw), []string{"counted", "dryRun", "passes", "referenceTime", "sweep"}; !slices.Equal(got, want) {
			t.Errorf("dry-run keys %v, want %v", got, want)
		}
		var res wire.DryRunResult
		decode(t, a, &res)
		if !res.DryRun || res.Sweep != "notifications" || len(res.Passes) != 1 {
			t.Fatalf("answer %s", a.body)
		}
		p := res.Passes[0]
		if p.Pass != "read" || p.Eligible == nil || *p.Eligible != 42 || p.CountTimedOut || !p.Indexed {
			t.Errorf("pass %s, want read with 42 eligible, counted, indexed", a.body)
		}
		if n := h.eligibleNotifications(); n != 42 {
			t.Errorf("a dry run deleted: %d eligible left", n)
		}
		if n := h.count(`SELECT count(*) FROM lease_audit`); n != 0 {
			t.Errorf("a dry run took the lease")
		}
	})

	t.Run("dry run database error answers the 500 envelope", func(t *testing.T) {
		h := newHarness(t)
		h.exec(`DROP TABLE notifications`)
		a := h.signed(http.MethodPost, "/internal/sweep-notifications", `{"dryRun": true}`)
		if a.status != http.StatusInternalServerError {
			t.Fatalf("HTTP %d, want 500: %s", a.status, a.body)
		}
		if code, msg := envelope(t, a); code != "dry_run_failed" || !strings.Contains(msg, "42P01") {
			t.Errorf("error %q %q, want dry_run_failed naming SQLSTATE 42P01", code, msg)
		}
	})

	t.Run("lease held answers 200 skipped", func(t *testing.T) {
		h := newHarness(t)
		h.seedNotifications(5)
		h.exec(`INSERT INTO sweeprail.sweep_lock (label, owner, locked_at, locked_until)
VALUES ('notifications', gen_random_uuid(), now(), now() + interval '1 hour')`)
		a := h.signed(http.MethodPost, "/internal/sweep-notifications", `{}`)
		if a.status != http.StatusOK {
			t.Fatalf("HTTP %d, want 200: %s", a.status, a.body)
		}
		res := sweepAnswer(t, a)
		if !res.Skipped || res.StopReason != wire.StopLeaseHeld || res.Deleted != 0 {
			t.Errorf("answer %s, want skipped lease-held", a.body)
		}
		if n := h.eligibleNotifications(); n != 5 {
			t.Errorf("a skipped run deleted: %d eligible left", n)
		}
		if n := h.count(`SELECT count(*) FROM sweeprail.sweep_lock`); n != 1 {
			t.Errorf("the other holder's lease is gone")
		}
		if v := h.metric("sweeprail_runs_total", map[string]string{"sweep": "notifications", "outcome": "skipped"}); v != 1 {
			t.Errorf("runs_total{outcome=skipped} = %v, want 1", v)
		}
	})

	t.Run("unknown sweep answers 404 before the database", func(t *testing.T) {
		h := newHarness(t)
		connects, queries := h.trace.snapshot()
		a := h.signed(http.MethodPost, "/internal/sweep-nope", `{}`)
		if a.status != http.StatusNotFound {
			t.Fatalf("HTTP %d, want 404: %s", a.status, a.body)
		}
		if code, msg := envelope(t, a); code != "unknown_sweep" || !strings.Contains(msg, `"nope"`) {
			t.Errorf("error %q %q, want unknown_sweep naming nope", code, msg)
		}
		if c2, q2 := h.trace.snapshot(); c2 != connects || len(q2) != len(queries) {
			t.Errorf("an unknown sweep reached the database: %q", q2[len(queries):])
		}
	})

	t.Run("wrong method answers 405 with Allow", func(t *testing.T) {
		h := newHarness(t)
		a := h.signed(http.MethodGet, "/internal/sweep-notifications", ``)
		if a.status != http.StatusMethodNotAllowed {
			t.Fatalf("HTTP %d, want 405: %s", a.status, a.body)
		}
		if code, _ := envelope(t, a); code != "method_not_allowed" {
			t.Errorf("error %q, want method_not_allowed", code)
		}
		if got := a.header.Get("Allow"); got != http.MethodPost {
			t.Errorf("Allow = %q, want POST", got)
		}
	})

	t.Run("a stopping server starts no run", func(t *testing.T) {
		runCtx, stop := context.WithCancel(ctx)
		h := newHarness(t, func(o *options) { o.runContext = runCtx })
		h.seedNotifications(5)
		stop()
		a := h.signed(http.MethodPost, "/internal/sweep-notifications", `{}`)
		if a.status != http.StatusServiceUnavailable {
			t.Fatalf("HTTP %d, want 503: %s", a.status, a.body)
		}
		if code, _ := envelope(t, a); code != "shutting_down" {
			t.Errorf("error %q, want shutting_down", code)
		}
		if n := h.count(`SELECT count(*) FROM lease_audit`); n != 0 {
			t.Errorf("a stopping server took a lease")
		}
	})
}

// TestClientGoneRunGoesOn: a client that hangs up mid-run does not cut the run; it deletes to
// its end and releases its lease. A run under the request's context would stop with "shutdown".
func TestClientGoneRunGoesOn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *options) {
		// Ten batches of exactly 100, paused, so the run outlasts the client.
		o.settings.BatchSize, o.settings.MinBatchSize, o.settings.MaxBatchSize = 100, 100, 100
		o.settings.Pause = 50 * time.Millisecond
	})
	h.seedNotifications(1000)
	const route = "/internal/sweep-notifications"
	reqCtx, hangUp := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, h.url+route, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(signing.Header, signatureFor(http.MethodPost, route, `{}`).header())
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	h.waitFor("the run to take its lease", func() bool { return h.count(`SELECT count(*) FROM lease_audit`) > 0 })
	hangUp()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client got %v, want its own cancellation", err)
	}
	h.waitFor("the run to end", func() bool {
		return h.metric("sweeprail_runs_total", map[string]string{"sweep": "notifications", "outcome": "exhausted"}) == 1 ||
			h.metric("sweeprail_runs_total", map[string]string{"sweep": "notifications", "outcome": "shutdown"}) == 1
	})
	if v := h.metric("sweeprail_runs_total", map[string]string{"sweep": "notifications", "outcome": "exhausted"}); v != 1 {
		t.Errorf("the run did not end exhausted after its client left:\n%s", h.logs)
	}
	if n := h.eligibleNotifications(); n != 0 {
		t.Errorf("%d eligible notifications left: the run stopped when its client left", n)
	}
	if n := h.count(`SELECT count(*) FROM sweeprail.sweep_lock`); n != 0 {
		t.Errorf("the lease was not released")
	}
}

// TestCatalog checks GET /internal/sweeps: every bundled sweep with its route, passes and
// retention, and the bounds the cron client checks itself against.
func TestCatalog(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.signed(http.MethodGet, "/internal/sweeps", "")
	if a.status != http.StatusOK {
		t.Fatalf("HTTP %d, want 200: %s", a.status, a.body)
	}
	var got struct {
		Sweeps []struct {
			Name   string            `json:"name"`
			Route  string            `json:"route"`
			Passes []json.RawMessage `json:"passes"`
		} `json:"sweeps"`
		Bounds map[string]int64 `json:"bounds"`
	}
	decode(t, a, &got)
	catalog := policy.Catalog()
	if len(got.Sweeps) != len(catalog) {
		t.Fatalf("%d sweeps listed, want %d", len(got.Sweeps), len(catalog))
	}
	for i, s := range catalog {
		g := got.Sweeps[i]
		if g.Name != s.Name || g.Route != "/internal/sweep-"+s.Name || len(g.Passes) != len(s.Passes) {
			t.Errorf("sweep %d = %s %s with %d passes, want %s", i, g.Name, g.Route, len(g.Passes), s.Name)
		}
	}
	want := map[string]string{
		"notifications":   `{"pass":"read","table":"notifications","mode":"batched","ageColumn":"read_at","retention":"720h0m0s","retentionSeconds":2592000,"expiry":false,"timeZone":"UTC","where":"t.read_at IS NOT NULL","guards":[],"deleteWith":[],"allowUnindexed":false,"allowShortRetention":false,"cascades":[]}`,
		"outbox":          `{"pass":"dispatched","table":"outbox_events","mode":"batched","ageColumn":"dispatched_at","retention":"168h0m0s","retentionSeconds":604800,"expiry":false,"timeZone":"UTC","where":"t.dispatched_at IS NOT NULL","guards":[{"table":"webhook_deliveries","column":"outbox_event_id","references":"id","columns":["outbox_event_id"],"referencesColumns":["id"]}],"deleteWith":[],"allowUnindexed":false,"allowShortRetention":false,"cascades":[]}`,
		"account-erasure": `{"pass":"requested","table":"accounts","mode":"per-row","ageColumn":"deletion_requested_at","retention":"720h0m0s","retentionSeconds":2592000,"expiry":false,"timeZone":"UTC","where":"t.deleted_at IS NULL","guards":[],"deleteWith":[],"function":"wipe_account","keyColumn":"id","allowUnindexed":false,"allowShortRetention":false,"cascades":[]}`,
	}
	for _, g := range got.Sweeps {
		if w, ok := want[g.Name]; ok && string(g.Passes[0]) != w {
			t.Errorf("%s pass:\n got %s\nwant %s", g.Name, g.Passes[0], w)
		}
	}
	st := h.runner.Settings()
	wantBounds := map[string]int64{
		"serverWriteTimeoutMs": writeBound.Milliseconds(), "sweepDeadlineMs": st.Deadline.Milliseconds(),
		"batchStatementTimeoutMs": st.StatementTimeout.Milliseconds(), "batchLockTimeoutMs": st.LockTimeout.Milliseconds(),
		"countTimeoutMs": st.CountTimeout.Milliseconds(), "signatureMaxAgeMs": maxAge.Milliseconds(),
		"shutdownGraceMs": 15000, "leaseTtlMs": h.runner.LeaseTTL().Milliseconds(),
		"batchSize": 1000, "minBatchSize": 100, "maxBatchSize": 50000, "batchTargetMs": 100, "maxBatches": 1000, "batchPauseMs": 0,
	}
	for k, v := range wantBounds {
		if got.Bounds[k] != v {
			t.Errorf("bounds.%s = %d, want %d", k, got.Bounds[k], v)
		}
	}
	if _, ok := got.Bounds["internalFetchTimeoutMs"]; ok {
		t.Errorf("bounds.internalFetchTimeoutMs reported while unset")
	}
	if len(got.Bounds) != len(wantBounds) {
		t.Errorf("bounds has keys %v", got.Bounds)
	}
}
