package sweep

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// delete_with: the children of the rows a batch deletes go in the same statement, so that a
// foreign key without ON DELETE CASCADE never fails the batch and no parent or child is ever gone
// without the other.
//
// The parent delete stays as it is (its access path and forms, the predicate standing on the
// delete target, the keyset cursor on the parents' age), and returns, besides the age, the
// parent columns the children reference. Each child is a data-modifying CTE deleting the rows
// whose column holds one of those values. The children are keyed on the parents the delete
// actually removed, not on the pick: a picked row that a concurrent change made ineligible is
// kept by the delete's re-check, and its children must stay with it. One statement is one
// transaction, and PostgreSQL checks the foreign keys (NO ACTION and RESTRICT alike) at the end
// of the statement, when parents and children are both gone: the order of the CTEs does not
// matter to them. A child inserted for a parent after the statement's snapshot is not deleted;
// under a foreign key its insert either waits for the batch and fails, or (committed before the
// parent's row lock) fails the batch, which rolls back whole and is retried at the next tick.
// Without a foreign key such a child is left behind as an orphan, as it would be by a
// hand-written delete.

// alongside is what a pass's deleting statement does besides deleting its rows, which it names
// "deleted": more columns returned from the deleted rows, more CTEs reading them, and more
// columns of its answer.
type alongside struct{ returning, ctes, answer string }

// childrenSQL writes the delete_with part of a deleting statement. Each child's lookup is
// c.<column> = ANY (ARRAY(…)): an index scan on the child column (the policy check asks for its
// index), where an IN over the CTE could be planned as a hash join reading the whole child table.
func childrenSQL(children []Child) alongside {
	var a alongside
	for i, c := range children {
		a.returning += fmt.Sprintf(", t.%s AS r%d", pgx.Identifier{c.References}.Sanitize(), i)
		a.ctes += fmt.Sprintf(`,
c%[1]d AS (
  DELETE FROM %[2]s AS c WHERE c.%[3]s = ANY (ARRAY(SELECT r%[1]d FROM deleted))
  RETURNING 1)`, i, quoteQualified(c.Table), pgx.Identifier{c.Column}.Sanitize())
		a.answer += fmt.Sprintf(", (SELECT count(*) FROM c%d)", i)
	}
	return a
}

// countSQL is the dry run's exact count of the eligible rows and, after it, of each child's rows
// that would go with them, in one statement (one snapshot).
func countSQL(table, pred string, children []Child) string {
	if len(children) == 0 {
		return fmt.Sprintf(`SELECT count(*) FROM %s AS t WHERE %s`, table, pred)
	}
	cols := make([]string, len(children))
	counts := []string{"(SELECT count(*) FROM p)"}
	for i, c := range children {
		cols[i] = fmt.Sprintf("t.%s AS r%d", pgx.Identifier{c.References}.Sanitize(), i)
		counts = append(counts, fmt.Sprintf("(SELECT count(*) FROM %s AS c WHERE c.%s IN (SELECT r%d FROM p))",
			quoteQualified(c.Table), pgx.Identifier{c.Column}.Sanitize(), i))
	}
	return fmt.Sprintf(`WITH p AS MATERIALIZED (SELECT %s FROM %s AS t WHERE %s)
SELECT %s`, strings.Join(cols, ", "), table, pred, strings.Join(counts, ", "))
}

// childRows pairs each child of a pass with its count; nil for a pass without children.
func childRows(children []Child, counts []int64) []wire.ChildRows {
	if len(children) == 0 {
		return nil
	}
	out := make([]wire.ChildRows, len(children))
	for i, c := range children {
		out[i] = wire.ChildRows{Table: c.Table, Column: c.Column, Rows: counts[i]}
	}
	return out
}
