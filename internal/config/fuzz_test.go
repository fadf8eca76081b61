package config

import (
	"strings"
	"testing"
	"time"
	"unicode"
)

// FuzzLoadAPI sets one duration variable and SWEEP_RETENTION to arbitrary text: LoadAPI must not
// panic, must never show the signing key, and any configuration it accepts must hold every bound,
// checked here in a form independent of the implementation's (no addition that could wrap).
func FuzzLoadAPI(f *testing.F) {
	vars := []string{
		"SIGNATURE_MAX_AGE", "SWEEP_DEADLINE", "BATCH_STATEMENT_TIMEOUT", "BATCH_LOCK_TIMEOUT",
		"COUNT_TIMEOUT", "BATCH_TARGET", "BATCH_PAUSE", "SERVER_WRITE_TIMEOUT",
		"INTERNAL_FETCH_TIMEOUT", "SHUTDOWN_GRACE", "MAX_REPLICA_LAG",
	}
	for i, v := range []string{"60s", "90s", "5s", "2s", "10s", "100ms", "0s", "120s", "150s", "15s", "1s"} {
		f.Add(uint8(i), v, "notifications.read=30d,email-messages.sent=14d")
	}
	for _, seed := range [][2]string{
		{"2562047h47m16s", "a.b=106751d"}, {"-1s", "a.b=-1d"}, {"", ""}, {"abc", ","}, {"0", "a.b=0d"},
		{"1ns", "a.b=1d,a.b=2d"}, {"9223372036854775807ns", "=1d"}, {"115s", "a b=1d"},
	} {
		f.Add(uint8(1), seed[0], seed[1])
	}

	f.Fuzz(func(t *testing.T, which uint8, value, retention string) {
		environ := map[string]string{
			"DATABASE_URL":             "postgres://localhost/sweeprail",
			"INTERNAL_SIGNING_KEY":     goodKey,
			vars[int(which)%len(vars)]: value,
			"SWEEP_RETENTION":          retention,
		}
		cfg, err := LoadAPI(environ)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			if strings.Contains(err.Error(), goodKey) {
				t.Fatalf("the error shows the signing key:\n%v", err)
			}
			return
		}
		checkBounds(t, cfg)
	})
}

// checkBounds fails t when an accepted configuration breaks a rule of docs/DESIGN.md.
func checkBounds(t *testing.T, c API) {
	t.Helper()
	for name, d := range map[string]time.Duration{
		"SIGNATURE_MAX_AGE": c.SignatureMaxAge, "SWEEP_DEADLINE": c.SweepDeadline,
		"BATCH_STATEMENT_TIMEOUT": c.BatchStatementTimeout, "BATCH_LOCK_TIMEOUT": c.BatchLockTimeout,
		"COUNT_TIMEOUT": c.CountTimeout, "BATCH_TARGET": c.BatchTarget,
		"SERVER_WRITE_TIMEOUT": c.ServerWriteTimeout, "SHUTDOWN_GRACE": c.ShutdownGrace,
	} {
		if d <= 0 {
			t.Fatalf("accepted %s=%v", name, d)
		}
	}
	if c.BatchPause < 0 || c.InternalFetchTimeout < 0 {
		t.Fatalf("accepted BATCH_PAUSE=%v INTERNAL_FETCH_TIMEOUT=%v", c.BatchPause, c.InternalFetchTimeout)
	}
	// deadline + statement < write, written as a subtraction of positives, which cannot wrap.
	if !(c.SweepDeadline < c.ServerWriteTimeout && c.BatchStatementTimeout < c.ServerWriteTimeout-c.SweepDeadline) {
		t.Fatalf("accepted SWEEP_DEADLINE=%v + BATCH_STATEMENT_TIMEOUT=%v >= SERVER_WRITE_TIMEOUT=%v",
			c.SweepDeadline, c.BatchStatementTimeout, c.ServerWriteTimeout)
	}
	if c.InternalFetchTimeout != 0 && c.ServerWriteTimeout >= c.InternalFetchTimeout {
		t.Fatalf("accepted SERVER_WRITE_TIMEOUT=%v >= INTERNAL_FETCH_TIMEOUT=%v", c.ServerWriteTimeout, c.InternalFetchTimeout)
	}
	if c.CountTimeout >= c.ServerWriteTimeout {
		t.Fatalf("accepted COUNT_TIMEOUT=%v >= SERVER_WRITE_TIMEOUT=%v", c.CountTimeout, c.ServerWriteTimeout)
	}
	if c.BatchStatementTimeout >= c.ShutdownGrace {
		t.Fatalf("accepted BATCH_STATEMENT_TIMEOUT=%v >= SHUTDOWN_GRACE=%v", c.BatchStatementTimeout, c.ShutdownGrace)
	}
	if c.BatchLockTimeout > c.BatchStatementTimeout {
		t.Fatalf("accepted BATCH_LOCK_TIMEOUT=%v > BATCH_STATEMENT_TIMEOUT=%v", c.BatchLockTimeout, c.BatchStatementTimeout)
	}
	if c.BatchPause > 0 && c.BatchPause >= c.SweepDeadline {
		t.Fatalf("accepted BATCH_PAUSE=%v >= SWEEP_DEADLINE=%v", c.BatchPause, c.SweepDeadline)
	}
	if c.MaxReplicaLag != 0 && (c.MaxReplicaLag < 100*time.Millisecond || c.MaxReplicaLag >= c.SweepDeadline) {
		t.Fatalf("accepted MAX_REPLICA_LAG=%v with SWEEP_DEADLINE=%v", c.MaxReplicaLag, c.SweepDeadline)
	}
	if c.MaxReplicaLagBytes != 0 && c.MaxReplicaLagBytes < 1<<20 {
		t.Fatalf("accepted MAX_REPLICA_LAG_BYTES=%d", c.MaxReplicaLagBytes)
	}
	if c.SignatureMaxAge < time.Second {
		t.Fatalf("accepted SIGNATURE_MAX_AGE=%v below the signature's 1s resolution", c.SignatureMaxAge)
	}
	for name, d := range map[string]time.Duration{
		"BATCH_STATEMENT_TIMEOUT": c.BatchStatementTimeout, "BATCH_LOCK_TIMEOUT": c.BatchLockTimeout, "COUNT_TIMEOUT": c.CountTimeout,
	} {
		if d.Milliseconds() < 1 || d.Milliseconds() > 1<<31-1 {
			t.Fatalf("accepted %s=%v, outside PostgreSQL's 1..2147483647 ms", name, d)
		}
	}
	for k, d := range c.Retention {
		if d <= 0 {
			t.Fatalf("accepted SWEEP_RETENTION %s=%v", k, d)
		}
		if k == "" || strings.ContainsFunc(k, unicode.IsSpace) || strings.ContainsAny(k, "=,") {
			t.Fatalf("accepted SWEEP_RETENTION key %q", k)
		}
	}
}
