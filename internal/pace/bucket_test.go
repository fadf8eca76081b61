package pace

import (
	"testing"
	"time"
)

const mib = 1 << 20

func TestBucket(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type read struct {
		after time.Duration
		lsn   int64
		want  time.Duration
	}
	tests := []struct {
		name  string
		reads []read
	}{
		{"the first read only marks", []read{{0, 1000 * mib, 0}}},
		{"WAL within what time earned waits for nothing", []read{{0, 0, 0}, {time.Second, mib, 0}}},
		{"an overdraft waits until it is paid", []read{{0, 0, 0}, {0, mib / 2, 500 * time.Millisecond}}},
		{"idle time saves at most the burst", []read{{0, 0, 0}, {time.Hour, 0, 0}, {0, mib / 8, 0}, {0, mib/8 + mib/4, 250 * time.Millisecond}}},
		{"old debt is forgiven past a second's budget", []read{{0, 0, 0}, {0, 100 * mib, time.Second}}},
		{"a position behind the mark charges nothing", []read{{0, mib, 0}, {0, mib / 2, 0}, {0, mib, 0}}},
		{"a wait served pays the debt", []read{{0, 0, 0}, {0, mib / 4, 250 * time.Millisecond}, {250 * time.Millisecond, mib / 4, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, now := newBucket(mib), t0
			for i, r := range tt.reads {
				now = now.Add(r.after)
				if got := b.observe(now, r.lsn); got != r.want {
					t.Fatalf("read %d (%s later, at %d): wait %s, want %s", i, r.after, r.lsn, got, r.want)
				}
			}
		})
	}
}

func TestRowsFor(t *testing.T) {
	t.Parallel()
	b := newBucket(8 * mib)
	tests := []struct {
		name        string
		bytesPerRow float64
		hi, want    int
	}{
		{"unknown cost keeps the bound", 0, 20000, 20000},
		{"a batch within the burst", 100, 50000, mib / 100},
		{"the bound when lower", 100, 1000, 1000},
		{"at least one row", 10 * mib, 1000, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := b.rowsFor(tt.bytesPerRow, tt.hi); got != tt.want {
				t.Errorf("rowsFor(%v, %d) = %d, want %d", tt.bytesPerRow, tt.hi, got, tt.want)
			}
		})
	}
	if got := newBucket(0).rowsFor(100, 7); got != 7 {
		t.Errorf("rate off: rowsFor = %d, want the bound 7", got)
	}
}

// TestBucketWindows drives a simulated drain through the bucket, batches sized as MaxRows sizes
// them, beside a steady writer: every one-second window stays within 1.25 × the budget, and the
// drain uses most of what the other writer leaves.
func TestBucketWindows(t *testing.T) {
	t.Parallel()
	const rate = 16 * mib
	tests := []struct {
		name      string
		batchTook time.Duration
		bytesRow  float64
		otherRate float64 // bytes per second another writer adds
		wantShare float64 // of the budget, the least the whole server's mean reaches
	}{
		{"alone, fast batches", 5 * time.Millisecond, 150, 0, 0.9},
		{"alone, slow batches", 60 * time.Millisecond, 150, 0, 0.9},
		{"beside a writer of a quarter of the budget", 10 * time.Millisecond, 150, rate / 4, 0.9},
		{"beside a writer over the budget", 10 * time.Millisecond, 150, 2 * rate, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBucket(rate)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			start := now
			var lsn float64
			type point struct {
				at  time.Time
				lsn float64
			}
			var points []point
			advance := func(d time.Duration) {
				// The other writer's WAL arrives evenly; sample every millisecond.
				for step := time.Millisecond; d > 0; d -= step {
					step = min(step, d)
					now = now.Add(step)
					lsn += tt.otherRate * step.Seconds()
					points = append(points, point{now, lsn})
				}
			}
			rail := 0.0
			for now.Sub(start) < 20*time.Second {
				for w := b.observe(now, int64(lsn)); w > 0 && now.Sub(start) < 20*time.Second; w = b.observe(now, int64(lsn)) {
					advance(w)
				}
				rows := b.rowsFor(tt.bytesRow, 50000)
				advance(tt.batchTook)
				lsn += float64(rows) * tt.bytesRow
				rail += float64(rows) * tt.bytesRow
				points = append(points, point{now, lsn})
			}
			var peak float64
			for i, j := 0, 0; i < len(points); i++ {
				for j < len(points) && points[j].at.Sub(points[i].at) <= time.Second {
					j++
				}
				peak = max(peak, points[j-1].lsn-points[i].lsn)
			}
			total := lsn / now.Sub(start).Seconds()
			if tt.otherRate <= rate && peak > 1.25*rate*1.01 {
				t.Errorf("peak one-second window %.2f × the budget, want ≤ 1.25", peak/rate)
			}
			if total < tt.wantShare*rate {
				t.Errorf("mean %.2f × the budget, want ≥ %.2f", total/rate, tt.wantShare)
			}
			if tt.otherRate > rate && rail > 0.05*rate*now.Sub(start).Seconds() {
				t.Errorf("beside a writer over the budget the rail wrote %.2f × the budget, want almost nothing", rail/rate/now.Sub(start).Seconds())
			}
		})
	}
}
