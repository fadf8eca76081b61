package replica

import (
	"sync"
	"time"
)

// maxSamples bounds a walClock's history: at a read per batch and per recheck, hours of a
// standby that never catches up.
const maxSamples = 100_000

// walClock dates WAL positions by the throttle's own reads, since replay_lag says how late the
// last replayed WAL was, not how old the oldest unreplayed WAL is (docs/CRON.md, "Replica lag"). A
// standby replayed up to p is behind by at least the time since the first read past p, short by
// at most one batch. The clock also keeps each standby's replay rate over the last second to
// project its catch-up (catchUp), so the throttle acts before the standby is a limit behind.
type walClock struct {
	mu      sync.Mutex
	samples []walSample
	replays map[string][]replaySample
}

// replaySample is a standby's replay position at a read, and how much it had left to replay.
type replaySample struct {
	at       time.Time
	replayed int64
	backlog  int64
}

// The window of the replay rate, the least span a rate is computed over (a rate over one batch
// swings between nothing and full speed), and the projection of a standby that replays nothing.
const (
	rateWindow   = time.Second
	minRateSpan  = 200 * time.Millisecond
	stalledCatch = time.Hour
)

type walSample struct {
	pos int64
	at  time.Time
}

// date records the position of a read at now, and sets the Behind of each standby in lags.
func (c *walClock) date(lags []Lag, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// step is the WAL written since the previous read: about one batch's, which the caller is
	// about to write again.
	var step int64
	if len(lags) > 0 && len(c.samples) > 0 {
		step = max(lags[0].Position-c.samples[len(c.samples)-1].pos, 0)
	}
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
		lags[i].CatchUp = c.catchUp(lags[i].Name, replayed, lags[i].Bytes, step, now)
		if oldest < 0 || replayed < oldest {
			oldest = replayed
		}
	}
	c.prune(oldest)
}

// catchUp records standby name's replay position and projects how long it will take to replay
// bytes plus step (the next batch's WAL) at the rate it replayed over the last second while it
// had WAL left (nothing to replay is no sign of slowness). It is 0 until that span reaches
// minRateSpan, and stalledCatch for a standby that replayed nothing since.
func (c *walClock) catchUp(name string, replayed, bytes, step int64, now time.Time) time.Duration {
	if c.replays == nil {
		c.replays = map[string][]replaySample{}
	}
	h := c.replays[name]
	for len(h) > 0 && now.Sub(h[0].at) > rateWindow {
		h = h[1:]
	}
	var out time.Duration
	for _, s := range h {
		if s.backlog <= 0 {
			continue
		}
		span := now.Sub(s.at)
		if span < minRateSpan {
			break
		}
		progressed := replayed - s.replayed
		if progressed <= 0 {
			out = stalledCatch
			break
		}
		out = time.Duration(float64(bytes+step) / float64(progressed) * float64(span))
		break
	}
	c.replays[name] = append(h, replaySample{at: now, replayed: replayed, backlog: bytes})
	return out
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
