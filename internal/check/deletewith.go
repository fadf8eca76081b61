package check

import (
	"context"
	"fmt"
	"strings"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// deleteWith refuses a delete_with entry that no foreign key proves: a child referencing the
// swept table on exactly its pair, or a parent the swept row references one-to-one (a unique
// index on the swept column), as an ORM's dependent destroy on a belongs-to; many-to-one would
// delete a parent other rows still reference. The swept table and sweeprail's and the system's
// schemas are refused outright.
func (c *checker) deleteWith(ctx context.Context, sweep string, p policy.Pass) (findings, error) {
	var found findings
	tbl, err := c.table(ctx, p.Table)
	if err != nil {
		return findings{}, err
	}
	for i, ch := range p.DeleteWith {
		field := fmt.Sprintf("delete_with.%d", i)
		ct, err := c.table(ctx, ch.Table)
		if err != nil {
			return findings{}, err
		}
		var schema string
		var child, parent, unique bool
		err = c.pool.QueryRow(ctx, `
WITH k AS (SELECT (SELECT attnum FROM pg_attribute WHERE attrelid = $1 AND attname = $3) AS c,
                  (SELECT attnum FROM pg_attribute WHERE attrelid = $2 AND attname = $4) AS r)
SELECT (SELECT n.nspname FROM pg_class cl JOIN pg_namespace n ON n.oid = cl.relnamespace WHERE cl.oid = $1),
       EXISTS (SELECT 1 FROM pg_constraint con, k WHERE con.contype = 'f' AND con.conrelid = $1 AND con.confrelid = $2
               AND con.conkey = ARRAY[k.c] AND con.confkey = ARRAY[k.r]),
       EXISTS (SELECT 1 FROM pg_constraint con, k WHERE con.contype = 'f' AND con.conrelid = $2 AND con.confrelid = $1
               AND con.conkey = ARRAY[k.r] AND con.confkey = ARRAY[k.c]),
       EXISTS (SELECT 1 FROM pg_index i, k WHERE i.indrelid = $2 AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
               AND i.indnkeyatts = 1 AND i.indkey[0] = k.r)`,
			ct.oid, tbl.oid, ch.Column, ch.References).Scan(&schema, &child, &parent, &unique)
		if err != nil {
			return findings{}, fmt.Errorf("read the keys between %q and %q: %w", p.Table, ch.Table, err)
		}
		entry := fmt.Sprintf("delete_with %s.%s = %s.%s", ch.Table, ch.Column, p.Table, ch.References)
		switch {
		case ct.oid == tbl.oid:
			found.refuse(c.problem(sweep, p.Name, field, "%s names the swept table itself: its rows are the pass's to choose, by its where and age; remove the entry", entry))
		case schema == ownSchema:
			found.refuse(c.problem(sweep, p.Name, field, "%s names a table of schema %s, sweeprail's own (its leases, run history and replay store): remove the entry", entry, ownSchema))
		case schema == "pg_catalog" || schema == "information_schema" || strings.HasPrefix(schema, "pg_"):
			found.refuse(c.problem(sweep, p.Name, field, "%s names a table of system schema %s: remove the entry", entry, schema))
		case child:
		case parent && unique:
			// One-to-one: the parent goes with the only row that references it.
		case parent:
			found.refuse(c.problem(sweep, p.Name, field, "%s goes the other way: %s.%s references %s.%s, which makes %s the parent, and nothing makes %s.%s unique, so other rows of %q may reference the same parent, and deleting it with one of them deletes what the others still reference (and, through its keys, more); a parent goes with its row only one-to-one (a unique index on %s.%s); remove the entry, and sweep %q in a pass of its own, guarded by keep_while_referenced_by: [{table: %s, column: %s, references: %s}]",
				entry, p.Table, ch.References, ch.Table, ch.Column, ch.Table, p.Table, ch.References, p.Table, p.Table, ch.References, ch.Table, p.Table, ch.References, ch.Column))
		default:
			found.refuse(c.problem(sweep, p.Name, field, "%s is no child of %q: no foreign key of %s (%s) references %s (%s), nor the other way, so nothing says its rows belong to the deleted ones; add the foreign key, or remove the entry",
				entry, p.Table, ch.Table, ch.Column, p.Table, ch.References))
		}
	}
	return found, nil
}
