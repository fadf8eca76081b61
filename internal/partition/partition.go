// Package partition owns retention by whole partitions: the partitions of a table partitioned by
// RANGE on one time column, which of them a cutoff expires, and dropping one (detach, then drop)
// under a lock timeout, so that a held lock costs an error, not a hang. It knows nothing of
// sweeps or budgets: the caller drops one partition at a time. The server reads every bound (List
// pins DateStyle and TimeZone and casts the catalog's text back to the key's type): such text
// does not always read back as written (IST names another zone on input), and Go parses none.
package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Querier is what List and Describe need of a pool, a connection or a transaction (in which List
// works in a savepoint it rolls back).
type Querier interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// KeyType is the type of a partition key column, as format_type names it (the base type, for a
// domain).
type KeyType string

// The key types whose bounds compare with a cutoff.
const (
	KeyTimestamptz KeyType = "timestamp with time zone"
	KeyTimestamp   KeyType = "timestamp without time zone"
	KeyDate        KeyType = "date"
)

// The integer key types, which compare with a cutoff as Unix time in a pass's age_unit.
const (
	KeySmallint KeyType = "smallint"
	KeyInteger  KeyType = "integer"
	KeyBigint   KeyType = "bigint"
)

// Temporal reports whether the key compares with a cutoff instant.
func (k KeyType) Temporal() bool {
	return k == KeyTimestamptz || k == KeyTimestamp || k == KeyDate
}

// Integer reports whether the key is an integer, which compares with a cutoff as a number of Unix
// time (ExpiredEpoch).
func (k KeyType) Integer() bool {
	return k == KeySmallint || k == KeyInteger || k == KeyBigint
}

// Bound is one end of a partition's range.
type Bound struct {
	// Time is the bound's value when Infinite is 0. A timestamp or date bound is its wall clock
	// read as UTC, as pgx reads such a value. Number is it for an integer key.
	Time   time.Time
	Number int64
	// Infinite is -1 for MINVALUE or -infinity, +1 for MAXVALUE or infinity, 0 for a finite bound.
	Infinite int
	// SQL is the bound as the catalog shows it with DateStyle ISO and TimeZone UTC: a quoted
	// literal, MINVALUE or MAXVALUE.
	SQL string
}

// String is the bound for messages.
func (b Bound) String() string {
	switch {
	case b.Infinite < 0:
		return "MINVALUE"
	case b.Infinite > 0:
		return "MAXVALUE"
	}
	if b.Time.IsZero() {
		return fmt.Sprint(b.Number)
	}
	return b.Time.UTC().Format(time.RFC3339Nano)
}

// Partition is one partition of a range-partitioned table, as List read it.
type Partition struct {
	// OID identifies the partition across renames: Drop acts on what this OID names at the time.
	OID uint32
	// Name and Parent are schema-qualified and quoted where needed (quote_ident): ready for SQL,
	// readable in messages.
	Name   string
	Parent string
	// ParentOID identifies the table: Drop leaves alone a partition since moved elsewhere.
	ParentOID uint32
	// Key is the type of the partition key column.
	Key KeyType
	// Lower (inclusive) and Upper (exclusive) are the range; zero for the default partition.
	Lower, Upper Bound
	// Default marks the DEFAULT partition: it holds every row no range does, of any age.
	Default bool
	// DetachPending marks a partition whose DETACH … CONCURRENTLY was interrupted: it is gone
	// from the table's queries but still in the catalog; FinalizeStatement finishes it.
	DetachPending bool
	// SubPartitioned marks a partition that is itself partitioned; Describe refuses such a table.
	SubPartitioned bool
	// Rows is the planner's row estimate (pg_class.reltuples); -1 when the partition was never
	// vacuumed or analyzed.
	Rows int64
}

// FinalizeStatement is the statement that finishes an interrupted DETACH … CONCURRENTLY of p.
func (p Partition) FinalizeStatement() string {
	return fmt.Sprintf("ALTER TABLE %s DETACH PARTITION %s FINALIZE", p.Parent, p.Name)
}

// ErrNotPartitioned is wrapped by List's error for a table that is not partitioned by RANGE on
// one time or integer column (Describe says why, as a *RefusedError).
var ErrNotPartitioned = errors.New("not range-partitioned on one time or integer column")

// boundPattern matches a one-column range bound; a multi-column one does not match, and its bounds
// stay unread (List refuses the table on its key before it gets there).
// An integer bound is written bare when it is a positive int4, quoted otherwise.
const boundPattern = `^FOR VALUES FROM \((MINVALUE|MAXVALUE|'(?:[^']|'')*'|[0-9]+)\) TO \((MINVALUE|MAXVALUE|'(?:[^']|'')*'|[0-9]+)\)$`

// boundValue casts one bound literal (lit: text, MINVALUE, MAXVALUE or NULL) back to the key's type
// (key: a regtype), as a timestamptz: a timestamp or date is read as UTC, as pgx reads one.
// Another key type yields NULL, so no cast can fail.
func boundValue(lit, key string) string {
	unquoted := fmt.Sprintf("replace(substr(%[1]s, 2, length(%[1]s) - 2), '''''', '''')", lit)
	return fmt.Sprintf(`CASE WHEN %[1]s IS NULL OR %[1]s IN ('MINVALUE', 'MAXVALUE') THEN NULL
     WHEN %[2]s = 'timestamptz'::regtype THEN %[3]s::timestamptz
     WHEN %[2]s = 'timestamp'::regtype THEN %[3]s::timestamp AT TIME ZONE 'UTC'
     WHEN %[2]s = 'date'::regtype THEN %[3]s::date::timestamp AT TIME ZONE 'UTC' END`, lit, key, unquoted)
}

// boundNumber casts one bound literal of an integer key back to a bigint; NULL for another key,
// MINVALUE and MAXVALUE.
func boundNumber(lit, key string) string {
	return fmt.Sprintf(`CASE WHEN %[1]s IS NULL OR %[1]s IN ('MINVALUE', 'MAXVALUE') THEN NULL
     WHEN %[2]s IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype) THEN btrim(%[1]s, '''')::bigint END`, lit, key)
}

// keyTypes are the key types List reads, as SQL.
const keyTypes = `('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype, 'smallint'::regtype, 'integer'::regtype, 'bigint'::regtype)`

// keyCTE reads the partition key of the table named $1 (as written in a policy: name or
// schema.name, resolved on the search_path as a statement would).
const keyCTE = `
WITH parent AS (
  SELECT pt.partrelid, pt.partstrat::text AS strat, pt.partnatts, pt.partdefid,
         pt.partattrs::int2[] AS attrs, pg_get_partkeydef(pt.partrelid) AS keydef,
         format('%I.%I', n.nspname, c.relname) AS name,
         COALESCE(NULLIF(ty.typbasetype, 0), ty.oid)::regtype AS keytype
  FROM pg_partitioned_table pt
  JOIN pg_class c ON c.oid = pt.partrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = pt.partattrs[0] AND pt.partattrs[0] <> 0
  LEFT JOIN pg_type ty ON ty.oid = a.atttypid
  WHERE pt.partrelid = to_regclass($1))`

var listSQL = keyCTE + `
SELECT c.oid, format('%I.%I', n.nspname, c.relname), p.name, p.partrelid, format_type(p.keytype, NULL),
       c.oid = p.partdefid, i.inhdetachpending, c.relkind = 'p', c.reltuples::bigint,
       b.m[1], b.m[2], ` + boundValue("b.m[1]", "p.keytype") + `, ` + boundValue("b.m[2]", "p.keytype") + `,
       ` + boundNumber("b.m[1]", "p.keytype") + `, ` + boundNumber("b.m[2]", "p.keytype") + `
FROM parent p
JOIN pg_inherits i ON i.inhparent = p.partrelid
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL (SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid), $2) AS m) b
WHERE p.strat = 'r' AND p.partnatts = 1 AND p.keytype IN ` + keyTypes

// List returns the partitions of table (name or schema.name, found as a statement would find it),
// oldest first, the default partition last. A table that is not partitioned by RANGE on one
// timestamptz, timestamp or date column is an error wrapping ErrNotPartitioned; Describe says why.
// A table with no partitions yields none.
func List(ctx context.Context, q Querier, table string) ([]Partition, error) {
	tx, err := q.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	// Rolled back, so that the settings end with it (in a caller's transaction, with the savepoint).
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT set_config('datestyle', 'ISO, YMD', true), set_config('timezone', 'UTC', true)"); err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	var ok bool
	if err := tx.QueryRow(ctx, keyCTE+`
SELECT EXISTS (SELECT 1 FROM parent WHERE strat = 'r' AND partnatts = 1
                 AND keytype IN `+keyTypes+`)`,
		quoteQualified(table)).Scan(&ok); err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	if !ok {
		return nil, fmt.Errorf("list partitions of %s: %w", table, ErrNotPartitioned)
	}
	rows, err := tx.Query(ctx, listSQL, quoteQualified(table), boundPattern)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Partition, error) {
		var p Partition
		var key string
		var lowSQL, highSQL *string
		var low, high pgtype.Timestamptz
		var lowN, highN *int64
		if err := row.Scan(&p.OID, &p.Name, &p.Parent, &p.ParentOID, &key, &p.Default, &p.DetachPending, &p.SubPartitioned, &p.Rows,
			&lowSQL, &highSQL, &low, &high, &lowN, &highN); err != nil {
			return p, err
		}
		p.Key = KeyType(key)
		if p.Default {
			return p, nil
		}
		if lowSQL == nil || highSQL == nil {
			return p, fmt.Errorf("partition %s: bound not understood", p.Name)
		}
		p.Lower, p.Upper = bound(*lowSQL, low, lowN), bound(*highSQL, high, highN)
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	slices.SortFunc(parts, func(a, b Partition) int {
		if a.Default != b.Default {
			if a.Default {
				return 1
			}
			return -1
		}
		return cmp.Or(a.Lower.compare(b.Lower), cmp.Compare(a.Name, b.Name))
	})
	return parts, nil
}

func bound(lit string, v pgtype.Timestamptz, n *int64) Bound {
	switch {
	case lit == "MINVALUE" || v.InfinityModifier == pgtype.NegativeInfinity:
		return Bound{Infinite: -1, SQL: lit}
	case lit == "MAXVALUE" || v.InfinityModifier == pgtype.Infinity:
		return Bound{Infinite: 1, SQL: lit}
	case n != nil:
		return Bound{Number: *n, SQL: lit}
	}
	return Bound{Time: v.Time, SQL: lit}
}

func (b Bound) compare(o Bound) int {
	if b.Infinite != 0 || o.Infinite != 0 {
		return cmp.Compare(b.Infinite, o.Infinite)
	}
	return cmp.Or(b.Time.Compare(o.Time), cmp.Compare(b.Number, o.Number))
}

// Cut is a table's partitions divided at a cutoff.
type Cut struct {
	// Expired are the partitions whose every row is older than the cutoff (upper bound ≤ cutoff),
	// oldest first: each goes whole.
	Expired []Partition
	// Straddle is the partition whose range holds the cutoff (lower < cutoff < upper), if any: its
	// rows older than the cutoff are the batched engine's.
	Straddle *Partition
	// Default is the DEFAULT partition, if any: it may hold rows of any age, its old ones the
	// batched engine's.
	Default *Partition
}

// Boundary returns the partitions that hold both expired and kept rows, or may: the straddling
// partition and the default one.
func (c Cut) Boundary() []Partition {
	var out []Partition
	for _, p := range []*Partition{c.Straddle, c.Default} {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// EstimatedRows sums the row estimates of the expired partitions; unknown is true when one of
// them has none (never vacuumed or analyzed), and then the sum counts it as 0.
func (c Cut) EstimatedRows() (rows int64, unknown bool) {
	for _, p := range c.Expired {
		if p.Rows < 0 {
			unknown = true
			continue
		}
		rows += p.Rows
	}
	return rows, unknown
}

// Expired divides parts (as List returns them) at cutoff. A row is expired when its key is older
// than the cutoff, as the batched engine's "age < cutoff" decides it with the cutoff bound by pgx:
// for a timestamptz key the instant; for a timestamp key the cutoff's wall clock in its own
// location (the runner's cutoff is UTC); for a date key the cutoff's date there. So a partition
// expires when its upper bound is at or before that value. The default partition never expires.
func Expired(parts []Partition, cutoff time.Time) Cut {
	return divide(parts, func(p *Partition) Bound { return Bound{Time: cutoffFor(p.Key, cutoff)} })
}

// ExpiredEpoch divides parts of a table partitioned on an integer of Unix time at cutoff, the
// cutoff in the key's unit (as the batched engine's age test has it): a partition expires when its
// upper bound is at or below it.
func ExpiredEpoch(parts []Partition, cutoff int64) Cut {
	return divide(parts, func(*Partition) Bound { return Bound{Number: cutoff} })
}

// divide divides parts at the cutoff as each partition's key compares with it.
func divide(parts []Partition, at func(*Partition) Bound) Cut {
	var c Cut
	for i := range parts {
		p := &parts[i]
		if p.Default {
			c.Default = p
			continue
		}
		cut := at(p)
		switch {
		case p.Upper.Infinite == 0 && p.Upper.compare(cut) <= 0:
			c.Expired = append(c.Expired, *p)
		case p.Lower.Infinite < 0 || p.Lower.Infinite == 0 && p.Lower.compare(cut) < 0:
			c.Straddle = p
		}
	}
	slices.SortFunc(c.Expired, func(a, b Partition) int { return a.Lower.compare(b.Lower) })
	return c
}

// cutoffFor is the cutoff as the key compares with it: what pgx sends for a parameter of the key's
// type, read back as List reads bounds (a timestamp or date as UTC).
func cutoffFor(key KeyType, cutoff time.Time) time.Time {
	switch key {
	case KeyTimestamp:
		return time.Date(cutoff.Year(), cutoff.Month(), cutoff.Day(), cutoff.Hour(), cutoff.Minute(), cutoff.Second(), cutoff.Nanosecond(), time.UTC)
	case KeyDate:
		return time.Date(cutoff.Year(), cutoff.Month(), cutoff.Day(), 0, 0, 0, 0, time.UTC)
	}
	return cutoff
}

// CountBelow counts the rows of partition p whose column is older than cutoff, reading p itself:
// the exact boundary count of a dry run (call it on Cut.Boundary, in a read-only transaction
// under a statement timeout). CountBelowEpoch counts them for an integer key, cutoff in its unit.
func CountBelow(ctx context.Context, q Querier, p Partition, column string, cutoff time.Time) (int64, error) {
	return countBelow(ctx, q, p, column, cutoffFor(p.Key, cutoff))
}

// CountBelowEpoch is CountBelow for a partition key of Unix time, cutoff in its unit.
func CountBelowEpoch(ctx context.Context, q Querier, p Partition, column string, cutoff int64) (int64, error) {
	return countBelow(ctx, q, p, column, cutoff)
}

func countBelow(ctx context.Context, q Querier, p Partition, column string, cutoff any) (int64, error) {
	var n int64
	// The cutoff goes as the key reads it, as UTC: a query mode that sends a time as timestamptz
	// text (exec, simple protocol) has the server drop its offset into a timestamp or a date,
	// which would compare another wall clock than the one a prepared statement's binary timestamp
	// carries.
	if err := q.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s < $1", p.Name, pgx.Identifier{column}.Sanitize()),
		cutoff).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rows of partition %s: %w", p.Name, err)
	}
	return n, nil
}

// quoteQualified quotes a policy's table name (name or schema.name) for to_regclass, so that it
// resolves exactly as written, as the sweep's statements do.
func quoteQualified(name string) string {
	return pgx.Identifier(strings.Split(name, ".")).Sanitize()
}
