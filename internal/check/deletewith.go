package check

import (
	"context"
	"fmt"
	"strings"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// deleteWith refuses a delete_with entry that no foreign key proves: a child referencing the
// swept table on exactly its pairs (in any order), or a parent the swept row references
// one-to-one (a unique index on the swept columns); many-to-one would delete a parent other rows
// still reference. An entry or keep guard declared without_foreign_key stands on the swept
// table's side alone (declared). The swept table and sweeprail's and the system's schemas are
// refused outright.
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
		k, err := c.relation(ctx, ct.oid, tbl.oid, ch.Columns, policy.Refs(ch.References))
		if err != nil {
			return findings{}, fmt.Errorf("read the keys between %q and %q: %w", p.Table, ch.Table, err)
		}
		entry := "delete_with " + pairText(ch.Table, ch.Columns, p.Table, ch.References)
		refs, refsText, colsText := strings.Join(policy.Refs(ch.References), ", "), policy.ColumnText(policy.Refs(ch.References)), policy.ColumnText(ch.Columns)
		switch {
		case ct.oid == tbl.oid:
			found.refuse(c.problem(sweep, p.Name, field, "%s names the swept table itself: its rows are the pass's to choose, by its where and age; remove the entry", entry))
		case k.schema == ownSchema:
			found.refuse(c.problem(sweep, p.Name, field, "%s names a table of schema %s, sweeprail's own (its leases, run history and replay store): remove the entry", entry, ownSchema))
		case k.schema == "pg_catalog" || k.schema == "information_schema" || strings.HasPrefix(k.schema, "pg_"):
			found.refuse(c.problem(sweep, p.Name, field, "%s names a table of system schema %s: remove the entry", entry, k.schema))
		case ch.WithoutForeignKey:
			found.add(c.declared(sweep, p, field, entry, ch.Table, refs, k))
		case k.child:
		case k.parent && k.unique:
			// One-to-one: the parent goes with the only row that references it.
		case k.parent:
			found.refuse(c.problem(sweep, p.Name, field, "%s goes the other way: %s.%s references %s.%s, which makes %s the parent, and nothing makes %s.%s unique, so other rows of %q may reference the same parent, and deleting it with one of them deletes what the others still reference (and, through its keys, more); a parent goes with its row only one-to-one (a unique index on %s.%s); remove the entry, and sweep %q in a pass of its own, guarded by keep_while_referenced_by: [{table: %s, column: %s, references: %s}]",
				entry, p.Table, refsText, ch.Table, colsText, ch.Table, p.Table, refsText, p.Table, p.Table, refsText, ch.Table, p.Table, yamlList(policy.Refs(ch.References)), yamlList(ch.Columns)))
		default:
			msg := fmt.Sprintf("%s is no child of %q: no foreign key of %s (%s) references %s (%s), nor the other way, so nothing says its rows belong to the deleted ones; add the foreign key, or remove the entry",
				entry, p.Table, ch.Table, strings.Join(ch.Columns, ", "), p.Table, refs)
			if k.unique && k.sameTypes && !k.keyed {
				msg += fmt.Sprintf(", or, where the application keeps the relation itself, declare it with without_foreign_key: true (%s.%s is unique, so each child belongs to one deleted row)", p.Table, refsText)
			}
			found.refuse(c.problem(sweep, p.Name, field, "%s", msg))
		}
	}
	for i, g := range p.Guards {
		if !g.WithoutForeignKey {
			continue // a guard needs no key: it only keeps rows
		}
		gt, err := c.table(ctx, g.Table)
		if err != nil {
			return findings{}, err
		}
		k, err := c.relation(ctx, gt.oid, tbl.oid, g.Columns, policy.Refs(g.References))
		if err != nil {
			return findings{}, fmt.Errorf("read the keys between %q and %q: %w", p.Table, g.Table, err)
		}
		found.add(c.declared(sweep, p, fmt.Sprintf("guard.%d", i), "keep guard "+pairText(g.Table, g.Columns, p.Table, g.References),
			g.Table, strings.Join(policy.Refs(g.References), ", "), k))
	}
	return found, nil
}

// declared checks an entry declared without_foreign_key (entry, at field, of table): the swept
// row must be the one side, its referenced columns (refs) unique, so that each referencing row
// belongs to one swept row; the pairs' types are catalog's. A foreign key that proves the
// relation makes the flag needless, which is said as a warning.
func (c *checker) declared(sweep string, p policy.Pass, field, entry, table, refs string, k relation) findings {
	var found findings
	switch {
	case !k.unique:
		found.refuse(c.problem(sweep, p.Name, field, "%s is declared without_foreign_key, but nothing makes %s.%s unique (no primary key, and no unique index without a where on those columns), so a row of %q may belong to several swept rows and go, or stay, with any one of them; name the swept table's primary key or unique columns in references, or add a unique index on %s (%s)",
			entry, p.Table, policy.ColumnText(strings.Split(refs, ", ")), table, p.Table, refs))
	case k.child || k.parent:
		found.warn(c.problem(sweep, p.Name, field+".without_foreign_key", "%s is declared without_foreign_key, but a foreign key between %q and %q proves it: remove without_foreign_key", entry, table, p.Table))
	}
	return found
}

// relation is what the catalog says of the pairs of a guard or delete_with entry between table
// other (its columns) and the swept table (refs).
type relation struct {
	// schema is other's.
	schema string
	// child: a foreign key of other references the swept table on exactly these pairs; parent:
	// one of the swept table references other on them.
	child, parent bool
	// keyed: some foreign key between the two tables holds one of the columns (on other pairs).
	keyed bool
	// unique: a valid unique index without a where (the primary key among them) on the swept
	// table covers refs, or some of them; sameTypes: each pair's types are equal.
	unique, sameTypes bool
}

// relation reads the relation between table other's columns and the swept table's refs
// (pairwise), a foreign key's pairs matching in any order.
func (c *checker) relation(ctx context.Context, other, swept uint32, columns, refs []string) (relation, error) {
	var k relation
	err := c.pool.QueryRow(ctx, `
WITH w AS (SELECT a.attnum AS c, b.attnum AS r, a.atttypid = b.atttypid AND a.atttypmod = b.atttypmod AS same
           FROM unnest($3::text[], $4::text[]) AS n(c, r)
           JOIN pg_attribute a ON a.attrelid = $1 AND a.attname = n.c
           JOIN pg_attribute b ON b.attrelid = $2 AND b.attname = n.r),
     n AS (SELECT cardinality($3::text[]) AS n)
SELECT (SELECT ns.nspname FROM pg_class cl JOIN pg_namespace ns ON ns.oid = cl.relnamespace WHERE cl.oid = $1),
       EXISTS (SELECT 1 FROM pg_constraint con, n WHERE con.contype = 'f' AND con.conrelid = $1 AND con.confrelid = $2
               AND cardinality(con.conkey) = n.n
               AND (SELECT count(*) FROM unnest(con.conkey, con.confkey) AS k(c, r) JOIN w USING (c, r)) = n.n),
       EXISTS (SELECT 1 FROM pg_constraint con, n WHERE con.contype = 'f' AND con.conrelid = $2 AND con.confrelid = $1
               AND cardinality(con.conkey) = n.n
               AND (SELECT count(*) FROM unnest(con.confkey, con.conkey) AS k(c, r) JOIN w USING (c, r)) = n.n),
       EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = $2 AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
               AND NOT EXISTS (SELECT 1 FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS x(a, o)
                               WHERE x.o <= i.indnkeyatts AND x.a NOT IN (SELECT r FROM w))),
       (SELECT count(*) FROM w WHERE w.same) = (SELECT n FROM n),
       EXISTS (SELECT 1 FROM pg_constraint con WHERE con.contype = 'f'
               AND (con.conrelid = $1 AND con.confrelid = $2 AND con.conkey && ARRAY(SELECT c FROM w)
                    OR con.conrelid = $2 AND con.confrelid = $1 AND con.confkey && ARRAY(SELECT c FROM w)))`,
		other, swept, columns, refs).Scan(&k.schema, &k.child, &k.parent, &k.unique, &k.sameTypes, &k.keyed)
	return k, err
}

// yamlList writes names as a policy writes them: the name alone, or [a, b] for several.
func yamlList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return "[" + strings.Join(names, ", ") + "]"
}
