package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSomeTotal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       int64
		ok         bool
	}{
		{"cpu", "some avg10=0.00 avg60=3.57 avg300=20.70 total=4038814457\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 4038814457, true},
		{"no some line", "full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n", 0, false},
		{"no total", "some avg10=0.00\n", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := someTotal(path)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("someTotal = %d, %v; want %d, ok %t", got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestWaitsBetween(t *testing.T) {
	t.Parallel()
	w := waitsBetween(stalls{cpu: 1000, io: 50, ok: true}, stalls{cpu: 251000, io: 100050, ok: true}, time.Second)
	if !w.known || w.cpu != 0.25 || w.io != 0.1 || w.String() != "cpu 25%, io 10%" {
		t.Fatalf("waits %+v (%q), want a quarter for a core and a tenth for I/O", w, w.String())
	}
	if w := waitsBetween(stalls{}, stalls{cpu: 5, ok: true}, time.Second); w.known || w.String() != "" {
		t.Fatalf("waits %+v from a missing sample, want unknown", w)
	}
}

func TestMedianWaits(t *testing.T) {
	t.Parallel()
	got := medianWaits([]waits{{cpu: 0.1, io: 0.3, known: true}, {}, {cpu: 0.3, io: 0.1, known: true}, {cpu: 0.2, io: 0.2, known: true}})
	if !got.known || got.cpu != 0.2 || got.io != 0.2 {
		t.Fatalf("medianWaits = %+v, want the known rounds' medians, 0.2 and 0.2", got)
	}
	if got := medianWaits([]waits{{}, {}}); got.known {
		t.Fatalf("medianWaits of unknown rounds = %+v, want unknown", got)
	}
}
