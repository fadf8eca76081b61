package check

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// catalog checks that the pass's table, columns, guard tables and function exist, as the
// statements will resolve them.
func (c *checker) catalog(ctx context.Context, sweep string, p policy.Pass) (findings, error) {
	var found findings
	tbl, err := c.table(ctx, p.Table)
	if err != nil {
		return findings{}, err
	}
	if tbl.problem != "" {
		found.refuse(c.problem(sweep, p.Name, "table", "table %q %s", p.Table, tbl.problem))
		return found, nil
	}
	if tbl.partitioned && (p.Mode == policy.ModeBatched || p.Mode == "") {
		// A batch picks its rows by ctid, which is unique within one partition only.
		found.refuse(c.problem(sweep, p.Name, "mode", "table %q is partitioned, and a batch picks its rows by ctid, which repeats across partitions: use mode: partitions (expired partitions dropped whole, the boundary's rows deleted a partition at a time), or sweep each partition with a pass of its own", p.Table))
		return found, nil
	}
	switch age, ok := tbl.column(p.AgeColumn); {
	case !ok:
		found.refuse(c.problem(sweep, p.Name, "age_column", "column %q does not exist in table %q (columns: %s)", p.AgeColumn, p.Table, tbl.columnList()))
	case p.AgeUnit != "" && !age.numeric:
		found.refuse(c.problem(sweep, p.Name, "age_unit", "age_unit is for an integer or numeric column of Unix time, and age column %q of table %q is %s: remove age_unit (a date or time column is compared with the cutoff as it is)",
			p.AgeColumn, p.Table, age.typ))
	case p.AgeUnit == "" && age.numeric:
		found.refuse(c.problem(sweep, p.Name, "age_column", "age column %q of table %q is %s, a number: if it holds Unix time, say in what unit with age_unit: seconds, milliseconds or microseconds; else name a timestamptz, timestamp or date column",
			p.AgeColumn, p.Table, age.typ))
	case p.AgeUnit == "" && !age.temporal:
		found.refuse(c.problem(sweep, p.Name, "age_column", "age column %q of table %q is %s, not a timestamp or date: the cutoff cannot be compared with it; name a timestamptz, timestamp or date column (or an integer of Unix time, with age_unit)",
			p.AgeColumn, p.Table, age.typ))
	default:
		f, err := c.timeZone(ctx, sweep, p, age)
		if err != nil {
			return findings{}, err
		}
		found.add(f)
	}
	if p.Mode == policy.ModePerRow {
		key := cmp.Or(p.KeyColumn, "id")
		if _, ok := tbl.column(key); !ok {
			found.refuse(c.problem(sweep, p.Name, "key_column", "key column %q does not exist in table %q (columns: %s); name the column the function takes with key_column",
				key, p.Table, tbl.columnList()))
		}
		problem, err := c.function(ctx, p.Function)
		if err != nil {
			return findings{}, err
		}
		if problem != "" {
			found.refuse(c.problem(sweep, p.Name, "function", "function %q %s", p.Function, problem))
		}
	}
	for i, g := range p.Guards {
		f, err := c.pairColumns(ctx, sweep, p, tbl, fmt.Sprintf("guard.%d", i), "keep guard", g.Table, g.Columns, g.References, g.WithoutForeignKey)
		if err != nil {
			return findings{}, err
		}
		found.add(f)
	}
	for i, ch := range p.DeleteWith {
		f, err := c.pairColumns(ctx, sweep, p, tbl, fmt.Sprintf("delete_with.%d", i), "delete_with", ch.Table, ch.Columns, ch.References, ch.WithoutForeignKey)
		if err != nil {
			return findings{}, err
		}
		found.add(f)
	}
	return found, nil
}

// pairColumns checks that the table of a keep guard or delete_with entry (what, at field) and
// its columns exist, and that the swept table tbl has the columns they reference. A relation
// declared without a foreign key (declared) pairs equal types too, as a key would: compared
// across types, a value would match by a cast, or miss its index.
func (c *checker) pairColumns(ctx context.Context, sweep string, p policy.Pass, tbl *tableInfo, field, what, table string, columns, refs []string, declared bool) (findings, error) {
	var found findings
	other, err := c.table(ctx, table)
	if err != nil {
		return findings{}, err
	}
	if other.problem != "" {
		found.refuse(c.problem(sweep, p.Name, field+".table", "%s table %q %s", what, table, other.problem))
		return found, nil
	}
	refs = policy.Refs(refs)
	for i, col := range columns {
		cc, ok := other.column(col)
		if !ok {
			found.refuse(c.problem(sweep, p.Name, field+".column", "%s column %q does not exist in table %q (columns: %s)", what, col, table, other.columnList()))
		}
		rc, rok := tbl.column(refs[i])
		if !rok {
			found.refuse(c.problem(sweep, p.Name, field+".references", "%s references column %q, which does not exist in table %q (columns: %s)", what, refs[i], p.Table, tbl.columnList()))
		}
		if declared && ok && rok && cc.typ != rc.typ {
			found.refuse(c.problem(sweep, p.Name, field+".column", "%s column %s.%s is %s and the column it references, %s.%s, is %s: a relation declared without_foreign_key pairs equal types; name the column of %q that holds %s's %s, or make the types equal",
				what, table, col, cc.typ, p.Table, refs[i], rc.typ, table, p.Table, refs[i]))
		}
	}
	return found, nil
}

// timeZone checks a pass's time_zone against its age column and the database: a zone other than
// UTC is refused on a timestamptz column (it would change nothing there), and an IANA name must be
// one the database knows, spelled as it spells it.
func (c *checker) timeZone(ctx context.Context, sweep string, p policy.Pass, age columnInfo) (findings, error) {
	var found findings
	switch {
	case p.TimeZone == "" || p.TimeZone == policy.TimeZoneUTC:
		return found, nil
	case p.AgeUnit != "":
		return found, nil // policy.Load refuses a zone with age_unit
	case age.kind == statement.Instant:
		found.refuse(c.problem(sweep, p.Name, "time_zone", "time_zone has no effect: age column %q is %s, an instant, compared with the cutoff instant whatever the zone; remove time_zone (it is for date and timestamp without time zone columns)",
			p.AgeColumn, age.typ))
		return found, nil
	case p.TimeZone == policy.TimeZoneDatabase:
		return found, nil
	}
	var known bool
	var similar []string
	err := c.pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = $1),
       ARRAY(SELECT name FROM pg_timezone_names WHERE lower(name) = lower($1) ORDER BY name LIMIT 3)`, p.TimeZone).Scan(&known, &similar)
	if err != nil {
		return findings{}, fmt.Errorf("look up time zone %q: %w", p.TimeZone, err)
	}
	if !known {
		msg := fmt.Sprintf("time_zone %q is no time zone the database knows (pg_timezone_names)", p.TimeZone)
		if len(similar) > 0 {
			msg += fmt.Sprintf("; did you mean %s?", strings.Join(similar, " or "))
		} else {
			msg += ": want UTC, database, or an IANA name such as Europe/Paris"
		}
		found.refuse(c.problem(sweep, p.Name, "time_zone", "%s", msg))
	}
	return found, nil
}
