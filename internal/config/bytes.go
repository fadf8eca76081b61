package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteUnits are the suffixes a Rate takes, binary as PostgreSQL's own sizes are.
var byteUnits = []struct {
	suffix string
	size   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// Rate is a number of bytes per second, written as a whole number of bytes or with a binary
// unit: "16MiB", "512KiB", "16777216"; an optional "/s" ends it.
type Rate int64

// UnmarshalText parses text as a Rate. kB, MB and GB are refused: PostgreSQL reads them as
// binary units and most other tools as decimal ones, and a budget should not be a guess.
func (r *Rate) UnmarshalText(text []byte) error {
	s := strings.TrimSuffix(strings.TrimSpace(string(text)), "/s")
	num, unit := s, int64(1)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, unit = n, u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return fmt.Errorf("invalid byte rate %q: want whole bytes per second, or with KiB, MiB or GiB, such as 16MiB", text)
	}
	*r = Rate(n * unit)
	return nil
}
