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
		predicate:  pred,
		batch:      batchSQL(table, pred, age, ""),
		batchAfter: batchSQL(table, pred, age, fmt.Sprintf(" AND t.%s >= $3", age)),
		single:     fmt.Sprintf(`DELETE FROM %s AS t WHERE %s`, table, pred),
		perRow: fmt.Sprintf(`SELECT %[1]s(k.key) FROM (
  SELECT t.%[2]s AS key FROM %[3]s AS t WHERE %[4]s ORDER BY t.%[5]s LIMIT 1 FOR UPDATE OF t SKIP LOCKED
) AS k`, quoteQualified(p.Function), pgx.Identifier{key}.Sanitize(), table, pred, pgx.Identifier{p.AgeColumn}.Sanitize()),
		count:    fmt.Sprintf(`SELECT count(*) FROM %s AS t WHERE %s`, table, pred),
		plan:     fmt.Sprintf(`SELECT t.ctid FROM %s AS t WHERE %s ORDER BY t.%s LIMIT $2`, table, pred, age),
		probe:    probeSQL(p.Mode, table, ownPred, age),
		estimate: fmt.Sprintf(`SELECT 1 FROM %s AS t WHERE %s`, table, pred),
	}
}

// batchSQL is the batch delete; after, when set, is the keyset condition that resumes it.
func batchSQL(table, pred, age, after string) string {
	return fmt.Sprintf(`WITH deleted AS (
%s
  RETURNING t.%s AS age)
SELECT count(*), max(age) FROM deleted`, batchDelete(table, pred, age, after), age)
}

// batchDelete is the DELETE of one batch, without its RETURNING: batchSQL's, and the archiving
// batch's (archive.go), which returns whole rows instead.
func batchDelete(table, pred, age, after string) string {
	return fmt.Sprintf(`  DELETE FROM %[1]s AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM %[1]s AS t WHERE %[2]s%[4]s ORDER BY t.%[3]s LIMIT $2 FOR UPDATE SKIP LOCKED))
     AND %[2]s`, table, pred, age, after)
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
