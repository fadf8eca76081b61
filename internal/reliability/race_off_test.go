//go:build !race

package reliability

// raceEnabled: this test binary runs without -race.
const raceEnabled = false
