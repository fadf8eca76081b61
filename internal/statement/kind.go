package statement

import (
	"time"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// The age test, `t.<age_column> < <cutoff>`, and what the cutoff is for each type of age column.
//
// Every statement binds $1 as a timestamptz: the cutoff instant, the run's reference time (the
// database's now() when the run began) minus the pass's retention. A timestamptz column is
// compared with that instant. A date or a timestamp without time zone holds no instant, only a
// calendar day or a wall-clock reading, so the pass's time_zone says whose calendar and clock:
// the cutoff is then the reference time's wall clock in that zone minus the retention, in
// wall-clock arithmetic (1d is 24 wall-clock hours, across a daylight-saving change too), and for a
// date column that wall-clock cutoff's date. With retention 1d, a date column keeps today and
// yesterday of that zone, whatever the hour, and a day's rows go when its day after next begins.
//
// The SQL differs by column type, and a Runner is built without a database, so the type is
// learned from the catalog at the start of each run and dry run (one query for all the passes of
// the sweep: a column migrated from timestamp to timestamptz under a running server is compared
// correctly from the next run on), and the policy check learns it with the rest of the columns.
// One expression for all three types cannot exist: a timestamptz column must be compared with an
// instant and a date column with a date (compared with a timestamp, the cross-type operator reads
// the date as its midnight, a day off), and a bare $1 whose type the planner infers from the
// column cannot also be the timestamptz that :cutoff names in a condition (the planner refuses a
// parameter used as two types). Every comparison is between an age column and an expression of
// stable functions of $1, so an index on the age column serves it as it serves t.<age> < $1.
//
// An integer or numeric column holding Unix time (a pass's age_unit) is compared with the cutoff
// instant in the column's unit, floor(extract(epoch FROM $1) * <per second>)::bigint: exact
// (extract answers a numeric), worked out once per statement, and an integer, so that the btree
// index on the column serves it (a numeric column reads it as a numeric). A :cutoff in the pass's
// conditions is that integer too, so a condition compares with the age column as written.

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
