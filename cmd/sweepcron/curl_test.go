package main

import (
	"bytes"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/signing"
)

func TestCurlPrintsASignedCommand(t *testing.T) {
	t.Parallel()
	// curlLine matches the printed command and captures the signature, the body and the URL.
	curlLine := regexp.MustCompile(`^curl -sS -X POST -H 'Content-Type: application/json' -H 'X-Sweep-Signature: ([^']*)' --data '([^']*)' '([^']*)'\n$`)
	signedAt := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	env := map[string]string{
		"API_URL":              "http://api.internal:8080/",
		"INTERNAL_SIGNING_KEY": testKey,
		// Never used by curl, so a malformed value must not block it.
		"INTERNAL_FETCH_TIMEOUT": "abc",
	}
	tests := []struct {
		args     []string
		wantBody string
		wantURL  string
	}{
		{[]string{"notifications"}, `{}`, "http://api.internal:8080/internal/sweep-notifications"},
		{[]string{"notifications", "--dry-run"}, `{"dryRun":true}`, "http://api.internal:8080/internal/sweep-notifications"},
		{[]string{"--dry-run", "/internal/sweep-audit-log", "--batch-size=200"}, `{"dryRun":true,"batchSize":200}`, "http://api.internal:8080/internal/sweep-audit-log"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			c := &cli{stdout: &stdout, stderr: &stderr, now: func() time.Time { return signedAt }}
			if err := c.run(t.Context(), append([]string{"curl"}, tc.args...), env); err != nil {
				t.Fatalf("curl: %v\n%s", err, stderr.String())
			}
			m := curlLine.FindStringSubmatch(stdout.String())
			if m == nil {
				t.Fatalf("output does not look like the curl command:\n%s", stdout.String())
			}
			header, body, url := m[1], m[2], m[3]
			if body != tc.wantBody || url != tc.wantURL {
				t.Errorf("body %s url %s, want %s %s", body, url, tc.wantBody, tc.wantURL)
			}
			if want := "t=" + strconv.FormatInt(signedAt.Unix(), 10) + ","; !strings.HasPrefix(header, want) {
				t.Errorf("signature %q was not made at the injected clock (want prefix %q)", header, want)
			}
			path := strings.TrimPrefix(url, "http://api.internal:8080")
			v := signing.NewVerifier([][]byte{[]byte(testKey)}, time.Minute, func() time.Time { return signedAt.Add(30 * time.Second) }, 10)
			if err := v.Verify(header, "POST", path, "", []byte(body)); err != nil {
				t.Errorf("signature does not verify over the printed body: %v", err)
			}
			if err := v.Verify(header, "POST", path, "", []byte(body+" ")); err == nil {
				t.Error("signature verifies over another body")
			}
			if !strings.Contains(stderr.String(), "paste within") {
				t.Errorf("stderr:\n%s", stderr.String())
			}
		})
	}
}

func TestCurlCommandWorksInAShell(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on PATH; TestCurlPrintsASignedCommand checks the signature without it")
	}
	f := newFakeAPI(t, fakeSweep{name: "notifications", h: echoAnswer("notifications")})
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr, now: time.Now}
	if err := c.run(t.Context(), []string{"curl", "notifications", "--dry-run"}, f.env()); err != nil {
		t.Fatalf("curl: %v", err)
	}
	out, err := exec.CommandContext(t.Context(), "sh", "-c", stdout.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("pasted command failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"dryRun":true`) {
		t.Errorf("answer = %s", out)
	}
	calls := f.allCalls()
	if len(calls) != 1 || calls[0].SigErr != nil || string(calls[0].Body) != `{"dryRun":true}` {
		t.Errorf("calls = %+v", calls)
	}
}

func TestCurlErrors(t *testing.T) {
	t.Parallel()
	env := map[string]string{"API_URL": "http://api:8080", "INTERNAL_SIGNING_KEY": testKey}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		has  string
	}{
		{"no target", nil, env, "missing <name-or-route>"},
		{"two targets", []string{"a", "b"}, env, "want one"},
		{"bad name", []string{"a/b"}, env, "neither a sweep name nor a route"},
		{"dot route", []string{"/internal/../x"}, env, "dot segment"},
		{"bad batch size", []string{"a", "--batch-size=0"}, env, "--batch-size=0"},
		{"no key", []string{"a"}, map[string]string{"API_URL": "http://api:8080"}, "INTERNAL_SIGNING_KEY"},
		{"no URL", []string{"a"}, map[string]string{"INTERNAL_SIGNING_KEY": testKey}, "API_URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, _, err := runCron(t, t.Context(), tc.env, append([]string{"curl"}, tc.args...)...)
			if code != exitConfig {
				t.Fatalf("exit = %d (%v), want %d", code, err, exitConfig)
			}
			if !strings.Contains(err.Error(), tc.has) {
				t.Errorf("error = %q, want %q", err, tc.has)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	got := shellQuote(`it's "x" $HOME`)
	out, err := exec.Command("sh", "-c", "printf %s "+got).Output()
	if err != nil {
		t.Skipf("no sh: %v", err)
	}
	if string(out) != `it's "x" $HOME` {
		t.Errorf("sh read %q back from %s", out, got)
	}
}
