// Package statement owns the SQL a pass runs: templates with named parts (sql/*.sql), rendered
// per pass and kind of age column into Forms that declare their parameters (param.go), and the
// catalog reads by table name (catalog.go). testdata/golden holds what they render; `go test
// ./internal/statement -update` rewrites it, so a changed clause is reviewed as a diff of SQL.
// The target table is always aliased t, in a batch's pick too, so a condition on t.col means the
// same row in both places.
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
var templates = template.Must(template.New("").Option("missingkey=error").
	Funcs(template.FuncMap{"cutoff": func() string { return cutoffPlaceholder }, "literal": literal}).
	ParseFS(files, "sql/*.sql"))

// literal quotes s as a string constant that reads as s whatever standard_conforming_strings
// says, as PostgreSQL's quote_literal does: quotes doubled, and backslashes doubled in an E-prefixed
// string where there are any.
func literal(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		return "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}

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
	// runs only as the retry of an attempt that met a held row lock.
	Unlocked, Locked Batch
	// Bound and BoundAfter answer where an index-path batch's range of ages ends: the age a
	// batch of rows past its start, NULL when fewer are left. Bound, the first batch's, answers
	// its start too, the oldest eligible age (NULL: none). They read the age index alone, under
	// the pass's own condition (Probe's), so the range holds at most a batch of the pass's rows.
	Bound, BoundAfter Form
	// Single deletes every eligible row in one statement, answering the rows deleted (mode single).
	Single Form
	// PerRow locks one eligible key, skipping keys another run holds, and calls the function on
	// it; its SQL is "" for a pass of another mode.
	PerRow Form
	// Count is the dry run's exact count, and each delete_with child's after it.
	Count Form
	// Probe is the batch select without its keep guards, which the index verdict plans: the
	// guards' lookups are judged from the catalog, which keeps the verdict on the swept table.
	Probe Form
	// Lag is the retention lag, read at the end of a run: the seconds the oldest eligible row is
	// past the cutoff, by the age index's first eligible entry; NULL when none is left.
	Lag Form
	// Estimate is the eligible rows as the planner sees them (the top node of its plan), and
	// Total every row of the table: the eligible share the access path is chosen from.
	Estimate, Total Form
}

// Batch is the batch deletes of one lock form, one per access path, each the one this pass
// runs: capped by what max_rows leaves for a pass with max_rows, and in the unlocked form the
// bare DELETE (answering no row: its count is the command tag's) for a pass that needs nothing
// of the rows it deletes (no delete_with, archive_to or max_rows), since projecting them into a
// CTE costs about half as much again as the delete.
type Batch struct {
	// Range deletes the eligible rows of a range of ages, Tail those from an age on: an
	// index-path batch, whose range Set.Bound ends a batch of rows past its start (keyset
	// pagination). The planner knows both ends, and reads the range's rows in heap order (a
	// bitmap scan): each page once, where they are deleted.
	Range, Tail Form
	// IndexAfter deletes a batch of eligible rows from an age on, the oldest first: the index
	// path's batch where more than a batch of rows share the age its range would start at,
	// which would make the range empty. Index is the same from the oldest age, which the
	// policy check plans (internal/check).
	Index, IndexAfter Form
	// Heap deletes the eligible rows of a range of blocks, a TID Range Scan.
	Heap Form
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
	Function, RowKey        string
}

type guard struct {
	Table, Where string
	Pairs        []pair
}

type child struct {
	I     int
	Table string
	Pairs []pair
}

// pair is one column of a reference, quoted: the referencing table's Column, which holds the swept
// table's Reference; As names the swept row's value in a statement's CTE (r<child>, or
// r<child>_<n> for a key of several columns).
type pair struct{ Column, Reference, As string }

// pairs pairs columns with refs (["id"] when empty), quoted; as prefixes the names As gives them.
func pairs(columns, refs []string, as string) []pair {
	refs = policy.Refs(refs)
	out := make([]pair, len(columns))
	for i, c := range columns {
		out[i] = pair{Column: ident(c), Reference: ident(refs[i])}
		if as != "" {
			out[i].As = as
			if len(columns) > 1 {
				out[i].As = fmt.Sprintf("%s_%d", as, i)
			}
		}
	}
	return out
}

// form is what a statement's template reads: the pass, the shape of its batch, the archive it
// moves rows to, and the parameters it declares ({{.Param "name"}} is one's $n).
type form struct {
	pass
	// Heap picks the heap path's DELETE, Range the index path's range of ages (Bounded: with
	// its end), the index path's by rows otherwise (After: from an age on).
	Heap, Range, Bounded, After bool
	// Lock picks FOR UPDATE SKIP LOCKED; Capped deletes at most what max_rows leaves.
	Lock, Capped bool
	// Archive, Columns and Rows are an archiving statement's insert; Key and KeyType the swept
	// table's primary key of one column, for a healing or foreign archive's statement.
	Archive, Columns, Rows, Key, KeyType string
	params                               Params
}

// Param is the placeholder of the parameter name declares in f's list.
func (f form) Param(name string) (string, error) { return f.params.placeholder(name) }

// shape is one batch DELETE: its template's choices and the parameters it binds.
type shape struct {
	heap, rng, bounded, after bool
	params                    Params
}

// The batch DELETEs (sql/batch.sql), each with its parameters; Left is added when capped.
var (
	rangeShape = shape{rng: true, bounded: true, params: Params{Cutoff, From, Before}}
	tailShape  = shape{rng: true, params: Params{Cutoff, From}}
	indexShape = shape{params: Params{Cutoff, Limit}}
	afterShape = shape{after: true, params: Params{Cutoff, Limit, After}}
	heapShape  = shape{heap: true, params: Params{Cutoff, FirstBlock, EndBlock}}
)

// build renders the template name with f as a Form declaring params and answering a.
func build(name string, f form, a Answer, params ...Param) Form {
	f.params = params
	return Form{SQL: render(name, f), Params: params, Answer: a}
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
		v.Children = append(v.Children, child{I: i, Table: QuoteName(c.Table), Pairs: pairs(c.Columns, c.References, fmt.Sprintf("r%d", i))})
	}
	if p.Mode == policy.ModePerRow {
		v.Function, v.RowKey = QuoteName(p.Function), ident(p.KeyColumn)
		if p.KeyColumn == "" {
			v.RowKey = ident("id")
		}
	}
	v.Predicate, v.OwnPredicate = render("predicate", v), render("own-predicate", v)
	return v
}

func newGuard(g policy.Guard, k Kind) guard {
	out := guard{Table: QuoteName(g.Table), Pairs: pairs(g.Columns, g.References, "")}
	if strings.TrimSpace(g.Where) != "" {
		out.Where = Condition(g.Where, k)
	}
	return out
}

// Build renders the statements of p for an age column of kind k.
func Build(p policy.Pass, k Kind) Set {
	v := newPass(p, k)
	f := form{pass: v}
	answer := Answer{Row: true, Newest: true, Children: len(v.Children)}
	bare := len(p.DeleteWith) == 0 && p.ArchiveTo == "" && p.MaxRows == 0
	set := Set{
		Predicate:  v.Predicate,
		Unlocked:   batches(f, p.MaxRows > 0, false, "batch", answer, bare),
		Locked:     batches(f, p.MaxRows > 0, true, "batch", answer, false),
		Bound:      build("index-bound", f, Answer{}, Cutoff, Limit),
		BoundAfter: build("index-bound", form{pass: v, After: true}, Answer{}, Cutoff, Limit, Resume),
		Single:     build("single", f, Answer{Row: true, Children: len(v.Children)}, Cutoff),
		Count:      build("count", f, Answer{}, Cutoff),
		Probe:      build("probe", f, Answer{}, Cutoff, Limit),
		Lag:        build("lag", f, Answer{}, Cutoff),
		Estimate:   build("estimate", f, Answer{}, Cutoff),
		Total:      build("total", f, Answer{}),
	}
	if v.Function != "" {
		set.PerRow = build("per-row", f, Answer{}, Cutoff)
	}
	return set
}

// batches renders the batch deletes of one form (lock: the locking one) with the template
// wrap, which turns a DELETE into the whole statement answering a; capped, at most what
// max_rows leaves; bare, the DELETE alone where it needs no row lock and no cap.
func batches(f form, capped, lock bool, wrap string, a Answer, bare bool) Batch {
	one := func(s shape) Form {
		g := f
		g.Heap, g.Range, g.Bounded, g.After, g.Lock = s.heap, s.rng, s.bounded, s.after, lock
		params := s.params
		if capped && (s.heap || s.rng) {
			g.Capped, params = true, append(params[:len(params):len(params)], Left)
		}
		if bare && !g.Capped && (s.heap || s.rng) {
			return build("delete", g, Answer{}, params...)
		}
		return build(wrap, g, a, params...)
	}
	return Batch{
		Range:      one(rangeShape),
		Tail:       one(tailShape),
		Index:      one(indexShape),
		IndexAfter: one(afterShape),
		Heap:       one(heapShape),
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
