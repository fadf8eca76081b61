package partition

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Info is what Describe found of a table it accepts.
type Info struct {
	// Table is the table, schema-qualified and quoted where needed.
	Table string
	// Column is the partition key column; Key its type.
	Column string
	Key    KeyType
	// Partitions counts the partitions, the default one included; HasDefault says whether there
	// is one (then DETACH … CONCURRENTLY is refused by the server and Drop detaches plainly).
	Partitions int
	HasDefault bool
	// DetachPending names a partition whose DETACH … CONCURRENTLY was interrupted, if any: the
	// server detaches no other partition concurrently until it is finalized.
	DetachPending string
	// Definer is the table's drop function when the role will drop through it (it is usable,
	// FindDefiner); empty when the role detaches and drops directly, as the table's owner.
	Definer string
	// Owns: the role owns the table (or is a member of its owner).
	Owns bool
	// DefinerWindow is the window the drop function was granted with, and SessionTimeZone the
	// session's TimeZone, for WindowDiffers.
	DefinerWindow   Window
	SessionTimeZone string
}

// RefusedError is Describe's answer for a table that mode partitions cannot sweep, with the reason.
type RefusedError struct {
	// Table is the table as the caller named it.
	Table string
	// Reason completes "table <Table> …": "is not partitioned: …".
	Reason string
}

func (e *RefusedError) Error() string { return fmt.Sprintf("table %q %s", e.Table, e.Reason) }

// maxNamed bounds how many partitions a refusal names.
const maxNamed = 5

// Describe checks that table (name or schema.name) can be swept by dropping partitions on column:
// partitioned by RANGE on that column alone, of a type the package reads, one level deep, and the
// current role able to detach and drop, through the drop function or as the owner. A table that
// fails is a *RefusedError saying why; any other error is the database's.
func Describe(ctx context.Context, q Querier, table, column string) (Info, error) {
	var info Info
	own, err := describeRelation(ctx, q, table, &info)
	if err != nil {
		return Info{}, err
	}
	if err := describeKey(ctx, q, table, column, &info); err != nil {
		return Info{}, err
	}
	if err := describePartitions(ctx, q, table, &info); err != nil {
		return Info{}, err
	}
	if err := describeRights(ctx, q, table, own, &info); err != nil {
		return Info{}, err
	}
	return info, nil
}

// ownership is who owns a table and who asks: owns says the role owns it or is a member of its
// owner.
type ownership struct {
	owns        bool
	owner, role string
}

// refused returns the *RefusedError of table, its reason completing "table <table> …".
func refused(table, format string, args ...any) error {
	return &RefusedError{Table: table, Reason: fmt.Sprintf(format, args...)}
}

// describeRelation reads table's name and owner into info, and refuses what is not a partitioned
// table.
func describeRelation(ctx context.Context, q Querier, table string, info *Info) (ownership, error) {
	var kind string
	var own ownership
	err := q.QueryRow(ctx, `
SELECT format('%I.%I', n.nspname, c.relname), c.relkind::text, pg_has_role(c.relowner, 'USAGE'),
       pg_get_userbyid(c.relowner), current_user
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass($1)`, quoteQualified(table)).Scan(&info.Table, &kind, &own.owns, &own.owner, &own.role)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return own, refused(table, "does not exist")
	case err != nil:
		return own, fmt.Errorf("describe %s: %w", table, err)
	case kind == "r":
		return own, refused(table, "is not partitioned: mode partitions drops whole partitions of a table partitioned by RANGE on its age column; sweep it with mode batched")
	case kind != "p":
		return own, refused(table, "is %s, not a table: mode partitions needs a table partitioned by RANGE on its age column", relkindName(kind))
	}
	info.Owns = own.owns
	return own, nil
}

// describeKey reads table's partition key into info, and refuses one that is not RANGE on column
// alone, of a type the package reads.
func describeKey(ctx context.Context, q Querier, table, column string, info *Info) error {
	var strat, keydef string
	var natts int
	var keyColumn, keyType *string
	var hasDefault bool
	if err := q.QueryRow(ctx, keyCTE+`
SELECT strat, partnatts, keydef, (SELECT attname::text FROM pg_attribute WHERE attrelid = partrelid AND attnum = attrs[0] AND attrs[0] <> 0),
       format_type(keytype, NULL), partdefid <> 0
FROM parent`, quoteQualified(table)).Scan(&strat, &natts, &keydef, &keyColumn, &keyType, &hasDefault); err != nil {
		return fmt.Errorf("describe %s: read partition key: %w", table, err)
	}
	switch {
	case strat != "r":
		return refused(table, "is partitioned by %s, not by RANGE: mode partitions needs a range of time per partition", keydef)
	case natts != 1:
		return refused(table, "is partitioned by %s, on %d columns: mode partitions needs one column, the age column %q", keydef, natts, column)
	case keyColumn == nil:
		return refused(table, "is partitioned by %s, on an expression: mode partitions needs the age column %q itself as the key", keydef, column)
	case *keyColumn != column:
		return refused(table, "is partitioned by %s, not on the age column %q: name the partition key as age_column, or sweep with mode batched", keydef, column)
	case keyType == nil || !KeyType(*keyType).Temporal() && !KeyType(*keyType).Integer():
		return refused(table, "is partitioned by %s, a column of type %s: mode partitions needs a timestamptz, timestamp or date key (or an integer of Unix time, with age_unit)", keydef, deref(keyType))
	}
	info.Column, info.Key, info.HasDefault = column, KeyType(*keyType), hasDefault
	return nil
}

// describePartitions counts table's partitions into info, notes one whose detach is pending, and
// refuses partitions that are partitioned themselves.
func describePartitions(ctx context.Context, q Querier, table string, info *Info) error {
	parts, err := List(ctx, q, table)
	if err != nil {
		return fmt.Errorf("describe %s: %w", table, err)
	}
	info.Partitions = len(parts)
	var sub, pending []string
	for _, p := range parts {
		if p.SubPartitioned {
			sub = append(sub, p.Name)
		}
		if p.DetachPending {
			pending = append(pending, p.Name)
		}
	}
	if len(sub) > 0 {
		return refused(table, "has partitions that are themselves partitioned (%s): mode partitions handles one level", names(sub))
	}
	if len(pending) > 0 {
		info.DetachPending = pending[0]
	}
	return nil
}

// describeRights says how the role will detach and drop table's partitions: through the drop
// function when it is usable (info.Definer), else as the owner of the table and of every
// partition; it refuses a role that can do neither.
func describeRights(ctx context.Context, q Querier, table string, own ownership, info *Info) error {
	def, err := FindDefiner(ctx, q, table)
	if err != nil {
		return fmt.Errorf("describe %s: %w", table, err)
	}
	if def.Usable {
		info.Definer, info.DefinerWindow, info.SessionTimeZone = def.Function, def.Window, def.SessionTimeZone
		return nil
	}
	if !own.owns {
		fix := fmt.Sprintf("have the table's owner create the drop function %s (api grants prints it) and grant EXECUTE on it, or make role %q a member of %q", def.Function, own.role, own.owner)
		if def.Why != "" {
			return refused(table, "is owned by %q, and role %q is not a member of it; its drop function %s %s: %s", own.owner, own.role, def.Function, def.Why, fix)
		}
		return refused(table, "is owned by %q, and role %q is not a member of it, and there is no drop function %s: DETACH PARTITION needs the table's owner; %s", own.owner, own.role, def.Function, fix)
	}
	rows, err := q.Query(ctx, `
SELECT format('%I.%I', n.nspname, c.relname) || ' (owner ' || quote_ident(pg_get_userbyid(c.relowner)) || ')'
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE i.inhparent = to_regclass($1) AND NOT pg_has_role(c.relowner, 'USAGE')
ORDER BY c.relname`, quoteQualified(table))
	if err != nil {
		return fmt.Errorf("describe %s: read partition owners: %w", table, err)
	}
	notOwned, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("describe %s: read partition owners: %w", table, err)
	}
	if len(notOwned) > 0 {
		return refused(table, "has %d partitions that role %q does not own (nor is a member of their owner): %s; DROP TABLE needs the owner",
			len(notOwned), own.role, names(notOwned))
	}
	return nil
}

func names(list []string) string {
	if len(list) > maxNamed {
		return strings.Join(list[:maxNamed], ", ") + fmt.Sprintf(" and %d more", len(list)-maxNamed)
	}
	return strings.Join(list, ", ")
}

func deref(s *string) string {
	if s == nil {
		return "unknown"
	}
	return *s
}

func relkindName(kind string) string {
	switch kind {
	case "v":
		return "a view"
	case "m":
		return "a materialized view"
	case "f":
		return "a foreign table"
	case "S":
		return "a sequence"
	case "i", "I":
		return "an index"
	}
	return fmt.Sprintf("a relation of kind %q", kind)
}
