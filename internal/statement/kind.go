package statement

import (
	"time"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// The age test, t.<age_column> < <cutoff>. Every statement binds $1 as a timestamptz, the
// cutoff instant (the run's reference time minus the retention), and each kind of age column
// compares with it as its type must (sql/predicate.sql): a timestamptz with the instant, a
// timestamp or a date with the wall clock of the pass's time_zone, a number of Unix time
// (age_unit) with the instant in its unit. The type is read from the catalog at each run
// (ReadKinds), so a column migrated under a running server is compared right from the next run.

// Kind is how an age column compares with the cutoff.
type Kind int

const (
	// Instant is a timestamptz column, and a column whose type is unknown (the table or the
	// column is missing: the statement then fails naming what is missing).
	Instant Kind = iota
	// WallClock is a timestamp without time zone.
	WallClock
	// Calendar is a date.
	Calendar
	// EpochSeconds, EpochMilliseconds and EpochMicroseconds are an integer or numeric column of
	// Unix time in that unit (the pass's age_unit).
	EpochSeconds
	EpochMilliseconds
	EpochMicroseconds
	// Kinds is the number of kinds: a Set per kind is built for each pass.
	Kinds
)

// String is the kind's column type, as the golden files and the templates name it.
func (k Kind) String() string {
	return [...]string{"timestamptz", "timestamp", "date", "epoch-seconds", "epoch-milliseconds", "epoch-microseconds"}[k]
}

// Epoch reports whether the kind is a number of Unix time.
func (k Kind) Epoch() bool { return k >= EpochSeconds && k <= EpochMicroseconds }

// perSecond is how many of the kind's units make a second; 0 for a kind that is no number.
func (k Kind) perSecond() int64 {
	switch k {
	case EpochSeconds:
		return 1
	case EpochMilliseconds:
		return 1000
	case EpochMicroseconds:
		return 1000000
	}
	return 0
}

// EpochOf is the cutoff instant as an age column of kind k compares with it: the whole units of
// Unix time before it (rounded down, as the statements do), the value the answers show next to
// the instant. It is 0 for a kind that is no number.
func EpochOf(k Kind, cutoff time.Time) int64 {
	per := k.perSecond()
	if per == 0 {
		return 0
	}
	// The statements see the cutoff as PostgreSQL holds it: whole microseconds.
	us := cutoff.Truncate(time.Microsecond).UnixMicro()
	step := 1000000 / per
	q := us / step
	if us%step < 0 {
		q--
	}
	return q
}

// KindOfUnit is the kind of an age column of Unix time in unit (a policy's age_unit), and
// ok false for "" or an unknown unit.
func KindOfUnit(unit string) (k Kind, ok bool) {
	switch unit {
	case policy.AgeSeconds:
		return EpochSeconds, true
	case policy.AgeMilliseconds:
		return EpochMilliseconds, true
	case policy.AgeMicroseconds:
		return EpochMicroseconds, true
	}
	return Instant, false
}

// KindsOf is the kinds pass p's age column may compare as: its age_unit's, or the three of a
// date or time column, which the catalog tells apart at each run.
func KindsOf(p policy.Pass) []Kind {
	if k, ok := KindOfUnit(p.AgeUnit); ok {
		return []Kind{k}
	}
	return []Kind{Instant, WallClock, Calendar}
}

// PassKind is the kind pass p's age column compares as, its type read as baseType (as KindOf
// takes it): the pass's age_unit says so for a number of Unix time, the type otherwise.
func PassKind(p policy.Pass, baseType string) Kind {
	if k, ok := KindOfUnit(p.AgeUnit); ok {
		return k
	}
	return KindOf(baseType)
}

// NullCutoff is what :cutoff becomes where no parameter can stand (a view), for an age column of
// kind k: a NULL of the type the cutoff has in its pass's conditions.
func NullCutoff(k Kind) string {
	if k.Epoch() {
		return "(NULL::bigint)"
	}
	return policy.CutoffConst
}

// Condition is a where condition of a pass whose age column is of kind k, its :cutoff bound: the
// cutoff instant, or for a number of Unix time the integer the age column compares with.
func Condition(where string, k Kind) string {
	if k.Epoch() {
		return policy.SubstituteCutoff(where, "("+render("epoch-cutoff", k.perSecond())+")")
	}
	return policy.WithCutoff(where)
}

// KindOf maps a column's type, as the checker reads it (format_type of its base type), to its kind.
func KindOf(baseType string) Kind {
	switch baseType {
	case "timestamp without time zone":
		return WallClock
	case "date":
		return Calendar
	}
	return Instant
}
