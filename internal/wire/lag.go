package wire

import "time"

// The sources of a Lag.
const (
	// LagRead: the lag was read from the age index at the end of the run.
	LagRead = "index"
	// LagSeen: the pass has no index to read it from (allow_unindexed, or partitions kept whole),
	// or the read failed; the lag is what the run saw: 0 when the pass left nothing eligible,
	// unknown (Seconds nil) when it stopped with rows left.
	LagSeen = "run"
)

// Lag is how far past its cutoff the oldest row a pass would delete still is, in seconds: 0
// when none is left. The cutoff is the run's (its reference time minus the retention).
type Lag struct {
	// Seconds is nil when the lag is unknown (Source LagSeen, rows left).
	Seconds *float64 `json:"seconds"`
	// MeasuredAt is when it was taken: the run's end, in UTC.
	MeasuredAt time.Time `json:"measuredAt"`
	// Source says how: LagRead or LagSeen.
	Source string `json:"source"`
	// Error is why the read failed, for a LagSeen that had an index to read.
	Error string `json:"error,omitempty"`
}
