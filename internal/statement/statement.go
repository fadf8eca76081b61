// Package statement owns the SQL a pass runs: templates with named parts (sql/*.sql), rendered
// once per pass and kind of age column into a Set. The golden files under testdata/ hold what
// the templates render for a representative policy; `go test ./internal/statement -update`
// rewrites them, so a changed clause is reviewed as a diff of SQL.
//
// The target table is always aliased t, in a batch's pick too, so a condition written as t.col
// (or col) means the same row in both places. Every statement binds $1 as the cutoff, a
// timestamptz; a batch binds $2 (its size, its first block, or the first age of its range) and $3
// and $4 as its form needs.
package statement

import (
	"embed"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
)

//go:embed sql/*.sql
var files embed.FS

// templates are parsed once; a template that fails to parse or render is a programming error,
// which the golden test catches before it ships.
var templates = template.Must(template.New("").Option("missingkey=error").ParseFS(files, "sql/*.sql"))

// render executes the named template with data.
func render(name string, data any) string {
	var b strings.Builder
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		panic(fmt.Sprintf("statement: render %s: %v", name, err))
	}
	return b.String()
}

// Set is the statements of one pass for one kind of age column.
type Set struct {
	// Predicate is the eligibility condition over alias t; $1 is the cutoff.
	Predicate string
	// Unlocked and Locked are the batch deletes, one per access path. A batch runs the unlocked
	// form first: it takes no row lock before deleting, so a row another transaction holds makes
	// it wait (under the row-lock timeout), and a row changed under us is re-checked after the
	// wait and kept if it no longer qualifies. The locked form picks FOR UPDATE SKIP LOCKED, and
	// runs only as the retry of an attempt that met a held row lock: locking writes a lock record
	// per row before the delete writes its own.
	Unlocked, Locked Batch
	// Bound and BoundAfter answer where an index-path batch's range of ages ends: the age $2
	// rows past its start, NULL when fewer are left. Bound, the first batch's, answers its start
	// too, the oldest eligible age (NULL: none); BoundAfter's start is $3. They read the age
	// index alone, under the pass's own condition (Probe's), so the range [start, end) holds at
	// most $2 of the pass's rows.
	Bound, BoundAfter string
	// RangeBare and TailBare are Unlocked.Range and Unlocked.Tail without their RETURNING and
	// answer, for a pass that needs nothing of the deleted rows (no delete_with, archive_to or
	// max_rows):
	// the range is the index path's cursor, not the newest age deleted. "" otherwise.
	RangeBare, TailBare string
	// HeapBare is Unlocked.Heap without its RETURNING and answer: the bare DELETE, whose row
	// count is the command tag's, for a heap batch that needs nothing of the deleted rows:
	// projecting them into a CTE costs about half as much again as the delete. It is "" for a
	// pass that needs them (delete_with, archive_to, max_rows).
	HeapBare string
	// Single deletes every eligible row in one statement, answering the rows deleted (mode single).
	Single string
	// PerRow locks one eligible key, skipping keys another run holds, and calls the function on it.
	PerRow string
	// Count is the dry run's exact count, and each delete_with child's after it.
	Count string
	// Probe is the batch select without its keep guards, which the index verdict plans: the
	// guards' lookups are judged from the catalog, which keeps the verdict on the swept table.
	Probe string
	// Estimate is the eligible rows as the planner sees them (the top node of its plan), and
	// Total every row of the table: the eligible share the access path is chosen from.
	Estimate, Total string
}

// Batch is the batch deletes of one form (taking row locks or not), one per access path. Each
// answers the rows deleted, the newest age among them, and the rows each delete_with child lost.
type Batch struct {
	// Range deletes the eligible rows of the ages [$2, $3), Tail those from $2 on: an index-path
	// batch, whose range Set.Bound ends a batch of rows past its start (keyset pagination), so
	// every batch reads an index range of about one batch however thin the backlog has become.
	// The planner knows both ends, and reads the range's rows in heap order (a bitmap scan):
	// each page once, where they are deleted.
	Range, Tail string
	// RangeCapped and TailCapped delete at most $4 (Tail: $3) rows of them, for a pass with
	// max_rows, whose cap is exact even where rows reach the range between its bound and its
	// delete.
	RangeCapped, TailCapped string
	// IndexAfter deletes at most $2 eligible rows from age $3 on, the oldest first: the index
	// path's batch where more than a batch of rows share the age its range would start at, which
	// would make the range empty. Index is the same from the oldest age, which the policy check
	// plans (internal/check).
	Index, IndexAfter string
	// Heap deletes the eligible rows of the blocks [$2, $3), a TID Range Scan; HeapCapped
	// deletes at most $4 of them, for a pass with max_rows.
	Heap, HeapCapped string
}

// pass is what the templates read of a pass: names already quoted, conditions with the cutoff
// placeholder bound.
type pass struct {
	Table, Age, Where, Kind, Interval, Zone string
	// PerSecond is the age column's units per second for a number of Unix time; 0 otherwise.
	PerSecond               int64
	Guards                  []guard
	Children                []child
	Predicate, OwnPredicate string
	Single                  bool
	Function, Key           string
}

type guard struct{ Table, Column, References, Where string }

type child struct {
	I                         int
	Table, Column, References string
}

// deletion is what a batch's DELETE template reads: the pass, and the form of its batch.
type deletion struct {
	pass
	// Heap picks the heap path's template, Range the index path's range of ages (Bounded: with
	// its end), index-delete otherwise.
	Heap, Range, Bounded bool
	After, Lock, Capped  bool
}

// deletionSQL renders d's DELETE, without its RETURNING.
func deletionSQL(d deletion) string {
	switch {
	case d.Heap:
		return render("heap-delete", d)
	case d.Range:
		return render("index-range-delete", d)
	}
	return render("index-delete", d)
}

// wrapper is what a batch statement's template reads: its DELETE, rendered, and the pass.
type wrapper struct {
	pass
	Delete, Insert string
}

// newPass quotes and binds what p's statements name, for an age column of kind k.
func newPass(p policy.Pass, k Kind) pass {
	v := pass{
		Table: QuoteName(p.Table), Age: ident(p.AgeColumn), Kind: k.String(),
		Interval: interval(p.Retention), Zone: zone(p),
		Single: p.Mode == policy.ModeSingle, PerSecond: k.perSecond(),
	}
	if strings.TrimSpace(p.Where) != "" {
		v.Where = Condition(p.Where, k)
	}
	for _, g := range p.Guards {
		v.Guards = append(v.Guards, newGuard(g, k))
	}
	for i, c := range p.DeleteWith {
		v.Children = append(v.Children, child{I: i, Table: QuoteName(c.Table), Column: ident(c.Column), References: ident(c.References)})
	}
	if p.Mode == policy.ModePerRow {
		v.Function, v.Key = QuoteName(p.Function), ident(p.KeyColumn)
		if p.KeyColumn == "" {
			v.Key = ident("id")
		}
	}
	v.Predicate, v.OwnPredicate = render("predicate", v), render("own-predicate", v)
	return v
}

func newGuard(g policy.Guard, k Kind) guard {
	out := guard{Table: QuoteName(g.Table), Column: ident(g.Column), References: ident(g.References)}
	if strings.TrimSpace(g.Where) != "" {
		out.Where = Condition(g.Where, k)
	}
	return out
}

// Build renders the statements of p for an age column of kind k.
func Build(p policy.Pass, k Kind) Set {
	v := newPass(p, k)
	batch := func(d deletion) string { return render("batch", wrapper{pass: v, Delete: deletionSQL(d)}) }
	return Set{
		Predicate:  v.Predicate,
		Unlocked:   batches(v, false, batch),
		Locked:     batches(v, true, batch),
		Bound:      render("index-bound", deletion{pass: v}),
		BoundAfter: render("index-bound", deletion{pass: v, After: true}),
		RangeBare:  rangeBare(p, v, true),
		TailBare:   rangeBare(p, v, false),
		HeapBare:   heapBare(p, v),
		Single:     render("single", v),
		PerRow:     perRow(v),
		Count:      render("count", v),
		Probe:      render("probe", v),
		Estimate:   render("estimate", v),
		Total:      render("total", v),
	}
}

// heapBare renders the bare heap DELETE of a pass that needs nothing of the rows it deletes.
func heapBare(p policy.Pass, v pass) string {
	if len(p.DeleteWith) > 0 || p.ArchiveTo != "" || p.MaxRows > 0 {
		return ""
	}
	return render("heap-delete", deletion{pass: v, Heap: true})
}

// rangeBare renders the bare index-path DELETE of a range of ages (bounded: with its end) of a
// pass that needs nothing of the rows it deletes (no delete_with, no archive_to, no max_rows).
func rangeBare(p policy.Pass, v pass, bounded bool) string {
	if len(p.DeleteWith) > 0 || p.ArchiveTo != "" || p.MaxRows > 0 {
		return ""
	}
	return render("index-range-delete", deletion{pass: v, Range: true, Bounded: bounded})
}

// perRow renders a per-row pass's statement; "" for a pass of another mode, which has no function.
func perRow(v pass) string {
	if v.Function == "" {
		return ""
	}
	return render("per-row", v)
}

// batches renders the batch statements of one form (lock: the locking one) with wrap, which
// turns a DELETE into the whole statement.
func batches(v pass, lock bool, wrap func(deletion) string) Batch {
	return Batch{
		Range:       wrap(deletion{pass: v, Range: true, Bounded: true, Lock: lock}),
		Tail:        wrap(deletion{pass: v, Range: true, Lock: lock}),
		RangeCapped: wrap(deletion{pass: v, Range: true, Bounded: true, Lock: lock, Capped: true}),
		TailCapped:  wrap(deletion{pass: v, Range: true, Lock: lock, Capped: true}),
		Index:       wrap(deletion{pass: v, Lock: lock}),
		IndexAfter:  wrap(deletion{pass: v, Lock: lock, After: true}),
		Heap:        wrap(deletion{pass: v, Heap: true, Lock: lock}),
		HeapCapped:  wrap(deletion{pass: v, Heap: true, Lock: lock, Capped: true}),
	}
}

// Guard renders keep guard g of a pass whose age column is of kind k as a condition over alias t
// (the swept row) and g (its table's).
func Guard(g policy.Guard, k Kind) string { return render("guard", newGuard(g, k)) }

// QuoteName quotes a possibly schema-qualified name ("audit.events" → "audit"."events").
func QuoteName(name string) string {
	return pgx.Identifier(strings.Split(name, ".")).Sanitize()
}

// ident quotes one identifier.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// zone is the time zone of p as SQL: a literal, or the session's setting.
func zone(p policy.Pass) string {
	switch p.TimeZone {
	case "", policy.TimeZoneUTC:
		return "'UTC'"
	case policy.TimeZoneDatabase:
		return "current_setting('TimeZone')"
	}
	return "'" + strings.ReplaceAll(p.TimeZone, "'", "''") + "'"
}

// interval writes d as an interval of seconds (or microseconds), never of days: added to a
// timestamptz, a day is 23 or 25 hours across a daylight-saving change, and the reference time
// must come back exact.
func interval(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("interval '%d seconds'", d/time.Second)
	}
	return fmt.Sprintf("interval '%d microseconds'", d/time.Microsecond)
}
