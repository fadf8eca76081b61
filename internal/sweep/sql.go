package sweep

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The statements of one pass. The target table is always aliased t, in the batch select too, so
// a condition written as t.col (or col) means the same row in both places.
type statements struct {
	// predicate is the eligibility condition over alias t; $1 is the cutoff.
	predicate string
	// indexBatch is a batch of the index path: it deletes at most $2 eligible rows, the oldest
	// first, picking their ctids from the age index and deleting them in the same statement, the
	// predicate standing on the target as well. It takes no row lock before deleting: a row
	// another transaction holds makes it wait (under rowLockTimeout), and a row changed under us
	// is re-checked after the wait (READ COMMITTED re-evaluates the WHERE on the row's new
	// version, whose ctid is not among those picked either) and kept if it no longer qualifies.
	// It answers the rows deleted and the newest age among them.
	indexBatch string
	// indexBatchAfter is indexBatch resumed at age $3, the newest age the pass's previous batch
	// deleted (keyset pagination). Every batch, the last included, then reads an index range of
	// about one batch: a batch that resumed from the start of the index, or a sequential scan,
	// would cost O(table) once the backlog thins out, and the last batch of a large drain would
	// run into the statement timeout (docs/BENCHMARKS.md, the scale run and "What was tried" 3).
	indexBatchAfter string
	// indexLocked and indexLockedAfter are the locking forms of the two: the pick takes FOR
	// UPDATE SKIP LOCKED, so held rows are skipped rather than waited for. A batch runs them
	// only as the retry of an attempt that met a held row lock: locking writes a lock record per
	// row before the delete writes its own (docs/BENCHMARKS.md, "Where the time goes").
	indexLocked, indexLockedAfter string
	// heapBatch is a batch of the heap path: it deletes the eligible rows of the blocks [$2, $3)
	// (ctids '(b,0)' to '(b+k,0)'), a TID Range Scan, without row locks; a row changed under us
	// is re-checked as in indexBatch. heapLocked is its locking form, for the retry.
	heapBatch, heapLocked string
	// single deletes every eligible row in one statement.
	single string
	// perRow locks one eligible key (skipping keys another run holds) and calls the function on it.
	perRow string
	// count is the dry run's exact count; plan is the batch select as it runs (ordered by age),
	// which the dry run and the policy check ask the planner whether an index serves.
	count string
	plan  string
	// probe is the batch select without its keep guards, which the index verdict plans: the
	// guards' lookups are judged from the catalog, and leaving their joins out keeps the verdict
	// on the swept table alone. estimate is the eligible rows as the planner sees them: the top
	// node of its plan is the row count whatever sits above the scan (Gather, Sort).
	probe    string
	estimate string
	// total is every row of the table, whose estimate is the denominator of the eligible share.
	total string
}

// quoteQualified quotes a possibly schema-qualified name ("audit.events" → "audit"."events").
func quoteQualified(name string) string {
	return pgx.Identifier(strings.Split(name, ".")).Sanitize()
}

func buildStatements(p Pass) statements {
	table := quoteQualified(p.Table)
	conds := []string{}
	if strings.TrimSpace(p.Where) != "" {
		conds = append(conds, "("+p.Where+")")
	}
	conds = append(conds, fmt.Sprintf("t.%s < $1", pgx.Identifier{p.AgeColumn}.Sanitize()))
	ownPred := strings.Join(conds, " AND ")
	for _, g := range p.Guards {
		conds = append(conds, fmt.Sprintf("NOT EXISTS (SELECT 1 FROM %s AS g WHERE g.%s = t.%s)",
			quoteQualified(g.Table), pgx.Identifier{g.Column}.Sanitize(), pgx.Identifier{g.References}.Sanitize()))
	}
	pred := strings.Join(conds, " AND ")
	age := pgx.Identifier{p.AgeColumn}.Sanitize()
	key := p.KeyColumn
	if key == "" {
		key = "id"
	}
	return statements{
		predicate:        pred,
		indexBatch:       indexBatchSQL(table, pred, age, "", false),
		indexBatchAfter:  indexBatchSQL(table, pred, age, fmt.Sprintf(" AND t.%s >= $3", age), false),
		indexLocked:      indexBatchSQL(table, pred, age, "", true),
		indexLockedAfter: indexBatchSQL(table, pred, age, fmt.Sprintf(" AND t.%s >= $3", age), true),
		heapBatch:        heapBatchSQL(table, pred, false),
		heapLocked:       heapBatchSQL(table, pred, true),
		single:           fmt.Sprintf(`DELETE FROM %s AS t WHERE %s`, table, pred),
		perRow: fmt.Sprintf(`SELECT %[1]s(k.key) FROM (
  SELECT t.%[2]s AS key FROM %[3]s AS t WHERE %[4]s ORDER BY t.%[5]s LIMIT 1 FOR UPDATE OF t SKIP LOCKED
) AS k`, quoteQualified(p.Function), pgx.Identifier{key}.Sanitize(), table, pred, pgx.Identifier{p.AgeColumn}.Sanitize()),
		count:    fmt.Sprintf(`SELECT count(*) FROM %s AS t WHERE %s`, table, pred),
		plan:     fmt.Sprintf(`SELECT t.ctid FROM %s AS t WHERE %s ORDER BY t.%s LIMIT $2`, table, pred, age),
		probe:    probeSQL(p.Mode, table, ownPred, age),
		estimate: fmt.Sprintf(`SELECT 1 FROM %s AS t WHERE %s`, table, pred),
		total:    fmt.Sprintf(`SELECT 1 FROM %s AS t`, table),
	}
}

// indexBatchSQL is a batch of the index path; after, when set, is the keyset condition that
// resumes it, and lock makes it the locking form (FOR UPDATE SKIP LOCKED on the pick).
func indexBatchSQL(table, pred, age, after string, lock bool) string {
	locking := ""
	if lock {
		locking = " FOR UPDATE SKIP LOCKED"
	}
	return fmt.Sprintf(`WITH deleted AS (
  DELETE FROM %[1]s AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM %[1]s AS t WHERE %[2]s%[4]s ORDER BY t.%[3]s LIMIT $2%[5]s))
     AND %[2]s
  RETURNING t.%[3]s AS age)
SELECT count(*), max(age) FROM deleted`, table, pred, age, after, locking)
}

// heapBatchSQL is a batch of the heap path over the blocks [$2, $3) (tids '(b,0)' and
// '(b+k,0)'); lock makes it the locking form, which picks the range's eligible rows FOR UPDATE
// SKIP LOCKED and deletes those. The range bounds are plain comparisons on ctid, which PostgreSQL
// 14 and later plan as a TID Range Scan: the range's blocks alone are read.
func heapBatchSQL(table, pred string, lock bool) string {
	const blocks = "t.ctid >= $2 AND t.ctid < $3"
	if !lock {
		return fmt.Sprintf(`DELETE FROM %s AS t WHERE %s AND %s`, table, blocks, pred)
	}
	return fmt.Sprintf(`DELETE FROM %[1]s AS t
 WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM %[1]s AS t WHERE %[2]s AND %[3]s FOR UPDATE SKIP LOCKED))
   AND %[3]s`, table, blocks, pred)
}

// probeSQL is the select the index verdict plans: the pass's own read without its keep guards. A
// single-mode pass reads every eligible row in one statement, in no order; the others read the
// oldest rows first, a batch ($2) at a time.
func probeSQL(mode Mode, table, pred, age string) string {
	if mode == ModeSingle {
		return fmt.Sprintf(`SELECT t.ctid FROM %s AS t WHERE %s AND $2::int > 0`, table, pred)
	}
	return fmt.Sprintf(`SELECT t.ctid FROM %s AS t WHERE %s ORDER BY t.%s LIMIT $2`, table, pred, age)
}
