package config

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// day is the unit of ParseDays' "d" suffix: 24 hours, retention's natural unit (a calendar day
// across a DST change is not what a retention window means).
const day = 24 * time.Hour

// ParseDays parses a Go duration ("90s", "48h") or a whole number of days ("30d" is 720h), the
// syntax of retention windows. It checks syntax only: a zero or negative result is the caller's
// to refuse, so that "-30d" gets a message about its sign rather than its shape.
func ParseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days > math.MaxInt64/int64(day) || days < math.MinInt64/int64(day) {
			return 0, fmt.Errorf("invalid duration %q: want whole days such as 30d or a Go duration such as 48h", s)
		}
		return time.Duration(days) * day, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want whole days such as 30d or a Go duration such as 48h", s)
	}
	return d, nil
}

// parseRetention parses SWEEP_RETENTION, "<sweep>.<pass>=<duration>" entries separated by
// commas. Only the syntax is checked here; the sweep package knows the names and the floors.
// Every bad entry is named, so one boot shows them all.
func parseRetention(s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	var bad []string
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		k, v, found := strings.Cut(entry, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if entry == "" {
			bad = append(bad, "empty entry (a stray comma?)")
			continue
		}
		if !found || k == "" || strings.ContainsFunc(k, unicode.IsSpace) {
			bad = append(bad, fmt.Sprintf("entry %q: want <sweep>.<pass>=<duration> such as notifications.read=30d", entry))
			continue
		}
		d, err := ParseDays(v)
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("entry %q: %v", entry, err))
			continue
		case d <= 0:
			// A zero or negative window makes every row eligible: it would delete live data.
			bad = append(bad, fmt.Sprintf("entry %q: must be > 0", entry))
			continue
		}
		if _, dup := out[k]; dup {
			// Two values for one pass: which one the operator meant is a guess we refuse to make.
			bad = append(bad, fmt.Sprintf("entry %q: duplicate key %q", entry, k))
			continue
		}
		out[k] = d
	}
	if len(bad) > 0 {
		return nil, errors.New(strings.Join(bad, "; "))
	}
	return out, nil
}

// Environ turns os.Environ()-style "K=V" pairs into a map. As with os.Getenv, the first pair
// of a key wins; pairs without '=' or with an empty key (Windows' "=C:" entries) are skipped.
func Environ(pairs []string) map[string]string {
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			continue
		}
		if _, seen := out[k]; !seen {
			out[k] = v
		}
	}
	return out
}

// LogLevel is LOG_LEVEL, the lowest level the API logs. Its zero value is info, the default.
type LogLevel slog.Level

// UnmarshalText accepts exactly debug, info, warn or error, in any case. slog.Level's own parser
// also takes offsets such as "info+2", which an operator would only type by mistake, so a value
// outside the four refuses the boot rather than logging at a level nobody meant.
func (l *LogLevel) UnmarshalText(b []byte) error {
	switch strings.ToLower(string(b)) {
	case "debug":
		*l = LogLevel(slog.LevelDebug)
	case "info":
		*l = LogLevel(slog.LevelInfo)
	case "warn":
		*l = LogLevel(slog.LevelWarn)
	case "error":
		*l = LogLevel(slog.LevelError)
	default:
		return fmt.Errorf("invalid log level %q: want debug, info, warn or error", b)
	}
	return nil
}

// Level returns l as a slog.Level, for a handler's options.
func (l LogLevel) Level() slog.Level { return slog.Level(l) }

// WALCompression is BATCH_WAL_COMPRESSION, a value of PostgreSQL's wal_compression; empty keeps
// the server's.
type WALCompression string

// WALCompressions are the values of wal_compression the rail writes into a batch's SET LOCAL:
// off and on on every supported server (on is pglz), and from PostgreSQL 15 the method by name,
// each only where the server was built with it.
var WALCompressions = []string{"off", "on", "pglz", "lz4", "zstd"}

// UnmarshalText accepts exactly one of WALCompressions, in any case. The value is written into
// each batch's SET LOCAL, so nothing but these keywords may reach it.
func (w *WALCompression) UnmarshalText(b []byte) error {
	v := strings.ToLower(string(b))
	if !slices.Contains(WALCompressions, v) {
		return fmt.Errorf("invalid wal_compression %q: want off, on, pglz, lz4 or zstd", b)
	}
	*w = WALCompression(v)
	return nil
}

// Days is a duration written as ParseDays reads it: "90d" or "2160h".
type Days time.Duration

// UnmarshalText parses text with ParseDays.
func (d *Days) UnmarshalText(text []byte) error {
	v, err := ParseDays(string(text))
	if err != nil {
		return err
	}
	*d = Days(v)
	return nil
}
