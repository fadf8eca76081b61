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
	// unlocked and locked are the batch deletes, a statement per access path (batchStatements).
	// A batch runs the unlocked form first: it takes no row lock before deleting, so a row
	// another transaction holds makes it wait (under rowLockTimeout), and a row changed under us
	// is re-checked after the wait (READ COMMITTED re-evaluates the WHERE on the row's new
	// version, the predicate standing on the delete target) and kept if it no longer qualifies.
	// The locked form picks its rows FOR UPDATE SKIP LOCKED, so held rows are skipped rather than
	// waited for; a batch runs it only as the retry of an attempt that met a held row lock:
	// locking writes a lock record per row before the delete writes its own (docs/BENCHMARKS.md,
	// "Where the time goes").
	unlocked, locked batchStatements
	// heapBare is unlocked.heap without its RETURNING and answer: the bare DELETE, whose row
	// count is the command tag's. A heap batch runs it where nothing else needs the deleted
	// rows (no delete_with, no archive_to, no max_rows): projecting every deleted row into the
	// CTE costs about half as much again as the delete (docs/BENCHMARKS.md, "What was tried" 14).
	heapBare string
	// single deletes every eligible row in one statement, answering the rows deleted.
	single string
	// perRow locks one eligible key (skipping keys another run holds) and calls the function on it.
	perRow string
	// The batch statements and single answer the rows each delete_with child lost after their
	// own columns; count answers the children's counts after the eligible rows'.
	//
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

// batchStatements are the batch deletes of one form (taking row locks or not), one per access
// path. Each answers the rows deleted, the newest age among them, and the rows each delete_with
// child lost with them.
type batchStatements struct {
	// index deletes at most $2 eligible rows, the oldest first, picking their ctids from the age
	// index and deleting them in the same statement. indexAfter is index resumed at age $3, the
	// newest age the pass's previous batch deleted (keyset pagination). Every batch, the last
	// included, then reads an index range of about one batch: a batch that resumed from the
	// start of the index, or a sequential scan, would cost O(table) once the backlog thins out,
	// and the last batch of a large drain would run into the statement timeout
	// (docs/BENCHMARKS.md, the scale run and "What was tried" 3).
	index, indexAfter string
	// heap deletes the eligible rows of the blocks [$2, $3) (ctids '(b,0)' to '(b+k,0)'), a TID
	// Range Scan: the range's blocks alone are read. heapCapped deletes at most $4 of them, for
	// a pass with max_rows, whose cap a block range alone cannot keep exact.
	heap, heapCapped string
}

// quoteQualified quotes a possibly schema-qualified name ("audit.events" → "audit"."events").
func quoteQualified(name string) string {
	return pgx.Identifier(strings.Split(name, ".")).Sanitize()
}

// buildStatements writes the statements of p for an age column of kind k (see cutoff.go).
func buildStatements(p Pass, k ageKind) statements {
	table := quoteQualified(p.Table)
	conds := []string{}
	if strings.TrimSpace(p.Where) != "" {
		conds = append(conds, "("+withCutoff(p.Where)+")")
	}
	conds = append(conds, ageTest(p, k))
	ownPred := strings.Join(conds, " AND ")
	for _, g := range p.Guards {
		conds = append(conds, guardSQL(g))
	}
	pred := strings.Join(conds, " AND ")
	age := pgx.Identifier{p.AgeColumn}.Sanitize()
	key := p.KeyColumn
	if key == "" {
		key = "id"
	}
	with := childrenSQL(p.DeleteWith)
	wrap := func(del string) string { return batchSQL(del, age, with) }
	return statements{
		predicate: pred,
		unlocked:  buildBatches(table, pred, age, false, wrap),
		locked:    buildBatches(table, pred, age, true, wrap),
		heapBare:  heapDelete(table, pred, false, false),
		single:    singleSQL(table, pred, with),
		perRow: fmt.Sprintf(`SELECT %[1]s(k.key) FROM (
  SELECT t.%[2]s AS key FROM %[3]s AS t WHERE %[4]s ORDER BY t.%[5]s LIMIT 1 FOR UPDATE OF t SKIP LOCKED
) AS k`, quoteQualified(p.Function), pgx.Identifier{key}.Sanitize(), table, pred, pgx.Identifier{p.AgeColumn}.Sanitize()),
		count:    countSQL(table, pred, p.DeleteWith),
		plan:     fmt.Sprintf(`SELECT t.ctid FROM %s AS t WHERE %s ORDER BY t.%s LIMIT $2`, table, pred, age),
		probe:    probeSQL(p.Mode, table, ownPred, age),
		estimate: fmt.Sprintf(`SELECT 1 FROM %s AS t WHERE %s`, table, pred),
		total:    fmt.Sprintf(`SELECT 1 FROM %s AS t`, table),
	}
}

// guardSQL is keep guard g as a condition over alias t: no row of its table, aliased g, that
// references the row (and, for a conditional guard, for which its where holds).
func guardSQL(g Guard) string {
	cond := fmt.Sprintf("g.%s = t.%s", pgx.Identifier{g.Column}.Sanitize(), pgx.Identifier{g.References}.Sanitize())
	if strings.TrimSpace(g.Where) != "" {
		cond += " AND (" + withCutoff(g.Where) + ")"
	}
	return fmt.Sprintf("NOT EXISTS (SELECT 1 FROM %s AS g WHERE %s)", quoteQualified(g.Table), cond)
}

// buildBatches writes the batch statements of one form (lock: the locking one); wrap turns a
// batch's DELETE, without its RETURNING, into the whole statement: batchSQL, or an archiving
// pass's archiveBatchSQL.
func buildBatches(table, pred, age string, lock bool, wrap func(del string) string) batchStatements {
	after := fmt.Sprintf(" AND t.%s >= $3", age)
	return batchStatements{
		index:      wrap(indexDelete(table, pred, age, "", lock)),
		indexAfter: wrap(indexDelete(table, pred, age, after, lock)),
		heap:       wrap(heapDelete(table, pred, lock, false)),
		heapCapped: wrap(heapDelete(table, pred, lock, true)),
	}
}

// batchSQL is a batch statement around del, its DELETE; with is what the statement does
// alongside the delete (delete_with's children).
func batchSQL(del, age string, with alongside) string {
	return fmt.Sprintf(`WITH deleted AS (
%[1]s
  RETURNING t.%[2]s AS age%[3]s)%[4]s
SELECT count(*), max(age)%[5]s FROM deleted`, del, age, with.returning, with.ctes, with.answer)
}

// indexDelete is the DELETE of an index-path batch: at most $2 rows picked by ctid from the age
// index, the predicate standing on the target too. after, when set, is the keyset condition that
// resumes it; lock makes the pick FOR UPDATE SKIP LOCKED.
func indexDelete(table, pred, age, after string, lock bool) string {
	return fmt.Sprintf(`  DELETE FROM %[1]s AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM %[1]s AS t WHERE %[2]s%[4]s ORDER BY t.%[3]s LIMIT $2%[5]s))
     AND %[2]s`, table, pred, age, after, locking(lock))
}

// heapDelete is the DELETE of a heap-path batch over the blocks [$2, $3). Its plain form is the
// range and the predicate alone; lock (pick the range's rows FOR UPDATE SKIP LOCKED) and capped
// (pick at most $4) pick first and delete what they picked, the predicate standing on the target.
// The range bounds are plain comparisons on ctid, which PostgreSQL 14 and later plan as a TID
// Range Scan.
func heapDelete(table, pred string, lock, capped bool) string {
	const blocks = "t.ctid >= $2 AND t.ctid < $3"
	if !lock && !capped {
		return fmt.Sprintf(`  DELETE FROM %s AS t WHERE %s AND %s`, table, blocks, pred)
	}
	limit := ""
	if capped {
		limit = " LIMIT $4"
	}
	return fmt.Sprintf(`  DELETE FROM %[1]s AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM %[1]s AS t WHERE %[2]s AND %[3]s%[4]s%[5]s))
     AND %[3]s`, table, blocks, pred, limit, locking(lock))
}

// locking is the row-locking clause of a batch's pick, when lock.
func locking(lock bool) string {
	if lock {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// singleSQL deletes every eligible row in one statement, answering how many (and how many
// children went with them).
func singleSQL(table, pred string, with alongside) string {
	return fmt.Sprintf(`WITH deleted AS (
  DELETE FROM %[1]s AS t WHERE %[2]s
  RETURNING 1 AS one%[3]s)%[4]s
SELECT count(*)%[5]s FROM deleted`, table, pred, with.returning, with.ctes, with.answer)
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
