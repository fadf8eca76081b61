package pace

import (
	"math"
	"time"
)

// burstShare is the bucket's burst, and the most WAL one batch is sized to write, as a share of
// one second's budget. A one-second window holds the second's budget, what the bucket saved
// (at most the burst) and the batch that overdraws it: 1 + 1/8 + 1/8 = 1.25 × the budget.
const burstShare = 0.125

// debtShare bounds what the bucket owes, as a share of one second's budget. WAL that the
// application wrote over the budget long ago is no reason for a wait now: debt older than a
// second is forgiven, and a server that keeps writing over the budget keeps the rail waiting.
const debtShare = 1.0

// bucket is a token bucket over WAL bytes: it earns rate bytes a second, up to burst, and
// spends the WAL the server wrote between two reads of its position. A batch starts only when
// the bucket owes nothing.
type bucket struct {
	rate, burst, floor float64
	tokens             float64
	pos                int64
	at                 time.Time
	primed             bool
}

func newBucket(rate int64) bucket {
	r := float64(rate)
	return bucket{rate: r, burst: burstShare * r, floor: -debtShare * r}
}

// observe charges the WAL written up to position lsn, read at now, credits the time since the
// last read, and returns how long the next batch must wait for the bucket to owe nothing. The
// first read only sets the mark. A position behind the last one (two passes' reads crossing)
// charges nothing and leaves the mark.
func (b *bucket) observe(now time.Time, lsn int64) time.Duration {
	if !b.primed {
		b.pos, b.at, b.primed = lsn, now, true
		return 0
	}
	if elapsed := now.Sub(b.at); elapsed > 0 {
		b.tokens += elapsed.Seconds() * b.rate
		b.at = now
	}
	if lsn > b.pos {
		b.tokens -= float64(lsn - b.pos)
		b.pos = lsn
	}
	b.tokens = min(max(b.tokens, b.floor), b.burst)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(math.Ceil(-b.tokens / b.rate * float64(time.Second)))
}

// rowsFor is the most rows a batch may delete for its WAL to stay within the burst, at
// bytesPerRow; hi when that is not known yet, at least 1.
func (b bucket) rowsFor(bytesPerRow float64, hi int) int {
	if bytesPerRow <= 0 || b.rate <= 0 {
		return hi
	}
	return max(1, min(hi, int(b.burst/bytesPerRow)))
}
