package main

import (
	"testing"
	"time"
)

func TestP99Interval(t *testing.T) {
	t.Parallel()
	steady := make([]time.Duration, 4000)
	for i := range steady {
		steady[i] = time.Duration(1+i%100) * time.Millisecond
	}
	// The same values, with the slow ones bunched in one stall: an interval that resampled single
	// operations would not see that they come together.
	bunched := make([]time.Duration, 4000)
	for i := range bunched {
		bunched[i] = time.Millisecond
		if i >= 2000 && i < 2040 {
			bunched[i] = 100 * time.Millisecond
		}
	}
	tests := []struct {
		name string
		ds   []time.Duration
		want func(iv interval) bool
	}{
		{"too few operations: the estimate alone", steady[:150], func(iv interval) bool { return iv.lo == iv.est && iv.hi == iv.est }},
		{"steady: a narrow interval around the estimate", steady, func(iv interval) bool {
			return iv.est == 99*time.Millisecond && iv.lo <= iv.est && iv.hi >= iv.est && iv.hi-iv.lo <= 2*time.Millisecond
		}},
		{"one stall: wide, from the fast operations to the stall", bunched, func(iv interval) bool {
			return iv.lo == time.Millisecond && iv.hi == 100*time.Millisecond
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			iv := p99Interval(tt.ds, 1)
			if !tt.want(iv) {
				t.Errorf("p99Interval = %+v", iv)
			}
			if again := p99Interval(tt.ds, 1); again != iv {
				t.Errorf("p99Interval with the same seed = %+v, then %+v", iv, again)
			}
		})
	}
}

func TestSecondWindows(t *testing.T) {
	t.Parallel()
	pos := []int64{0, 10, 20, 30, 70, 80}
	got := secondWindows(pos, 2)
	want := []float64{20, 20, 50, 50}
	if len(got) != len(want) {
		t.Fatalf("secondWindows = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("secondWindows = %v, want %v", got, want)
		}
	}
	if p95, mean := percentileF(got, 0.95), meanF(got); p95 != 50 || mean != 35 {
		t.Errorf("p95 %v, mean %v; want 50, 35", p95, mean)
	}
}
