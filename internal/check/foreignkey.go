package check

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
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
// and the lines that would cover it: on the swept table, a keep guard without a where or a
// delete_with child (a conditional guard leaves rows that still fail the batch); on a child, the
// referencing table deleted in the same statement, since delete_with reaches one level. Per-row
// passes (the function deletes) and partitions passes (partition drops meet their own keys) are
// left alone.
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
	for _, fk := range keys {
		cov, err := c.coverage(ctx, p, fk)
		if err != nil {
			return findings{}, err
		}
		if cov.covered {
			continue
		}
		entry := fmt.Sprintf("{table: %s, column: %s, references: %s}", fk.table, yamlList(fk.columns), yamlList(fk.refs))
		msg := fmt.Sprintf("table %q is referenced by %s: deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [%s], or delete the referencing rows in the same statement with delete_with: [%s]",
			p.Table, fk, entry, entry)
		msg += cov.miss
		if cov.conditional > 0 {
			msg += fmt.Sprintf(" (keep guard %d has a where: it keeps only the rows referenced by rows it holds, and the others would still fail the batch; add the delete_with to delete the rest with their parent)", cov.conditional)
		}
		found.refuse(c.problem(sweep, p.Name, "", "%s", msg))
	}
	children, err := c.childKeys(ctx, sweep, p, tbl)
	if err != nil {
		return findings{}, err
	}
	found.add(children)
	return found, nil
}

// keyCoverage is what a pass's guards and children do for one foreign key onto its table.
type keyCoverage struct {
	covered bool
	// conditional is the 1-based number of a guard with a where on the key, 0 for none.
	conditional int
	// miss names a guard or child on the key's column that references another parent column.
	miss string
}

// coverage reads how p's guards and children cover fk. A guard or child covers a key when it
// names exactly the key's pairs, in any order: the referencing table and columns, and the swept
// table's columns the key points at; the same columns compared with other parent columns would
// keep or delete by the wrong key, and are named as a near miss.
func (c *checker) coverage(ctx context.Context, p policy.Pass, fk foreignKey) (keyCoverage, error) {
	var cov keyCoverage
	look := func(what string, i int, table string, columns, references []string) (bool, error) {
		if !sameSet(columns, fk.columns) {
			return false, nil
		}
		t, err := c.table(ctx, table)
		switch refs := policy.Refs(references); {
		case err != nil || t.oid != fk.oid:
			return false, err
		case samePairs(columns, refs, fk.columns, fk.refs):
			return true, nil
		case cov.miss == "":
			cov.miss = fmt.Sprintf(" (%s %d references %s, but the key points at %s)", what, i+1, strings.Join(inKeyOrder(columns, refs, fk.columns), ", "), strings.Join(fk.refs, ", "))
		}
		return false, nil
	}
	for i, g := range p.Guards {
		ok, err := look("keep guard", i, g.Table, g.Columns, g.References)
		switch {
		case err != nil:
			return cov, err
		case ok && g.Where == "":
			cov.covered = true
		case ok:
			cov.conditional = i + 1
		}
	}
	for i, ch := range p.DeleteWith {
		ok, err := look("delete_with", i, ch.Table, ch.Columns, ch.References)
		if err != nil {
			return cov, err
		}
		cov.covered = cov.covered || ok
	}
	return cov, nil
}

// sameSet reports whether a and b hold the same names, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, n := range a {
		if !slices.Contains(b, n) {
			return false
		}
	}
	return true
}

// samePairs reports whether columns pair with refs as keyColumns with keyRefs, in any order.
func samePairs(columns, refs, keyColumns, keyRefs []string) bool {
	if !sameSet(columns, keyColumns) || len(refs) != len(columns) {
		return false
	}
	for i, col := range columns {
		if keyRefs[slices.Index(keyColumns, col)] != refs[i] {
			return false
		}
	}
	return true
}

// inKeyOrder returns refs, which columns hold, in the order of keyColumns (the same set).
func inKeyOrder(columns, refs, keyColumns []string) []string {
	out := make([]string, len(keyColumns))
	for i, col := range keyColumns {
		if j := slices.Index(columns, col); j >= 0 && j < len(refs) {
			out[i] = refs[j]
		}
	}
	return out
}

// childKeys refuses each key onto a delete_with child from a table the statement does not
// delete from: delete_with reaches one level.
func (c *checker) childKeys(ctx context.Context, sweep string, p policy.Pass, tbl *tableInfo) (findings, error) {
	var found findings
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
