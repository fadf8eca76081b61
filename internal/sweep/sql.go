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
	// batch deletes at most $2 eligible rows, the oldest first: it picks their ctids with FOR
	// UPDATE SKIP LOCKED and deletes them in the same statement, with the predicate standing on
	// the target as well, so a row changed under us between the pick and the delete is re-checked
	// (READ COMMITTED re-evaluates the WHERE of an updated row) and kept if it no longer
	// qualifies. It answers the rows deleted and the newest age among them.
	batch string
	// batchAfter is batch resumed at age $3, the newest age the pass's previous batch deleted
	// (keyset pagination). Every batch, the last included, then reads an index range of about
	// one batch: a batch that resumed from the start of the index, or a sequential scan, would
	// cost O(table) once the backlog thins out, and the last batch of a large drain would run
	// into the statement timeout (docs/BENCHMARKS.md, the scale run and "What was tried" 3).
	batchAfter string
	// single deletes every eligible row in one statement, answering the rows deleted.
	single string
	// perRow locks one eligible key (skipping keys another run holds) and calls the function on it.
	perRow string
	// batch, batchAfter and single answer the rows each delete_with child lost after their own
	// columns; count answers the children's counts after the eligible rows'.
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
	return statements{
		predicate:  pred,
		batch:      batchSQL(table, pred, age, "", with),
		batchAfter: batchSQL(table, pred, age, fmt.Sprintf(" AND t.%s >= $3", age), with),
		single:     singleSQL(table, pred, with),
		perRow: fmt.Sprintf(`SELECT %[1]s(k.key) FROM (
  SELECT t.%[2]s AS key FROM %[3]s AS t WHERE %[4]s ORDER BY t.%[5]s LIMIT 1 FOR UPDATE OF t SKIP LOCKED
) AS k`, quoteQualified(p.Function), pgx.Identifier{key}.Sanitize(), table, pred, pgx.Identifier{p.AgeColumn}.Sanitize()),
		count:    countSQL(table, pred, p.DeleteWith),
		plan:     fmt.Sprintf(`SELECT t.ctid FROM %s AS t WHERE %s ORDER BY t.%s LIMIT $2`, table, pred, age),
		probe:    probeSQL(p.Mode, table, ownPred, age),
		estimate: fmt.Sprintf(`SELECT 1 FROM %s AS t WHERE %s`, table, pred),
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

// batchSQL is the batch delete; after, when set, is the keyset condition that resumes it; with is
// what the statement does alongside the delete (delete_with's children).
func batchSQL(table, pred, age, after string, with alongside) string {
	return fmt.Sprintf(`WITH deleted AS (
%[1]s
  RETURNING t.%[2]s AS age%[3]s)%[4]s
SELECT count(*), max(age)%[5]s FROM deleted`, batchDelete(table, pred, age, after), age, with.returning, with.ctes, with.answer)
}

// batchDelete is the DELETE of one batch, without its RETURNING: batchSQL's, and the archiving
// batch's (archive.go), which returns whole rows instead.
func batchDelete(table, pred, age, after string) string {
	return fmt.Sprintf(`  DELETE FROM %[1]s AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM %[1]s AS t WHERE %[2]s%[4]s ORDER BY t.%[3]s LIMIT $2 FOR UPDATE SKIP LOCKED))
     AND %[2]s`, table, pred, age, after)
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
