package sweep

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// The time zones of a pass that are not IANA names.
const (
	// TimeZoneUTC reads naive age columns in UTC: the default.
	TimeZoneUTC = "UTC"
	// TimeZoneDatabase reads them in the session's TimeZone setting (the database's default, or
	// the role's, or the connection's).
	TimeZoneDatabase = "database"
)

// ageKind is how an age column compares with the cutoff.
type ageKind int

const (
	// kindInstant is a timestamptz column, and a column whose type is unknown (the table or the
	// column is missing: the statement then fails naming what is missing).
	kindInstant ageKind = iota
	// kindWallClock is a timestamp without time zone.
	kindWallClock
	// kindCalendar is a date.
	kindCalendar
	ageKinds
)

func (k ageKind) String() string {
	return [...]string{"timestamptz", "timestamp", "date"}[k]
}

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

// zoneSQL is the zone of p as SQL: a literal, or the session's setting.
func zoneSQL(p Pass) string {
	switch p.TimeZone {
	case "", TimeZoneUTC:
		return "'UTC'"
	case TimeZoneDatabase:
		return "current_setting('TimeZone')"
	}
	return "'" + strings.ReplaceAll(p.TimeZone, "'", "''") + "'"
}

// intervalSQL writes d as an interval of seconds (or microseconds), never of days: added to a
// timestamptz, a day is 23 or 25 hours across a daylight-saving change, and the reference time
// must come back exact.
func intervalSQL(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("interval '%d seconds'", d/time.Second)
	}
	return fmt.Sprintf("interval '%d microseconds'", d/time.Microsecond)
}

// ageTest is the age test of p over alias t for an age column of kind k: see the top of this file.
// $1 + retention is the reference time exactly (the cutoff is the reference time minus the
// retention, and the interval holds no days).
func ageTest(p Pass, k ageKind) string {
	age := "t." + pgx.Identifier{p.AgeColumn}.Sanitize()
	wall := fmt.Sprintf("((($1::timestamptz + %[1]s) AT TIME ZONE %[2]s) - %[1]s)", intervalSQL(p.Retention), zoneSQL(p))
	switch k {
	case kindWallClock:
		return age + " < " + wall
	case kindCalendar:
		return age + " < " + wall + "::date"
	}
	return age + " < $1::timestamptz"
}

// kindOf maps a column's type, as the checker reads it (format_type of its base type), to its kind.
func kindOf(baseType string) ageKind {
	switch baseType {
	case "timestamp without time zone":
		return kindWallClock
	case "date":
		return kindCalendar
	}
	return kindInstant
}

// ageKindsSQL reads the type of each (table, column), a domain read as its base type, as
// format_type writes it; "" when the table or the column does not exist.
const ageKindsSQL = `
SELECT coalesce((
  SELECT format_type(CASE WHEN ty.typtype = 'd' THEN ty.typbasetype ELSE ty.oid END, NULL)
  FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
  WHERE a.attrelid = to_regclass(x.tbl) AND a.attname = x.col AND a.attnum > 0 AND NOT a.attisdropped), '')
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(tbl, col, i)
ORDER BY x.i`

// readAgeKinds learns the kind of each pass's age column from the catalog, in one query, as the
// statements will resolve the table (schema-qualified, or on the search_path).
func readAgeKinds(ctx context.Context, pool *pgxpool.Pool, passes []Pass) ([]ageKind, error) {
	tables, columns := make([]string, len(passes)), make([]string, len(passes))
	for i, p := range passes {
		tables[i], columns[i] = quoteQualified(p.Table), p.AgeColumn
	}
	rows, err := pool.Query(ctx, ageKindsSQL, tables, columns)
	if err != nil {
		return nil, fmt.Errorf("read age column types: %w", err)
	}
	kinds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ageKind, error) {
		var typ string
		err := r.Scan(&typ)
		return kindOf(typ), err
	})
	if err != nil {
		return nil, fmt.Errorf("read age column types: %w", err)
	}
	return kinds, nil
}

// statementsFor returns the statements of each pass of sweep name for its age column's type as
// the catalog has it now, and that type.
func (r *Runner) statementsFor(ctx context.Context, name string) ([]statements, []ageKind, error) {
	spec := r.byName[name]
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Settings.StatementTimeout)
	defer cancel()
	kinds, err := readAgeKinds(ctx, r.cfg.Pool, spec.Passes)
	if err != nil {
		return nil, nil, err
	}
	out := make([]statements, len(spec.Passes))
	for i, k := range kinds {
		out[i] = r.stmts[name][i][k]
	}
	return out, kinds, nil
}
