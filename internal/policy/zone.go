package policy

import (
	"fmt"
	"regexp"
	"strings"
)

// The time zones of a pass that are not IANA names.
const (
	// TimeZoneUTC reads naive age columns in UTC: the default.
	TimeZoneUTC = "UTC"
	// TimeZoneDatabase reads them in the session's TimeZone setting (the database's default, or
	// the role's, or the connection's).
	TimeZoneDatabase = "database"
)

// zoneNameRE is the shape of an IANA zone name (Europe/Paris, America/Argentina/Buenos_Aires,
// Etc/GMT+5, UTC): it is written into the statements as a string literal, so it may hold no quote.
var zoneNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$`)

// checkTimeZone says why a pass's time_zone is refused, or "" when its shape is sound; whether the
// database knows the zone is the policy check's.
func checkTimeZone(tz string) string {
	switch {
	case tz == "" || tz == TimeZoneUTC || tz == TimeZoneDatabase:
		return ""
	case strings.EqualFold(tz, TimeZoneDatabase):
		return fmt.Sprintf("time_zone %q: write database, in lower case", tz)
	case !zoneNameRE.MatchString(tz):
		return fmt.Sprintf("time_zone %q is no zone name: want UTC (the default), database (the session's TimeZone) or an IANA name such as Europe/Paris", tz)
	}
	return ""
}

// The units of Unix time an integer or numeric age column may hold (age_unit).
const (
	AgeSeconds      = "seconds"
	AgeMilliseconds = "milliseconds"
	AgeMicroseconds = "microseconds"
)

// checkAgeUnit says why a pass's age_unit is refused, or "" when it is empty or a unit; whether
// the column is a number is the schema check's.
func checkAgeUnit(unit string) string {
	switch unit {
	case "", AgeSeconds, AgeMilliseconds, AgeMicroseconds:
		return ""
	}
	return fmt.Sprintf("age_unit %q is no unit: want seconds, milliseconds or microseconds (of Unix time, since 1970-01-01 UTC)", unit)
}
