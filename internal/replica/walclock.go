package replica

import (
	"sync"
	"time"
)

// maxSamples bounds a walClock's history: at a read per batch and per recheck, hours of a
// standby that never catches up.
const maxSamples = 100_000

// walClock dates WAL positions by the throttle's own reads, to tell how far behind a standby is
// in time while it is behind.
//
// PostgreSQL's replay_lag cannot: the primary computes it only from a standby's reports of WAL it
// has replayed, so it says how late the last replayed WAL was, not how old the oldest unreplayed
// WAL is. A standby that stops replaying (a long query on it, a slow disk) shows the replay_lag it
// had, and a drain shorter than MAX_REPLICA_LAG never sees it pass (make bench measured a 1s limit
// let a slow standby fall 3s behind). So each read records the primary's WAL position with the
// time; a standby replayed up to position p is behind by at least the time since the first read
// whose position was past p: the oldest WAL it has not replayed was written after the read before
// that one. Reads come before every batch, so the estimate is short by at most one batch.
type walClock struct {
	mu      sync.Mutex
	samples []walSample
}

type walSample struct {
	pos int64
	at  time.Time
}

// date records the position of a read at now, and sets the Behind of each standby in lags.
func (c *walClock) date(lags []Lag, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(lags) > 0 && (len(c.samples) == 0 || lags[0].Position > c.samples[len(c.samples)-1].pos) {
		c.samples = append(c.samples, walSample{pos: lags[0].Position, at: now})
	}
	oldest := int64(-1) // the least replayed position of any standby: older samples are not needed
	for i := range lags {
		if lags[i].Kind != KindStandby || lags[i].Bytes <= 0 {
			continue
		}
		replayed := lags[i].Position - lags[i].Bytes
		lags[i].Behind = c.behind(replayed, now)
		if oldest < 0 || replayed < oldest {
			oldest = replayed
		}
	}
	c.prune(oldest)
}

// behind is how long ago the first read past position replayed was made: 0 when none was.
func (c *walClock) behind(replayed int64, now time.Time) time.Duration {
	for _, s := range c.samples {
		if s.pos > replayed {
			return max(now.Sub(s.at), 0)
		}
	}
	return 0
}

// prune keeps the samples that can still date a standby's position: those past oldest (all of
// them when no standby is behind, -1, bar the newest), and at most maxSamples.
func (c *walClock) prune(oldest int64) {
	keep := 0
	switch {
	case oldest < 0:
		keep = max(len(c.samples)-1, 0)
	default:
		for keep < len(c.samples) && c.samples[keep].pos <= oldest {
			keep++
		}
	}
	keep = max(keep, len(c.samples)-maxSamples)
	c.samples = append(c.samples[:0], c.samples[keep:]...)
}
