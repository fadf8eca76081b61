package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/sweeprail/sweeprail/internal/wire"
)

func TestRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.seedNotifications(30)
	for _, name := range []string{"notifications", "outbox", "notifications"} {
		if a := h.signed(http.MethodPost, "/internal/sweep-"+name, ""); a.status != http.StatusOK {
			t.Fatalf("sweep %s: %d %s", name, a.status, a.body)
		}
	}

	t.Run("newest first, every field of the run", func(t *testing.T) {
		a := h.signed(http.MethodGet, "/internal/runs", "")
		if a.status != http.StatusOK {
			t.Fatalf("%d %s", a.status, a.body)
		}
		var got wire.History
		decode(t, a, &got)
		if len(got.Runs) != 3 || got.Runs[0].Sweep != "notifications" || got.Runs[1].Sweep != "outbox" {
			t.Fatalf("runs %+v", got.Runs)
		}
		r := got.Runs[2] // the first run: it deleted the eligible notifications
		if r.FinishedAt == nil || r.StopReason == nil || *r.StopReason != wire.StopExhausted || r.Deleted != 30 ||
			len(r.Passes) != 1 || r.Passes[0].Deleted != r.Deleted || r.RequestID == "" || r.FinishedAt.Before(r.StartedAt) {
			t.Fatalf("first run %+v", r)
		}
	})

	// A run whose end the history cannot write: the answer says so, and so do the runs'
	// unrecorded and the metric, until the history is writable again.
	t.Run("a run the history could not record", func(t *testing.T) {
		h.exec(`CREATE FUNCTION sweeprail.refuse_run() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'history is read-only today' USING ERRCODE = 'P0001'; END $$`)
		h.exec(`CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON sweeprail.run FOR EACH ROW EXECUTE FUNCTION sweeprail.refuse_run()`)
		a := h.signed(http.MethodPost, "/internal/sweep-outbox", "")
		h.exec(`DROP TRIGGER refuse ON sweeprail.run`)
		var res wire.Result
		decode(t, a, &res)
		if a.status != http.StatusOK || res.HistoryError == nil || res.HistoryError.Code != "P0001" {
			t.Fatalf("%d %s, want 200 with historyError P0001", a.status, a.body)
		}
		var got wire.History
		decode(t, h.signed(http.MethodGet, "/internal/runs?sweep=outbox", ""), &got)
		if len(got.Unrecorded) != 1 || got.Unrecorded[0].RunID != res.RunID || got.Unrecorded[0].Sweep != "outbox" {
			t.Fatalf("unrecorded %+v, want run %s", got.Unrecorded, res.RunID)
		}
		decode(t, h.signed(http.MethodGet, "/internal/runs?sweep=notifications", ""), &got)
		if len(got.Unrecorded) != 0 {
			t.Errorf("notifications' unrecorded %+v, want none", got.Unrecorded)
		}
		if n := h.metric("sweeprail_history_write_failures_total", map[string]string{"sweep": "outbox"}); n != 1 {
			t.Errorf("sweeprail_history_write_failures_total{sweep=outbox} = %v, want 1", n)
		}
	})

	t.Run("filtered by sweep and limited", func(t *testing.T) {
		var got wire.History
		decode(t, h.signed(http.MethodGet, "/internal/runs?limit=1&sweep=notifications", ""), &got)
		if len(got.Runs) != 1 || got.Runs[0].Sweep != "notifications" || got.Runs[0].Deleted != 0 {
			t.Fatalf("runs %+v, want the newest notifications run alone", got.Runs)
		}
	})

	for _, tc := range []struct {
		name, target string
		status       int
		code         string
	}{
		{"unknown sweep", "/internal/runs?sweep=nope", http.StatusNotFound, "unknown_sweep"},
		{"limit zero", "/internal/runs?limit=0", http.StatusBadRequest, "bad_request"},
		{"limit too large", "/internal/runs?limit=100000", http.StatusBadRequest, "bad_request"},
		{"unknown parameter", "/internal/runs?sweeps=notifications", http.StatusBadRequest, "bad_request"},
		{"semicolon", "/internal/runs?sweep=notifications;limit=1000", http.StatusBadRequest, "bad_request"},
		{"semicolon alone", "/internal/runs?;", http.StatusBadRequest, "bad_request"},
		{"bad escape", "/internal/runs?sweep=%zz", http.StatusBadRequest, "bad_request"},
		{"repeated parameter", "/internal/runs?limit=1&limit=1000", http.StatusBadRequest, "bad_request"},
		{"repeated empty parameter", "/internal/runs?sweep=&sweep=", http.StatusBadRequest, "bad_request"},
		{"catalog: unknown parameter", "/internal/sweeps?verbose=1", http.StatusBadRequest, "bad_request"},
		{"catalog: semicolon", "/internal/sweeps?a;b", http.StatusBadRequest, "bad_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := h.signed(http.MethodGet, tc.target, "")
			if code, _ := envelope(t, a); a.status != tc.status || code != tc.code {
				t.Fatalf("%d %s, want %d %s", a.status, code, tc.status, tc.code)
			}
		})
	}

	t.Run("unsigned: refused", func(t *testing.T) {
		if a := h.send(http.MethodGet, "/internal/runs", "", nil); a.status != http.StatusUnauthorized {
			t.Fatalf("%d %s", a.status, a.body)
		}
	})
}
