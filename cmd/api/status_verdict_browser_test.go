package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// verdictFacts is what the verdict test reads off the rendered page.
type verdictFacts struct {
	Summary      string            `json:"summary"`
	SummaryClass string            `json:"summaryClass"`
	Verdicts     map[string]string `json:"verdicts"`
	Lines        map[string]string `json:"lines"`
	ScrollWidth  int               `json:"scrollWidth"`
	ClientWidth  int               `json:"clientWidth"`
	SummaryWidth int               `json:"summaryWidth"`
}

const readVerdicts = `(() => {
  const verdicts = {}, lines = {};
  for (const tb of document.querySelectorAll('tbody.sweep')) {
    const b = tb.querySelector('tr.verdict .badge');
    verdicts[tb.dataset.sweep] = b ? b.textContent.trim() : '';
    const l = tb.querySelector('tr.verdict td');
    lines[tb.dataset.sweep] = l ? l.textContent.replace(/\s+/g, ' ').trim() : '';
  }
  const s = document.getElementById('summary');
  return JSON.stringify({
    summary: s ? s.textContent.trim() : '', summaryClass: s ? s.className : '',
    verdicts, lines,
    scrollWidth: document.documentElement.scrollWidth,
    clientWidth: document.documentElement.clientWidth,
    summaryWidth: s ? Math.ceil(s.getBoundingClientRect().right) : 0,
  });
})()`

// recordRun writes a finished run of sweep into the history, started ago before now, stopping
// for stop, with its one pass's lag: the histories a draining, a growing and a failing sweep
// leave, which a test cannot wait hours for.
func recordRun(t *testing.T, pool *pgxpool.Pool, sweep, pass string, ago time.Duration, stop wire.StopReason, lag float64) {
	t.Helper()
	at := time.Now().Add(-ago).UTC()
	passes, err := json.Marshal([]wire.HistoryPass{{Pass: pass, StopReason: stop,
		Lag: &wire.Lag{Seconds: &lag, MeasuredAt: at.Add(time.Minute), Source: wire.LagRead}}})
	if err != nil {
		t.Fatal(err)
	}
	var errJSON *string
	if stop == wire.StopBatchError {
		e := `{"code":"57014","message":"canceling statement due to statement timeout","pass":"` + pass + `"}`
		errJSON = &e
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO sweeprail.run (run_id, sweep, started_at, finished_at, stop_reason, truncated, passes, error)
		VALUES (gen_random_uuid(), $1, $2, $2::timestamptz + interval '1 minute', $3, $4, $5::jsonb, $6::jsonb)`,
		sweep, at, string(stop), stop.Truncates(), string(passes), errJSON); err != nil {
		t.Fatal(err)
	}
}

// TestStatusPageVerdictsInBrowser serves the API with the status page on a 15-minute schedule
// (SWEEP_EXPECTED_INTERVAL), gives it a sweep that drained its table, one whose backlog shrinks,
// one whose backlog grows, one that fails and five that never ran, and reads the summary line
// and each sweep's verdict as Chromium renders them, at a desktop's width and at a phone's.
func TestStatusPageVerdictsInBrowser(t *testing.T) {
	browser := newBrowser(t)
	u := dbtest.URL(t)
	pool := seedNotifications(t, u, 300)
	recordRun(t, pool, "audit-log", "operational", 30*time.Minute, wire.StopBudget, 10*3600)
	recordRun(t, pool, "audit-log", "operational", 15*time.Minute, wire.StopBudget, 6*3600)
	recordRun(t, pool, "outbox", "dispatched", 30*time.Minute, wire.StopBudget, 2*3600)
	recordRun(t, pool, "outbox", "dispatched", 15*time.Minute, wire.StopBudget, 3*3600)
	recordRun(t, pool, "consents", "orphaned", 15*time.Minute, wire.StopBatchError, 0)
	s := startServe(t, map[string]string{"DATABASE_URL": u, "INTERNAL_SIGNING_KEY": serveKey, "STATUS_ADDR": "127.0.0.1:0",
		"SWEEP_EXPECTED_INTERVAL": "15m"})
	var statusURL string
	select {
	case line := <-s.stdout:
		var ok bool
		if statusURL, ok = strings.CutPrefix(line, "status page on "); !ok {
			t.Fatalf("second line of stdout is %q, want status page on <url>", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve printed no status page line")
	}
	if code, body := do(t, signedRequest(t, http.MethodPost, s.url+"/internal/sweep-notifications", "{}")); code != http.StatusOK {
		t.Fatalf("notifications: HTTP %d: %s", code, body)
	}

	const summary = "1 of 9 sweeps bounded; 1 draining, 1 behind, 5 stale, 1 failing"
	want := map[string]string{
		"notifications": "bounded", "audit-log": "draining", "outbox": "behind", "consents": "failing",
		"email-messages": "stale", "webhook-deliveries": "stale", "refresh-tokens": "stale",
		"idempotency-records": "stale", "account-erasure": "stale",
	}
	shots := screenshotDir(t)
	for _, tc := range []struct {
		name     string
		viewport chromedp.Action[chromedp.Void]
	}{
		{"desktop", chromedp.EmulateViewport(1200, 900)},
		{"phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := chromedp.Do(browser, tc.viewport); err != nil {
				t.Fatal(err)
			}
			if err := chromedp.Do(browser, chromedp.Navigate(statusURL), chromedp.WaitVisible(chromedp.CSS("#summary"))); err != nil {
				t.Fatal(err)
			}
			raw, err := chromedp.Run(browser, chromedp.Evaluate[string](readVerdicts))
			if err != nil {
				t.Fatal(err)
			}
			png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			saveShot(t, filepath.Join(shots, "status-verdicts-"+tc.name+".png"), png)
			var f verdictFacts
			if err := json.Unmarshal([]byte(raw), &f); err != nil {
				t.Fatal(err)
			}
			if f.Summary != summary || !strings.Contains(f.SummaryClass, "bad") {
				t.Errorf("summary %q (class %q), want %q marked bad", f.Summary, f.SummaryClass, summary)
			}
			for sweep, v := range want {
				if f.Verdicts[sweep] != v {
					t.Errorf("%s: verdict %q, want %q (%s)", sweep, f.Verdicts[sweep], v, f.Lines[sweep])
				}
			}
			if l := f.Lines["audit-log"]; !strings.Contains(l, "6h00m past its cutoff") || !strings.Contains(l, "catches up about") {
				t.Errorf("audit-log line %q, want its lag and when it catches up", l)
			}
			if l := f.Lines["notifications"]; !strings.Contains(l, "nothing overdue") {
				t.Errorf("notifications line %q, want nothing overdue", l)
			}
			if f.ScrollWidth > f.ClientWidth || f.SummaryWidth > f.ClientWidth {
				t.Errorf("the page is %dpx wide (summary to %dpx) in a %dpx viewport: it scrolls sideways",
					f.ScrollWidth, f.SummaryWidth, f.ClientWidth)
			}
		})
	}
}
