package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteUnits are the suffixes a Rate or a Size takes, binary as PostgreSQL's own sizes are.
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
	n, ok := parseBytes(strings.TrimSuffix(strings.TrimSpace(string(text)), "/s"))
	if !ok {
		return fmt.Errorf("invalid byte rate %q: want whole bytes per second, or with KiB, MiB or GiB, such as 16MiB", text)
	}
	*r = Rate(n)
	return nil
}

// Size is a number of bytes, written as a whole number of bytes or with a binary unit:
// "256KiB", "2MiB", "262144".
type Size int64

// UnmarshalText parses text as a Size; as with a Rate, kB and MB are refused.
func (z *Size) UnmarshalText(text []byte) error {
	n, ok := parseBytes(strings.TrimSpace(string(text)))
	if !ok {
		return fmt.Errorf("invalid size %q: want whole bytes, or with KiB, MiB or GiB, such as 256KiB", text)
	}
	*z = Size(n)
	return nil
}

// parseBytes reads s as a whole, non-negative number of bytes with an optional unit of
// byteUnits.
func parseBytes(s string) (int64, bool) {
	num, unit := s, int64(1)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, unit = n, u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return 0, false
	}
	return n * unit, true
}
