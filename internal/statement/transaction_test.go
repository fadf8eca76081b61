package statement

import (
	"strings"
	"testing"
	"time"
)

func TestBatchTransactionCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"unset", "", true},
		{"lz4", "lz4", true},
		{"zstd", "zstd", true},
		{"pglz", "pglz", true},
		{"on", "on", true},
		{"off", "off", true},
		// Config writes the keyword lower; anything else is no keyword of the engine's.
		{"upper case", "LZ4", false},
		{"a statement behind it", "lz4; DROP TABLE t", false},
		{"quoted", "'lz4'", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := BatchTransaction{StatementTimeout: time.Second, LockTimeout: time.Second, IdleTimeout: time.Second, WALCompression: tc.value}
			err := b.Check()
			if (err == nil) != tc.ok {
				t.Fatalf("Check() = %v, want ok %t", err, tc.ok)
			}
			if tc.ok {
				return
			}
			if !strings.Contains(err.Error(), "want one of off, on, pglz, lz4, zstd") {
				t.Errorf("Check() = %q: does not name the values it takes", err)
			}
		})
	}
}

func TestBatchTransactionCheckFlushAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		bytes int64
		ok    bool
	}{
		{"unset", 0, true},
		{"one page", 8 << 10, true},
		{"256 KiB", 256 << 10, true},
		{"PostgreSQL's largest, 2 MiB", 2 << 20, true},
		// PostgreSQL would round a part of a page, and refuse past 256 pages.
		{"part of a page", 12 << 10, false},
		{"past 2 MiB", 2<<20 + 8<<10, false},
		{"negative", -8 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := BatchTransaction{StatementTimeout: time.Second, LockTimeout: time.Second, IdleTimeout: time.Second, FlushAfter: tc.bytes}
			err := b.Check()
			if (err == nil) != tc.ok {
				t.Fatalf("Check() = %v, want ok %t", err, tc.ok)
			}
			if !tc.ok && !strings.Contains(err.Error(), "want whole 8 KiB pages, at most 2 MiB") {
				t.Errorf("Check() = %q: does not say what it takes", err)
			}
		})
	}
}

// TestTimeoutsSetRefuses: the writes a read takes from the batches are written into SQL, so Set
// refuses what BatchTransaction.Check refuses before it sends anything (a nil transaction would
// fail the send).
func TestTimeoutsSetRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		t    Timeouts
		want string
	}{
		{"a method the engine never names", Timeouts{Statement: time.Second, WALCompression: "lz4'; DROP TABLE t; --"}, "want one of"},
		{"part of a page", Timeouts{Statement: time.Second, FlushAfter: 12 << 10}, "want whole 8 KiB pages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.t.Set(t.Context(), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Set() = %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}
