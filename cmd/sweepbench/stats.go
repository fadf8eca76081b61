package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// percentile is the nearest-rank percentile of ds (q in 0..1): a value that was measured, never
// an interpolation between two. ds is not modified; an empty ds gives 0.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func maxDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

// fmtDuration prints a duration with the precision that matters at its size.
func fmtDuration(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
}

// fmtRate prints rows per second in thousands or millions.
func fmtRate(r float64) string {
	if r >= 1e6 {
		return fmt.Sprintf("%.2fM", r/1e6)
	}
	return fmt.Sprintf("%.0fk", r/1e3)
}

// fmtCount prints an integer with thousands separators.
func fmtCount(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + fmtCount(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func fmtMiB(bytes int64) string { return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)) }
