package main

import (
	"math/rand/v2"
	"slices"
	"time"
)

// The frontier's statistics: a p99 with its 95% confidence interval by a moving-block bootstrap,
// and the WAL of one-second windows.
const (
	// bootResamples is how many resamples an interval is taken from.
	bootResamples = 1000
	// bootBlock is the block the bootstrap resamples, in consecutive operations of one worker
	// (one second of its operations): a stall delays every operation behind it, so operations
	// next to each other are not independent, and resampling them one by one would make the
	// interval too narrow.
	bootBlock = 100
)

// interval is an estimate and its 95% confidence interval.
type interval struct {
	est, lo, hi time.Duration
}

// p99Interval is the nearest-rank p99 of ds and its block-bootstrap 95% interval. ds is in the
// order operations completed, worker by worker (as fgRun.stop returns them); seed makes the
// resamples the same from run to run of the report.
func p99Interval(ds []time.Duration, seed uint64) interval {
	iv := interval{est: percentile(ds, 0.99)}
	if len(ds) < 2*bootBlock {
		iv.lo, iv.hi = iv.est, iv.est
		return iv
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	starts := len(ds) - bootBlock + 1
	ests := make([]time.Duration, bootResamples)
	sample := make([]time.Duration, 0, len(ds)+bootBlock)
	for i := range ests {
		sample = sample[:0]
		for len(sample) < len(ds) {
			at := rng.IntN(starts)
			sample = append(sample, ds[at:at+bootBlock]...)
		}
		ests[i] = percentile(sample[:len(ds)], 0.99)
	}
	slices.Sort(ests)
	iv.lo, iv.hi = ests[bootResamples*25/1000], ests[bootResamples*975/1000-1]
	return iv
}

// secondWindows is the WAL written in each one-second window of positions sampled every
// 1/per of a second: every window that fits, sliding by one sample.
func secondWindows(pos []int64, per int) []float64 {
	var out []float64
	for i := 0; i+per < len(pos); i++ {
		out = append(out, float64(pos[i+per]-pos[i]))
	}
	return out
}

// percentileF is the nearest-rank percentile of xs (q in 0..1); 0 for none.
func percentileF(xs []float64, q float64) float64 {
	ds := make([]time.Duration, len(xs))
	for i, x := range xs {
		ds[i] = time.Duration(x)
	}
	return float64(percentile(ds, q))
}

func meanF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
