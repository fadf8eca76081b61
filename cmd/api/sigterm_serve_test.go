package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestSIGTERM runs the real api binary, sends SIGTERM while a long sweep runs, and sees the run
// stop between batches, release its lease and answer, and the process exit 0 within the grace.
func TestSIGTERM(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH; cannot build the api binary")
	}
	u := dbtest.URL(t)
	bin := filepath.Join(t.TempDir(), "api")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	pool := seedNotifications(t, u, 50_000)

	const grace = 5 * time.Second
	cmd := exec.Command(bin, "serve")
	// An explicit environment: nothing of the test's own (a DATABASE_URL, a key) leaks in.
	cmd.Env = []string{
		"DATABASE_URL=" + u,
		"LISTEN_ADDR=127.0.0.1:0",
		"INTERNAL_SIGNING_KEY=" + serveKey,
		"SWEEP_DEADLINE=30s",
		"SERVER_WRITE_TIMEOUT=40s",
		"BATCH_STATEMENT_TIMEOUT=2s",
		"BATCH_LOCK_TIMEOUT=1s",
		"SHUTDOWN_GRACE=" + grace.String(),
		// Long pauses make the run last far longer than the test: only SIGTERM ends it early.
		"BATCH_PAUSE=2s",
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines, drained := scanLines(stdout)
	go func() {
		// Wait only after stdout is read to its end, as os/exec asks of StdoutPipe.
		<-drained
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	var addr string
	select {
	case line := <-lines:
		var ok bool
		if addr, ok = strings.CutPrefix(line, "listening on "); !ok {
			t.Fatalf("first line %q, want listening on <addr>\n%s", line, logs)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no listening line within 15s\n%s", logs)
	}

	type reply struct {
		status int
		body   []byte
		err    error
	}
	answered := make(chan reply, 1)
	go func() {
		req := signedRequest(t, http.MethodPost, "http://"+addr+"/internal/sweep-notifications", `{"batchSize": 100}`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- reply{err: err}
			return
		}
		defer resp.Body.Close()
		var body json.RawMessage
		err = json.NewDecoder(resp.Body).Decode(&body)
		answered <- reply{status: resp.StatusCode, body: body, err: err}
	}()

	// The run holds its lease from its start to its end: its row is the deterministic sign that
	// the run is under way.
	deadline := time.Now().Add(10 * time.Second)
	for count(t, pool, `SELECT count(*) FROM sweeprail.sweep_lock WHERE label = 'notifications'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the run took no lease within 10s\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}

	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	select {
	case r := <-answered:
		if r.err != nil {
			t.Fatalf("no answer: %v\n%s", r.err, logs)
		}
		t.Logf("answer %s after SIGTERM: HTTP %d %s", time.Since(signalled).Round(time.Millisecond), r.status, r.body)
		var res wire.Result
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
		if r.status != http.StatusOK || res.StopReason != wire.StopShutdown || !res.Truncated {
			t.Errorf("HTTP %d %s, want 200 with stopReason shutdown and truncated", r.status, r.body)
		}
	case <-time.After(grace + 5*time.Second):
		t.Fatalf("no answer within the grace\n%s", logs)
	}

	select {
	case err := <-exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) || err != nil {
			t.Errorf("process exited with %v, want 0\n%s", err, logs)
		}
		if took := time.Since(signalled); took > grace {
			t.Errorf("process took %s to exit, past SHUTDOWN_GRACE=%s", took, grace)
		}
	case <-time.After(grace + 5*time.Second):
		t.Fatalf("process still running %s after SIGTERM\n%s", grace+5*time.Second, logs)
	}

	if n := count(t, pool, `SELECT count(*) FROM sweeprail.sweep_lock`); n != 0 {
		t.Errorf("%d lease rows left after shutdown, want the run's released", n)
	}
	if left := count(t, pool, `SELECT count(*) FROM notifications`); left == 0 {
		t.Error("every notification is gone: the run was not stopped by SIGTERM")
	}
	for line := range strings.Lines(logs.String()) {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %s", line)
		}
	}
	for _, msg := range []string{`"msg":"shutting down"`, `"msg":"stopped"`, `"stop_reason":"shutdown"`} {
		if !strings.Contains(logs.String(), msg) {
			t.Errorf("the log lacks %s\n%s", msg, logs)
		}
	}
}
