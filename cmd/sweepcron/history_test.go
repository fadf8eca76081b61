package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/signing"
)

// historyBody is an answer of GET /internal/runs in the shape the API serves: a finished run, a
// failed one, a skipped one and one still going.
const historyBody = `{"runs":[
{"runId":"6f1c0e7e-0000-4000-8000-000000000001","sweep":"notifications","startedAt":"2026-11-24T09:15:00Z","finishedAt":"2026-11-24T09:15:01.234Z",
 "stopReason":"exhausted","truncated":false,"skipped":false,"deleted":1200,"archived":0,"partitionsDropped":0,
 "passes":[{"pass":"read","deleted":1000,"archived":0,"partitionsDropped":0,"stopReason":"exhausted",
   "children":[{"table":"deliveries","column":"notification_id","rows":1500}],
   "cascades":[{"table":"read_marks","deleted":300,"updated":0},{"table":"notification_audit","deleted":0,"updated":1000}]},
  {"pass":"unread","deleted":200,"archived":0,"partitionsDropped":0,"stopReason":"exhausted",
   "children":[{"table":"deliveries","column":"notification_id","rows":20}],"cascades":[{"table":"read_marks","deleted":0,"updated":0}]}],
 "error":null,"requestId":"req-1"},
{"runId":"6f1c0e7e-0000-4000-8000-000000000002","sweep":"erasure","startedAt":"2026-11-25T09:15:00+01:00","finishedAt":"2026-11-25T09:16:30+01:00",
 "stopReason":"batch-error","truncated":false,"skipped":false,"deleted":5,"archived":3,"partitionsDropped":1,
 "passes":[{"pass":"users","deleted":5,"archived":3,"partitionsDropped":1,"stopReason":"batch-error"},
  {"pass":"forget","deleted":0,"archived":0,"partitionsDropped":0,"stopReason":"exhausted","path":"per-row","processed":163}],
 "error":{"code":"23503","message":"update or delete violates\nforeign key constraint","pass":"users"},"requestId":"req-2"},
{"runId":"6f1c0e7e-0000-4000-8000-000000000003","sweep":"notifications","startedAt":"2026-11-26T09:15:00Z","finishedAt":"2026-11-26T09:15:00.004Z",
 "stopReason":"lease-held","truncated":false,"skipped":true,"deleted":0,"archived":0,"partitionsDropped":0,"passes":[],"error":null,"requestId":"","requests":300},
{"runId":"6f1c0e7e-0000-4000-8000-000000000004","sweep":"audit-log","startedAt":"2026-11-27T09:15:00Z","finishedAt":null,
 "stopReason":"","truncated":false,"skipped":false,"deleted":0,"archived":0,"partitionsDropped":0,"passes":[],"error":null,"requestId":"req-4"},
{"runId":"6f1c0e7e-0000-4000-8000-000000000005","sweep":"audit-log","startedAt":"2026-11-28T09:15:00Z","finishedAt":"2026-11-28T09:16:30Z",
 "stopReason":"budget","truncated":true,"skipped":false,"deleted":90000,"archived":0,"partitionsDropped":0,"passes":[],"error":null,"requestId":"req-5"}
]}`

func TestHistoryTable(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.runs = answer(200, historyBody)
	code, stdout, stderr, err := runCron(t, t.Context(), f.env(), "history", "--sweep", "notifications", "--limit", "5")
	if code != exitOK {
		t.Fatalf("exit %d (%v)\n%s", code, err, stderr)
	}
	want := []string{
		"STARTED               SWEEP          DURATION  STOP                DELETED  PROCESSED  ARCHIVED  DROPPED  RUN                                   REQUEST",
		"2026-11-24T09:15:00Z  notifications  1.2s      exhausted           1200     0          0         0        6f1c0e7e-0000-4000-8000-000000000001  req-1",
		"  with +deliveries=1520 +read_marks=300(cascade) ~notification_audit=1000(updated)",
		"2026-11-25T08:15:00Z  erasure        1m30s     batch-error         5        163        3         1        6f1c0e7e-0000-4000-8000-000000000002  req-2",
		`  error 23503 in pass "users": update or delete violates foreign key constraint`,
		"2026-11-26T09:15:00Z  notifications  4ms       lease-held ×300     0        0          0         0        6f1c0e7e-0000-4000-8000-000000000003  -",
		"2026-11-27T09:15:00Z  audit-log      -         unfinished          0        0          0         0        6f1c0e7e-0000-4000-8000-000000000004  req-4",
		"2026-11-28T09:15:00Z  audit-log      1m30s     budget (truncated)  90000    0          0         0        6f1c0e7e-0000-4000-8000-000000000005  req-5",
	}
	got := lines(stdout)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("table:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	calls := f.allCalls()
	if len(calls) != 2 || calls[1].Path != "/internal/sweeps" {
		t.Fatalf("%d calls, want the history's and the verdicts'", len(calls))
	}
	c := calls[0]
	if c.Method != http.MethodGet || c.Path != "/internal/runs" || c.RawQuery != "limit=5&sweep=notifications" || len(c.Body) != 0 {
		t.Errorf("request %s %s?%s body %q, want GET /internal/runs?limit=5&sweep=notifications", c.Method, c.Path, c.RawQuery, c.Body)
	}
	if c.SigErr != nil {
		t.Errorf("the fake API refused the signature: %v", c.SigErr)
	}
	if traceparentRE.FindString(c.Traceparent) == "" {
		t.Errorf("traceparent %q", c.Traceparent)
	}
	// The signature covers the query: the same header over another query does not verify.
	for _, tc := range []struct {
		method, query string
		ok            bool
	}{
		{"GET", "limit=5&sweep=notifications", true},
		{"GET", "limit=500&sweep=notifications", false},
		{"GET", "limit=5&sweep=erasure", false},
		{"GET", "", false},
		{"POST", "limit=5&sweep=notifications", false},
	} {
		v := signing.NewVerifier([][]byte{[]byte(testKey)}, time.Minute, nil, 10)
		err := v.Verify(c.Signature, tc.method, "/internal/runs", tc.query, nil)
		var se *signing.Error
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s ?%s: %v", tc.method, tc.query, err)
		case !tc.ok && (!errors.As(err, &se) || se.Reason != signing.ReasonBad):
			t.Errorf("%s ?%s: the signature verifies (%v), want bad_signature", tc.method, tc.query, err)
		}
	}
}

func TestHistoryQuery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--limit=20"}, "limit=20"},
		{[]string{"--sweep=audit-log"}, "sweep=audit-log"},
		{[]string{"--json", "--sweep", "a", "--limit", "1"}, "limit=1&sweep=a"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t)
			f.runs = answer(200, `{"runs":[]}`)
			if code, _, stderr, err := runCron(t, t.Context(), f.env(), append([]string{"history"}, tc.args...)...); code != exitOK {
				t.Fatalf("exit %d (%v)\n%s", code, err, stderr)
			}
			if c := f.allCalls()[0]; c.RawQuery != tc.want || c.SigErr != nil {
				t.Errorf("query %q (signature: %v), want %q", c.RawQuery, c.SigErr, tc.want)
			}
		})
	}
}

func TestHistoryJSON(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	// A field this client does not know passes through.
	body := strings.Replace(historyBody, `"requestId":"req-1"`, `"requestId":"req-1","traceId":"abc"`, 1)
	f.runs = answer(200, "\n"+body+"\n\n")
	code, stdout, _, err := runCron(t, t.Context(), f.env(), "history", "--json")
	if code != exitOK {
		t.Fatalf("exit %d (%v)", code, err)
	}
	if stdout != body+"\n" {
		t.Errorf("stdout is not the answer as it came:\n%s", stdout)
	}
	var a struct {
		Runs []json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal([]byte(stdout), &a); err != nil || len(a.Runs) != 5 {
		t.Errorf("stdout is not one JSON document with 5 runs: %v", err)
	}
}

func TestHistoryEmpty(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.runs = answer(200, `{"runs":[]}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no runs recorded\n"},
		{[]string{"--sweep", "erasure"}, "no runs recorded for sweep \"erasure\"\n"},
	} {
		code, stdout, _, err := runCron(t, t.Context(), f.env(), append([]string{"history"}, tc.args...)...)
		if code != exitOK || stdout != tc.want {
			t.Errorf("%v: exit %d (%v), stdout %q, want 0 and %q", tc.args, code, err, stdout, tc.want)
		}
	}
}

func TestHistoryFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		runs   http.HandlerFunc
		code   int
		detail []string
	}{
		{"unauthorized", answer(401, `{"error":"bad_signature","message":"no v1 matches"}`), exitFailed, []string{"HTTP 401", "INTERNAL_SIGNING_KEY"}},
		{"route missing", answer(404, `{"error":"not_found","message":"no route /internal/runs"}`), exitFailed, []string{"HTTP 404", "does the API serve /internal/runs"}},
		{"unknown sweep", answer(404, `{"error":"unknown_sweep","message":"no sweep x"}`), exitFailed, []string{"unknown_sweep"}},
		{"server error", answer(500, `{"error":"internal"}`), exitFailed, []string{"HTTP 500"}},
		{"not JSON", answer(200, `<html></html>`), exitFailed, []string{"not a run history"}},
		{"no runs key", answer(200, `{"sweeps":[]}`), exitFailed, []string{`no "runs"`}},
		{"runs null", answer(200, `{"runs":null}`), exitFailed, []string{`no "runs"`}},
		{"run without id", answer(200, `{"runs":[{"sweep":"a","startedAt":"2026-01-01T00:00:00Z"}]}`), exitFailed, []string{"run #1"}},
		{"bad time", answer(200, `{"runs":[{"runId":"r","sweep":"a","startedAt":"yesterday"}]}`), exitFailed, []string{"not a run history"}},
		{"body cut", hijackMidBody, exitFailed, []string{"body broke"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t)
			f.runs = tc.runs
			code, stdout, _, err := runCron(t, t.Context(), f.env(), "history")
			if code != tc.code || err == nil {
				t.Fatalf("exit %d (%v), want %d", code, err, tc.code)
			}
			for _, d := range tc.detail {
				if !strings.Contains(err.Error(), d) {
					t.Errorf("error %q lacks %q", err, d)
				}
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing: a failure must not print as a history", stdout)
			}
		})
	}
	t.Run("runs the API could not record", func(t *testing.T) {
		t.Parallel()
		f := newFakeAPI(t)
		f.runs = answer(200, `{"runs":[{"runId":"r1","sweep":"outbox","startedAt":"2026-01-01T00:00:00Z"}],`+
			`"unrecorded":[{"runId":"r1","sweep":"outbox","at":"2026-01-01T00:00:05Z","error":"record run end: invalid input syntax for type json (SQLSTATE 22P02)"}]}`)
		for _, args := range [][]string{{"history"}, {"history", "--json"}} {
			code, stdout, _, err := runCron(t, t.Context(), f.env(), args...)
			if code != exitFailed || err == nil || !strings.Contains(err.Error(), "could not record 1 run") || !strings.Contains(err.Error(), "22P02") {
				t.Errorf("%v: exit %d (%v), want %d naming the unrecorded run", args, code, err, exitFailed)
			}
			if !strings.Contains(stdout, "r1") {
				t.Errorf("%v: stdout %q, want the history printed all the same", args, stdout)
			}
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"API_URL": deadAddr(t), "INTERNAL_SIGNING_KEY": testKey}
		if code, _, _, err := runCron(t, t.Context(), env, "history"); code != exitUnreachable {
			t.Errorf("exit %d (%v), want %d", code, err, exitUnreachable)
		}
	})
}

func TestHistoryCommandLine(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.runs = answer(200, `{"runs":[]}`)
	for _, tc := range []struct {
		args []string
		env  map[string]string
		code int
	}{
		{[]string{"--help"}, f.env(), exitOK},
		{[]string{"--limit=0"}, f.env(), exitConfig},
		{[]string{"--limit=x"}, f.env(), exitConfig},
		{[]string{"--sweep="}, f.env(), exitConfig},
		{[]string{"--sweep=a/b"}, f.env(), exitConfig},
		{[]string{"--sweep=/internal/sweep-a"}, f.env(), exitConfig},
		{[]string{"notifications"}, f.env(), exitConfig},
		{[]string{"--every=1m"}, f.env(), exitConfig},
		{nil, map[string]string{"API_URL": f.srv.URL}, exitConfig},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			if code, _, _, err := runCron(t, t.Context(), tc.env, append([]string{"history"}, tc.args...)...); code != tc.code {
				t.Errorf("exit %d (%v), want %d", code, err, tc.code)
			}
		})
	}
	if n := len(f.allCalls()); n != 0 {
		t.Errorf("%d requests made for bad command lines", n)
	}
}
