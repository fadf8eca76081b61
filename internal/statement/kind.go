package statement

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
	// Kinds is the number of kinds: a Set per kind is built for each pass.
	Kinds
)

// String is the kind's column type, as the golden files and the templates name it.
func (k Kind) String() string {
	return [...]string{"timestamptz", "timestamp", "date"}[k]
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

// KindsSQL reads the type of each (table, column), a domain read as its base type, as
// format_type writes it; "" when the table or the column does not exist.
const KindsSQL = `
SELECT coalesce((
  SELECT format_type(CASE WHEN ty.typtype = 'd' THEN ty.typbasetype ELSE ty.oid END, NULL)
  FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
  WHERE a.attrelid = to_regclass(x.tbl) AND a.attname = x.col AND a.attnum > 0 AND NOT a.attisdropped), '')
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(tbl, col, i)
ORDER BY x.i`

// ReadKinds learns the kind of each pass's age column from the catalog, in one query, as the
// statements will resolve the table (schema-qualified, or on the search_path).
func ReadKinds(ctx context.Context, pool *pgxpool.Pool, passes []policy.Pass) ([]Kind, error) {
	tables, columns := make([]string, len(passes)), make([]string, len(passes))
	for i, p := range passes {
		tables[i], columns[i] = QuoteName(p.Table), p.AgeColumn
	}
	rows, err := pool.Query(ctx, KindsSQL, tables, columns)
	if err != nil {
		return nil, fmt.Errorf("read age column types: %w", err)
	}
	kinds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Kind, error) {
		var typ string
		err := r.Scan(&typ)
		return KindOf(typ), err
	})
	if err != nil {
		return nil, fmt.Errorf("read age column types: %w", err)
	}
	return kinds, nil
}

// ReadColumns reads the columns of table, in order, as the statements resolve it
// (schema-qualified, or on the search_path): the list a run's archive statements name.
func ReadColumns(ctx context.Context, pool *pgxpool.Pool, table string) ([]string, error) {
	var cols []string
	err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(a.attname::text ORDER BY a.attnum), '{}')
FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`,
		QuoteName(table)).Scan(&cols)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("table %q does not exist (or has no columns)", table)
	}
	return cols, nil
}
