//go:build race

package reliability

// raceEnabled: this test binary runs under -race, so the binaries it builds for the long tests
// are built with -race too.
const raceEnabled = true
