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
// it is partitioned by RANGE on that column alone (not an expression), a timestamptz, timestamp or
// date; no partition is itself partitioned; every bound is one the package reads; and the current
// role may detach and drop: through the table's drop function when it is usable (Info.Definer),
// else directly, as the owner (or a member of the owner) of the table, for DETACH, and of each
// partition, for DROP. A table that fails is a *RefusedError saying why; any
// other error is the database's.
func Describe(ctx context.Context, q Querier, table, column string) (Info, error) {
	refuse := func(format string, args ...any) (Info, error) {
		return Info{}, &RefusedError{Table: table, Reason: fmt.Sprintf(format, args...)}
	}
	var info Info
	var kind, owner, role string
	var owns bool
	err := q.QueryRow(ctx, `
SELECT format('%I.%I', n.nspname, c.relname), c.relkind::text, pg_has_role(c.relowner, 'USAGE'),
       pg_get_userbyid(c.relowner), current_user
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass($1)`, quoteQualified(table)).Scan(&info.Table, &kind, &owns, &owner, &role)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return refuse("does not exist")
	case err != nil:
		return Info{}, fmt.Errorf("describe %s: %w", table, err)
	case kind == "r":
		return refuse("is not partitioned: mode partitions drops whole partitions of a table partitioned by RANGE on its age column; sweep it with mode batched")
	case kind != "p":
		return refuse("is %s, not a table: mode partitions needs a table partitioned by RANGE on its age column", relkindName(kind))
	}

	var strat, keydef string
	var natts int
	var keyColumn, keyType *string
	var hasDefault bool
	if err := q.QueryRow(ctx, keyCTE+`
SELECT strat, partnatts, keydef, (SELECT attname::text FROM pg_attribute WHERE attrelid = partrelid AND attnum = attrs[0] AND attrs[0] <> 0),
       format_type(keytype, NULL), partdefid <> 0
FROM parent`, quoteQualified(table)).Scan(&strat, &natts, &keydef, &keyColumn, &keyType, &hasDefault); err != nil {
		return Info{}, fmt.Errorf("describe %s: read partition key: %w", table, err)
	}
	switch {
	case strat != "r":
		return refuse("is partitioned by %s, not by RANGE: mode partitions needs a range of time per partition", keydef)
	case natts != 1:
		return refuse("is partitioned by %s, on %d columns: mode partitions needs one column, the age column %q", keydef, natts, column)
	case keyColumn == nil:
		return refuse("is partitioned by %s, on an expression: mode partitions needs the age column %q itself as the key", keydef, column)
	case *keyColumn != column:
		return refuse("is partitioned by %s, not on the age column %q: name the partition key as age_column, or sweep with mode batched", keydef, column)
	case keyType == nil || !KeyType(*keyType).Temporal() && !KeyType(*keyType).Integer():
		return refuse("is partitioned by %s, a column of type %s: mode partitions needs a timestamptz, timestamp or date key (or an integer of Unix time, with age_unit)", keydef, deref(keyType))
	}
	info.Column, info.Key, info.HasDefault = column, KeyType(*keyType), hasDefault

	parts, err := List(ctx, q, table)
	if err != nil {
		return Info{}, fmt.Errorf("describe %s: %w", table, err)
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
		return refuse("has partitions that are themselves partitioned (%s): mode partitions handles one level", names(sub))
	}
	if len(pending) > 0 {
		info.DetachPending = pending[0]
	}

	def, err := FindDefiner(ctx, q, table)
	if err != nil {
		return Info{}, fmt.Errorf("describe %s: %w", table, err)
	}
	info.Owns = owns
	if def.Usable {
		info.Definer = def.Function
		return info, nil
	}
	if !owns {
		fix := fmt.Sprintf("have the table's owner create the drop function %s (api grants prints it) and grant EXECUTE on it, or make role %q a member of %q", def.Function, role, owner)
		if def.Why != "" {
			return refuse("is owned by %q, and role %q is not a member of it; its drop function %s %s: %s", owner, role, def.Function, def.Why, fix)
		}
		return refuse("is owned by %q, and role %q is not a member of it, and there is no drop function %s: DETACH PARTITION needs the table's owner; %s", owner, role, def.Function, fix)
	}
	rows, err := q.Query(ctx, `
SELECT format('%I.%I', n.nspname, c.relname) || ' (owner ' || quote_ident(pg_get_userbyid(c.relowner)) || ')'
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE i.inhparent = to_regclass($1) AND NOT pg_has_role(c.relowner, 'USAGE')
ORDER BY c.relname`, quoteQualified(table))
	if err != nil {
		return Info{}, fmt.Errorf("describe %s: read partition owners: %w", table, err)
	}
	notOwned, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return Info{}, fmt.Errorf("describe %s: read partition owners: %w", table, err)
	}
	if len(notOwned) > 0 {
		return refuse("has %d partitions that role %q does not own (nor is a member of their owner): %s; DROP TABLE needs the owner",
			len(notOwned), role, names(notOwned))
	}
	return info, nil
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
