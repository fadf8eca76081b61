package check

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/explain"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// The policy check's references between tables: every foreign key that would fail a pass's delete
// is covered by a keep guard or by delete_with, and every keep guard's and child's lookup is
// served by an index.

// foreignKey is a foreign key that references a swept table, read from pg_constraint.
type foreignKey struct {
	name string
	// table is the referencing table as the search_path shows it, oid its oid.
	table string
	oid   uint32
	// columns are the referencing columns, refs the referenced ones, in key order.
	columns, refs []string
	// action is the ON DELETE action's name: NO ACTION or RESTRICT.
	action string
}

func (fk foreignKey) String() string {
	return fmt.Sprintf("foreign key %s (%s (%s) → %s, ON DELETE %s)", fk.name, fk.table, strings.Join(fk.columns, ", "),
		strings.Join(fk.refs, ", "), fk.action)
}

// blockingKeys reads the foreign keys that reference table oid and make a delete of a referenced
// row fail: ON DELETE NO ACTION and RESTRICT, checked at the end of the statement, deferred or
// not. CASCADE, SET NULL and SET DEFAULT let the delete through. A partition's copy of a
// referencing table's key is left out (the key is reported once, on the table the policy names);
// a key copied onto a swept partition of a referenced table is kept.
func (c *checker) blockingKeys(ctx context.Context, oid uint32) ([]foreignKey, error) {
	rows, err := c.pool.Query(ctx, `
SELECT con.conname, con.conrelid::regclass::text, con.conrelid,
       ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY AS k(n, i)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.i),
       ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY AS k(n, i)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.i),
       CASE con.confdeltype WHEN 'r' THEN 'RESTRICT' ELSE 'NO ACTION' END
FROM pg_constraint con
WHERE con.contype = 'f' AND con.confrelid = $1 AND con.confdeltype IN ('a', 'r')
  AND NOT EXISTS (SELECT 1 FROM pg_constraint pc WHERE pc.oid = con.conparentid AND pc.confrelid = con.confrelid)
ORDER BY con.conname`, oid)
	if err != nil {
		return nil, fmt.Errorf("read foreign keys: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (foreignKey, error) {
		var fk foreignKey
		err := r.Scan(&fk.name, &fk.table, &fk.oid, &fk.columns, &fk.refs, &fk.action)
		return fk, err
	})
}

// foreignKeys refuses a pass whose delete a foreign key would fail at every tick, naming the key
// and the policy lines that would cover it. A key on the swept table is covered by a keep guard
// without a where on the same reference (a referenced row is kept), or by a delete_with child on
// it (the referencing rows go in the same statement). A conditional guard does not cover it: the
// rows referenced only by rows its where leaves out would still fail the batch. A key on a
// delete_with child is refused too, unless the table referencing the child is deleted in the same
// statement (the swept table, or another child): delete_with reaches one level. A per-row pass is
// left alone: its function deletes, and may delete the referencing rows itself; so is a
// partitions pass, which takes neither guards nor children, and whose drops meet the foreign
// keys of their own (partition.Drop).
func (c *checker) foreignKeys(ctx context.Context, sweep string, p policy.Pass) (findings, error) {
	var found findings
	if p.Mode == policy.ModePerRow || p.Mode == policy.ModePartitions {
		return found, nil
	}
	tbl, err := c.table(ctx, p.Table)
	if err != nil {
		return findings{}, err
	}
	keys, err := c.blockingKeys(ctx, tbl.oid)
	if err != nil {
		return findings{}, err
	}
	// A guard or child covers a key of one column when it names the key's own pair: the
	// referencing table and column, and the swept table's column the key points at. The same
	// child column compared with another parent column would keep or delete by the wrong key.
	covers := func(table, column, references string, fk foreignKey) (bool, error) {
		if len(fk.columns) != 1 || column != fk.columns[0] || references != fk.refs[0] {
			return false, nil
		}
		t, err := c.table(ctx, table)
		return err == nil && t.oid == fk.oid, err
	}
	// nearMiss names a guard or child on the key's table and column that references another
	// column of the swept table than the key does: its lookups would match the wrong rows.
	nearMiss := func(what string, i int, table, column, references string, fk foreignKey) (string, error) {
		if len(fk.columns) != 1 || column != fk.columns[0] || references == fk.refs[0] {
			return "", nil
		}
		t, err := c.table(ctx, table)
		if err != nil || t.oid != fk.oid {
			return "", err
		}
		return fmt.Sprintf(" (%s %d references %s, but the key points at %s)", what, i+1, references, fk.refs[0]), nil
	}
	for _, fk := range keys {
		covered, conditional, miss := false, 0, ""
		for i, g := range p.Guards {
			ok, err := covers(g.Table, g.Column, g.References, fk)
			if err != nil {
				return findings{}, err
			}
			switch {
			case ok && g.Where == "":
				covered = true
			case ok:
				conditional = i + 1
			}
			if m, err := nearMiss("keep guard", i, g.Table, g.Column, g.References, fk); err != nil {
				return findings{}, err
			} else if miss == "" {
				miss = m
			}
		}
		for i, ch := range p.DeleteWith {
			ok, err := covers(ch.Table, ch.Column, ch.References, fk)
			if err != nil {
				return findings{}, err
			}
			covered = covered || ok
			if m, err := nearMiss("delete_with", i, ch.Table, ch.Column, ch.References, fk); err != nil {
				return findings{}, err
			} else if miss == "" {
				miss = m
			}
		}
		if covered {
			continue
		}
		if len(fk.columns) != 1 {
			found.refuse(c.problem(sweep, p.Name, "", "table %q is referenced by %s: deleting a row it references fails the batch with SQLSTATE 23503, at every tick; a key of several columns cannot be covered by a keep guard or delete_with: make it ON DELETE CASCADE, or delete through a per-row function",
				p.Table, fk))
			continue
		}
		entry := fmt.Sprintf("{table: %s, column: %s, references: %s}", fk.table, fk.columns[0], fk.refs[0])
		msg := fmt.Sprintf("table %q is referenced by %s: deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [%s], or delete the referencing rows in the same statement with delete_with: [%s]",
			p.Table, fk, entry, entry)
		msg += miss
		if conditional > 0 {
			msg += fmt.Sprintf(" (keep guard %d has a where: it keeps only the rows referenced by rows it holds, and the others would still fail the batch; add the delete_with to delete the rest with their parent)", conditional)
		}
		found.refuse(c.problem(sweep, p.Name, "", "%s", msg))
	}
	// The tables this statement deletes from: a key from one of them onto a child is satisfied by
	// the same statement.
	deleted := []uint32{tbl.oid}
	for _, ch := range p.DeleteWith {
		t, err := c.table(ctx, ch.Table)
		if err != nil {
			return findings{}, err
		}
		deleted = append(deleted, t.oid)
	}
	for i, ch := range p.DeleteWith {
		keys, err := c.blockingKeys(ctx, deleted[i+1])
		if err != nil {
			return findings{}, err
		}
		for _, fk := range keys {
			if slices.Contains(deleted, fk.oid) {
				continue
			}
			found.refuse(c.problem(sweep, p.Name, fmt.Sprintf("delete_with.%d", i), "delete_with table %q is referenced by %s: deleting a child it references fails the batch with SQLSTATE 23503, at every tick, and delete_with reaches one level: make that key ON DELETE CASCADE, or delete those rows before their parents' pass",
				ch.Table, fk))
		}
	}
	return found, nil
}

// lookups checks that an index serves each lookup a batch makes in another table: each keep
// guard's (is the row referenced?) and each delete_with child's (which rows reference it?). A
// lookup without its index reads the whole other table, at every batch.
func (c *checker) lookups(ctx context.Context, p policy.Pass, cutoff time.Time) ([]unindexed, error) {
	var missing []unindexed
	for _, g := range p.Guards {
		// The plan cannot tell a lookup from a full read of a composite index whose second column
		// is the guard's (an Index Cond either way), so an index that leads with the guard column
		// is looked for in the catalog first.
		ok, err := c.leadingIndex(ctx, g.Table, g.Column)
		if err != nil {
			return nil, err
		}
		if !ok {
			// A partial index serves the lookup when the guard's own condition implies its
			// predicate: its where, or the equality itself (g.col = t.id implies g.col IS NOT
			// NULL). The planner proves that, so the guard is planned as the batch runs it.
			if ok, err = c.guardServed(ctx, p, g, cutoff); err != nil {
				return nil, err
			}
		}
		if ok {
			continue
		}
		fix, err := c.indexFor(ctx, g.Table, g.Column, g.Where, "g")
		if err != nil {
			return nil, err
		}
		what := fmt.Sprintf("no index serves the keep guard on %s.%s, so every batch would read all of table %q", g.Table, g.Column, g.Table)
		if g.Where != "" {
			what = fmt.Sprintf("no index serves the keep guard on %s.%s where %s, so every batch would read all of table %q",
				g.Table, g.Column, strings.Join(strings.Fields(g.Where), " "), g.Table)
		}
		missing = append(missing, unindexed{what, fix})
	}
	for _, ch := range p.DeleteWith {
		ok, err := c.leadingIndex(ctx, ch.Table, ch.Column)
		if err != nil {
			return nil, err
		}
		if ok {
			continue
		}
		fix, err := c.indexFor(ctx, ch.Table, ch.Column, "", "c")
		if err != nil {
			return nil, err
		}
		missing = append(missing, unindexed{fmt.Sprintf("no index serves delete_with on %s.%s, so every batch would read all of table %q", ch.Table, ch.Column, ch.Table), fix})
	}
	return missing, nil
}

// lookupPricing prices out every way of running a keep guard but a lookup per row: sequential
// scans, sorts, the hash and merge joins that would read the guard table whole, and the
// materialized full read of an index (a partial index whose predicate the where implies, read
// whole once and kept). The planner then takes a parameterized index scan whenever an index can
// serve one, whatever the statistics.
const lookupPricing = "SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; SET LOCAL enable_hashjoin = off; " +
	"SET LOCAL enable_mergejoin = off; SET LOCAL enable_material = off"

// guardServed plans keep guard g as the batch runs it (NOT EXISTS over alias g, correlated to t,
// its where in place) with lookupPricing, and reports whether the guard table is read through an
// index condition on the guard column, by an index that leads with it: a partial index too, when
// the guard's condition implies its predicate.
func (c *checker) guardServed(ctx context.Context, p policy.Pass, g policy.Guard, cutoff time.Time) (bool, error) {
	q := fmt.Sprintf("SELECT 1 FROM %s AS t WHERE %s", statement.QuoteName(p.Table), statement.Guard(g, c.ageKind(p)))
	var args []any
	if policy.UsesCutoff(g.Where) {
		args = []any{cutoff}
	}
	raw, err := explain.Priced(ctx, c.pool, checkStatementTimeout, checkLockTimeout, lookupPricing, q, args...)
	if pgErr, err := pgProblem(err); err != nil {
		return false, err
	} else if pgErr != nil {
		return false, nil // compile reported it
	}
	scans, err := explain.LookupIndexes(raw, "g", g.Column)
	if err != nil {
		return false, fmt.Errorf("read plan: %w", err)
	}
	if len(scans) == 0 {
		return false, nil
	}
	var names []string
	for _, sc := range scans {
		if len(sc) == 0 {
			return false, nil
		}
		names = append(names, sc...)
	}
	t, err := c.table(ctx, g.Table)
	if err != nil {
		return false, err
	}
	// The indexes among them that lead with the guard column, on the guard table or, for a
	// partitioned one, on its partitions.
	rows, err := c.pool.Query(ctx, `
SELECT ic.relname FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE (i.indrelid = $1 OR i.indrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1))
  AND ic.relname = ANY ($2) AND a.attname = $3 AND i.indisvalid`, t.oid, names, g.Column)
	if err != nil {
		return false, fmt.Errorf("look up indexes of %q: %w", g.Table, err)
	}
	leading, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, fmt.Errorf("look up indexes of %q: %w", g.Table, err)
	}
	for _, sc := range scans {
		if !slices.ContainsFunc(sc, func(n string) bool { return slices.Contains(leading, n) }) {
			return false, nil
		}
	}
	return true, nil
}
