package sweep_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// batchLines returns the "sweep batch" records a JSON handler wrote to b.
func (b *syncBuffer) batchLines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if rec["msg"] == "sweep batch" {
			out = append(out, rec)
		}
	}
	return out
}

func TestBatchDebugLog(t *testing.T) {
	t.Parallel()
	t.Run("debug logs each batch with its size and duration", func(t *testing.T) {
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 2500, 10)
		var out syncBuffer
		logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: fixed(settings(), 1000), Logger: logger, AsOf: fixedAsOf(at)})
		res := run(t, r, "notifications")
		lines := out.batchLines(t)
		if len(lines) != res.BatchCount || len(lines) != 3 {
			t.Fatalf("%d batch lines for %d batches, want 3", len(lines), res.BatchCount)
		}
		for i, want := range []float64{1000, 1000, 500} {
			l := lines[i]
			if l["level"] != "DEBUG" || l["sweep"] != "notifications" || l["pass"] != "read" || l["run_id"] != res.RunID ||
				l["batch"] != float64(i+1) || l["size"] != float64(1000) || l["deleted"] != want || l["failed"] != false ||
				l["path"] != "index" || l["retried"] != false {
				t.Errorf("batch line %d: %v", i+1, l)
			}
			if took, ok := l["took_ms"].(float64); !ok || took < 0 {
				t.Errorf("batch line %d: took_ms %v, want a duration in ms", i+1, l["took_ms"])
			}
		}
	})

	t.Run("info leaves them out", func(t *testing.T) {
		pool := dbtest.Pool(t)
		at := dbNow(t, pool)
		seedNotifications(t, pool, at, 1500, 0)
		var out syncBuffer
		logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
		r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: fixed(settings(), 1000), Logger: logger, AsOf: fixedAsOf(at)})
		if res := run(t, r, "notifications"); res.Deleted != 1500 {
			t.Fatalf("deleted %d, want 1500", res.Deleted)
		}
		if lines := out.batchLines(t); len(lines) != 0 {
			t.Fatalf("%d batch lines at info level, want none", len(lines))
		}
	})
}
