package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The bench itself is measured by running it (make bench); these tests cover the parts whose
// mistakes would silently skew a report: percentiles, the per-batch log parser, the CPU
// accounting, the round filter and the report's file.

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	ds := ms(5, 1, 4, 2, 3, 10, 9, 8, 7, 6) // 1..10, shuffled
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5 * time.Millisecond}, {0.99, 10 * time.Millisecond}, {0.9, 9 * time.Millisecond}, {0, time.Millisecond}, {1, 10 * time.Millisecond}} {
		if got := percentile(ds, tt.q); got != tt.want {
			t.Errorf("p%v = %v, want %v", tt.q*100, got, tt.want)
		}
	}
	if ds[0] != 5*time.Millisecond {
		t.Error("percentile sorted its argument")
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
	// With 100 samples the p99 is the 99th, not the largest.
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, time.Duration(i))
	}
	if got := percentile(hundred, 0.99); got != 99 {
		t.Errorf("p99 of 1..100 = %v, want 99", got)
	}
	if got := median([]float64{3, 1, 2, 10}); got != 2.5 {
		t.Errorf("median = %v, want 2.5", got)
	}
}

func TestParseBatchLine(t *testing.T) {
	line := `{"time":"2026-11-30T10:00:00Z","level":"DEBUG","msg":"sweep batch","app_env":"bench","sweep":"notifications",` +
		`"run_id":"0192","pass":"read","batch":3,"size":4000,"deleted":4000,"took_ms":6.25,"failed":false}`
	b, ok := parseBatchLine([]byte(line))
	if !ok || b.size != 4000 || b.rows != 4000 || b.took != 6250*time.Microsecond {
		t.Errorf("parseBatchLine = %+v, %v; want size 4000, rows 4000, 6.25ms", b, ok)
	}
	for _, other := range []string{
		`{"level":"INFO","msg":"sweep run","deleted":10}`,
		`{"level":"DEBUG","msg":"sweep batch"}`, // no duration: not a batch line we can use
		`not json, mentions "sweep batch"`,
		``,
	} {
		if _, ok := parseBatchLine([]byte(other)); ok {
			t.Errorf("parseBatchLine(%q) accepted a line that is not a batch", other)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name may hold spaces and parentheses; fields count from the last ')'.
	line := "4242 (postgres: a (b) c) S 4000 4242 4242 0 -1 4194560 100 0 0 0 " +
		"150 50 7 3 20 0 1 0 12345 1000 100 18446744073709551615"
	p, ok := parseProcStat([]byte(line))
	if !ok || p.ppid != 4000 || p.self != 200 || p.reaped != 10 {
		t.Errorf("parseProcStat = %+v, %v; want ppid 4000, self 200, reaped 10", p, ok)
	}
	if _, ok := parseProcStat([]byte("4242 (short) S 1")); ok {
		t.Error("parseProcStat accepted a truncated line")
	}
}

func TestForeignShare(t *testing.T) {
	m := cpuMeter{cores: 2}
	t0 := time.Unix(0, 0)
	a := cpuSample{at: t0, busy: 1000, ours: 400}
	// 2 s on 2 cores is 400 ticks of capacity; the machine was busy 300 of them, 100 ours.
	b := cpuSample{at: t0.Add(2 * time.Second), busy: 1300, ours: 500}
	if got := m.foreign(a, b); got != 0.5 {
		t.Errorf("foreign = %v, want 0.5", got)
	}
	// Jiffy rounding can make ours exceed the machine's busy time by a tick: never negative.
	c := cpuSample{at: t0.Add(2 * time.Second), busy: 1100, ours: 520}
	if got := m.foreign(a, c); got != 0 {
		t.Errorf("foreign = %v, want 0", got)
	}
}

func TestCountedRounds(t *testing.T) {
	clean := round{n: 1, baselineForeign: 0.01, contestants: []outcome{{key: "A", foreign: 0.02}}}
	busy := round{n: 2, baselineForeign: 0.01, contestants: []outcome{{key: "A", foreign: 0.4}}}
	r := rounds{clean, busy, clean}
	if r.clean() != 2 || len(r.counted()) != 2 || !busy.disturbed() || clean.disturbed() {
		t.Errorf("clean %d, counted %d; want 2, 2", r.clean(), len(r.counted()))
	}
	// With no clean round, every round counts (and the report says the numbers are unreliable).
	all := rounds{busy, busy}
	if all.clean() != 0 || len(all.counted()) != 2 {
		t.Errorf("clean %d, counted %d; want 0, 2", all.clean(), len(all.counted()))
	}
}

// TestWriteReport: a run's report is its file, written whole (an older one replaced, prose
// and all), in a folder made for it.
func TestWriteReport(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "docs", "bench", "paths.md")
	for _, report := range []string{"# old\n\nold table\n", "# new\n\nnew table\n\n"} {
		if err := writeReport(path, report); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "# new\n\nnew table\n" {
		t.Errorf("the file holds %q (%v), want the new report alone", got, err)
	}
}

// parse reads a command line as main does, with DATABASE_URL set.
func parse(args ...string) (settings, error) {
	return parseArgs(args, []string{"DATABASE_URL=postgres://x/postgres"}, io.Discard)
}

func TestLoadSettings(t *testing.T) {
	s, err := parse("side-by-side")
	if err != nil || s.rows != 1_000_000 || s.rounds != 3 || s.run != "side-by-side" || s.binDir != "bin" ||
		s.out != "docs/bench/side-by-side.md" || s.databaseURL != "postgres://x/postgres" {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	s, err = parse("side-by-side", "-rows", "200000", "-variant-env", "BATCH_TARGET=20ms  BATCH_PAUSE=0s")
	if err != nil || s.rows != 200_000 || len(s.variantEnv) != 2 || s.variantEnv[1] != "BATCH_PAUSE=0s" {
		t.Fatalf("overrides: %+v, %v", s, err)
	}
	if s, err = parse("scale"); err != nil || s.run != "scale" {
		t.Fatalf("scale: %+v, %v", s, err)
	}
	s, err = parse("archive")
	if err != nil || s.run != "archive" || s.rows != 1_000_000 {
		t.Fatalf("archive: %+v, %v", s, err)
	}
	if s, err = parse("archive", "-rows", "50000"); err != nil || s.rows != 50_000 {
		t.Fatalf("archive with rows: %+v, %v", s, err)
	}
	if _, err := parseArgs([]string{"side-by-side"}, nil, io.Discard); err == nil {
		t.Error("no database URL: accepted")
	}
	for _, bad := range [][]string{
		{},
		{"archive", "yes"},
		{"archive", "scale"},
		{"side-by-side", "-rows", "1e6"},
		{"side-by-side", "-rows", "100"},
		{"scale", "-rows", "200000"},
		{"side-by-side", "-rounds", "0"},
		{"side-by-side", "-variant-env", "BATCH_TARGET"},
		{"side-by-side", "-out", ""},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("parse(%q) accepted it", bad)
		}
	}
}

func TestFormatting(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{fmtCount(1234567), "1,234,567"},
		{fmtCount(999), "999"},
		{fmtCount(-1000), "-1,000"},
		{fmtRate(1_234_000), "1.23M"},
		{fmtRate(56_789), "57k"},
		{fmtDuration(4250 * time.Microsecond), "4.2 ms"},
		{fmtDuration(94 * time.Millisecond), "94 ms"},
		{fmtDuration(1234 * time.Millisecond), "1.23 s"},
		{fmtMiB(16 << 20), "16.0 MiB"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
