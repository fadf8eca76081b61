package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
)

// chromiumPath returns Debian's Chromium. Missing, the test fails under CI=true (.ci/run
// installs it) and is skipped elsewhere, naming the script that installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: .ci/run installs it with scripts/chromium install")
	}
	t.Skip("chromium is not installed: scripts/chromium install")
	return ""
}

// newBrowser starts headless Chromium with a fresh profile, as root on a machine with no
// network: no sandbox (it needs user namespaces a root container lacks), no GPU, and none of
// the background calls home.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1200, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// pageFacts is what the test reads off the rendered page.
type pageFacts struct {
	SweepRows    int               `json:"sweepRows"`
	SweepOrder   []string          `json:"sweepOrder"`
	Points       map[string]int    `json:"points"`
	Errors       []string          `json:"errors"`
	Scripts      int               `json:"scripts"`
	Styled       string            `json:"styled"`
	ScrollWidth  int               `json:"scrollWidth"`
	ClientWidth  int               `json:"clientWidth"`
	PassStops    map[string]string `json:"passStops"`
	PassDuration map[string]string `json:"passDuration"`
	NeverBadges  int               `json:"neverBadges"`
	RecentFailed int               `json:"recentFailed"`
}

const readFacts = `(() => {
  const q = (s, n) => [...(n || document).querySelectorAll(s)];
  const points = {}, passStops = {}, passDuration = {};
  for (const f of q('figure.chart')) points[f.dataset.table] = q('circle.size', f).length;
  for (const tb of q('tbody.sweep')) {
    const p = tb.querySelector('tr.pass');
    passStops[tb.dataset.sweep] = p ? p.children[5].textContent.trim() : '';
    passDuration[tb.dataset.sweep] = p && p.children[7] ? p.children[7].textContent.trim() : '';
  }
  return JSON.stringify({
    sweepRows: q('tr.sweep').length,
    sweepOrder: q('tbody.sweep').map(tb => tb.dataset.sweep),
    points, passStops, passDuration,
    errors: q('tr.error .message').map(m => m.textContent),
    scripts: q('script').length,
    styled: getComputedStyle(document.querySelector('table.sweeps')).borderCollapse,
    scrollWidth: document.documentElement.scrollWidth,
    clientWidth: document.documentElement.clientWidth,
    neverBadges: q('tr.sweep .badge.never').length,
    recentFailed: q('tr.run.failed').length,
  });
})()`

// TestStatusPageInBrowser serves the API with the status page on, gives it a history of several
// runs (a table that grows between them, a sweep that fails), and reads the page as Chromium
// renders it, at a desktop's width and at a phone's.
func TestStatusPageInBrowser(t *testing.T) {
	browser := newBrowser(t)
	u := dbtest.URL(t)
	pool := seedNotifications(t, u, 300)
	// A failure whose message holds markup: the page must show it as text.
	const boom = `<script>alert("boom")</script> refused by policy`
	for _, sql := range []string{
		`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '` + boom + `' USING ERRCODE = 'P0001'; END $$`,
		`CREATE TRIGGER refuse BEFORE DELETE ON refresh_tokens FOR EACH ROW EXECUTE FUNCTION refuse()`,
		`INSERT INTO refresh_tokens (account_id, token_hash, expires_at) SELECT id, '\x00', now() - interval '3 days' FROM accounts`,
	} {
		if _, err := pool.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	s := startServe(t, map[string]string{"DATABASE_URL": u, "INTERNAL_SIGNING_KEY": serveKey, "STATUS_ADDR": "127.0.0.1:0"})
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

	// Four runs of notifications, the table growing before each; one failed refresh-tokens run.
	const notificationRuns = 4
	for i := range notificationRuns {
		if i > 0 {
			seedMore(t, pool, 2000)
		}
		if code, body := do(t, signedRequest(t, http.MethodPost, s.url+"/internal/sweep-notifications", "{}")); code != http.StatusOK {
			t.Fatalf("notifications run %d: HTTP %d: %s", i, code, body)
		}
	}
	if code, body := do(t, signedRequest(t, http.MethodPost, s.url+"/internal/sweep-refresh-tokens", "{}")); code != http.StatusInternalServerError {
		t.Fatalf("refresh-tokens: HTTP %d, want 500: %s", code, body)
	}

	shots := screenshotDir(t)
	t.Run("desktop", func(t *testing.T) {
		raw, png := render(t, browser, statusURL)
		saveShot(t, filepath.Join(shots, "status-desktop.png"), png)
		var f pageFacts
		if err := json.Unmarshal([]byte(raw), &f); err != nil {
			t.Fatal(err)
		}
		catalog := policy.Catalog()
		if f.SweepRows != len(catalog) {
			t.Errorf("%d sweep rows, want one per sweep of the catalog (%d)", f.SweepRows, len(catalog))
		}
		if len(f.SweepOrder) < 2 || f.SweepOrder[0] != "refresh-tokens" || f.SweepOrder[1] != "notifications" {
			t.Errorf("sweeps in order %v, want the newest run first", f.SweepOrder)
		}
		if f.NeverBadges != len(catalog)-2 {
			t.Errorf("%d sweeps marked never run, want %d", f.NeverBadges, len(catalog)-2)
		}
		if f.Points["notifications"] != notificationRuns || f.Points["refresh_tokens"] != 1 {
			t.Errorf("chart points %v, want %d for notifications and 1 for refresh_tokens", f.Points, notificationRuns)
		}
		if f.PassStops["notifications"] != "exhausted" || f.PassStops["refresh-tokens"] != "batch-error" {
			t.Errorf("pass stop reasons %v", f.PassStops)
		}
		if d := f.PassDuration["notifications"]; !strings.HasSuffix(d, "ms") && !strings.HasSuffix(d, "s") {
			t.Errorf("notifications pass duration %q, want the pass's own", d)
		}
		if len(f.Errors) != 1 || !strings.Contains(f.Errors[0], boom) {
			t.Errorf("error messages %q, want the failed run's, as text", f.Errors)
		}
		if f.Scripts != 0 {
			t.Errorf("%d script elements: the failed run's message was parsed as markup", f.Scripts)
		}
		if f.RecentFailed != 1 {
			t.Errorf("%d failed rows among the recent runs, want 1", f.RecentFailed)
		}
		// The stylesheet applies: the policy's hash matches it, or Chromium would have refused it.
		if f.Styled != "collapse" {
			t.Errorf("table border-collapse %q: the page's stylesheet did not apply", f.Styled)
		}
	})

	t.Run("phone", func(t *testing.T) {
		if err := chromedp.Do(browser, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
			t.Fatal(err)
		}
		raw, png := render(t, browser, statusURL)
		saveShot(t, filepath.Join(shots, "status-phone.png"), png)
		var f pageFacts
		if err := json.Unmarshal([]byte(raw), &f); err != nil {
			t.Fatal(err)
		}
		if f.ScrollWidth > f.ClientWidth {
			t.Errorf("the page is %dpx wide in a %dpx viewport: it scrolls sideways on a phone", f.ScrollWidth, f.ClientWidth)
		}
	})
}

// render opens url in browser, waits for the sweeps' table, and returns the page's facts (as
// readFacts writes them) and a screenshot of the whole page (PNG).
func render(t *testing.T, browser context.Context, url string) (string, []byte) {
	t.Helper()
	if err := chromedp.Do(browser, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("table.sweeps"))); err != nil {
		t.Fatal(err)
	}
	raw, err := chromedp.Run(browser, chromedp.Evaluate[string](readFacts))
	if err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	return raw, png
}

// seedMore adds n notifications within their retention, so the table grows run after run, and
// one past it per account, so each run has work and a row of its own in the history.
func seedMore(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO notifications (account_id, kind, read_at)
		SELECT id, 'mention', now() FROM accounts, generate_series(1, $1::int)
		UNION ALL SELECT id, 'mention', now() - interval '90 days' FROM accounts`, n); err != nil {
		t.Fatal(err)
	}
}

// screenshotDir is where the test leaves its screenshots: .tmp/screenshots at the repository's
// root (ignored by git), kept after the test so a person can look at them.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", ".tmp", "screenshots"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func saveShot(t *testing.T, path string, png []byte) {
	t.Helper()
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
