package statement

import (
	"cmp"
	"fmt"
	"io"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// Statement is one statement that a run or a dry run of a pass executes, as `api policy sql`
// prints it and the golden files hold it.
type Statement struct {
	// Name says when it runs.
	Name string
	// Params names its placeholders; "" for none.
	Params string
	// SQL is the statement as sent.
	SQL string
}

// The placeholders, as the listing names them.
const (
	paramCutoff = "$1 cutoff (timestamptz: the run's reference time minus the retention)"
	paramBatch  = paramCutoff + ", $2 batch size (rows)"
	paramAfter  = paramBatch + ", $3 first age of the batch"
	paramBound  = paramBatch + ", $3 first age of the batch's range"
	paramRange  = paramCutoff + ", $2 first age of the range, $3 the age it ends before"
	paramTail   = paramCutoff + ", $2 first age of the range"
	paramBlocks = paramCutoff + ", $2 and $3 first and end block of the range (tid '(b,0)')"
	paramCapped = paramBlocks + ", $4 rows max_rows leaves"
)

// List returns what a run of pass p executes with set, then what its dry run executes, in the
// order a run reaches them; arch is the run's archive statements for a pass with archive_to,
// nil otherwise. A partitions-mode pass detaches and drops its expired partitions first (package
// partition), then runs the batched statements on each boundary partition in place of p.Table.
func List(p policy.Pass, set Set, arch *Archive) []Statement {
	var out []Statement
	add := func(name, params, sql string) {
		if sql != "" {
			out = append(out, Statement{Name: name, Params: params, SQL: sql})
		}
	}
	switch p.Mode {
	case policy.ModeSingle:
		single := set.Single
		if arch != nil {
			single = arch.Single
		}
		add("delete every eligible row, in one statement", paramCutoff, single)
	case policy.ModePerRow:
		add("per-row: lock one eligible key and call the function on it, once per transaction", paramCutoff, set.PerRow)
	default:
		add("access path survey: the eligible rows, as the planner estimates them", paramCutoff, set.Estimate)
		add("access path survey: every row, as the planner estimates them", "", set.Total)
		add("index path: where the first batch's range of ages starts and ends", paramBatch, set.Bound)
		add("index path: where a resumed batch's range of ages ends", paramBound, set.BoundAfter)
		unlocked, locked := set.Unlocked, set.Locked
		if arch != nil {
			unlocked, locked = arch.Unlocked, arch.Locked
		}
		for _, form := range []struct {
			name  string
			b     Batch
			retry bool
		}{{"batch", unlocked, false}, {"batch retried after a held row lock, skipping held rows", locked, true}} {
			switch {
			case p.MaxRows > 0:
				add(form.name+", index path, a range of ages, capped by max_rows", paramRange+", $4 rows max_rows leaves", form.b.RangeCapped)
				add(form.name+", index path, the last range of ages, capped by max_rows", paramTail+", $3 rows max_rows leaves", form.b.TailCapped)
			case !form.retry && set.RangeBare != "":
				add(form.name+", index path, a range of ages", paramRange, set.RangeBare)
				add(form.name+", index path, the last range of ages", paramTail, set.TailBare)
			default:
				add(form.name+", index path, a range of ages", paramRange, form.b.Range)
				add(form.name+", index path, the last range of ages", paramTail, form.b.Tail)
			}
			add(form.name+", index path, by rows where more than a batch share its first age", paramAfter, form.b.IndexAfter)
			switch {
			case p.MaxRows > 0:
				add(form.name+", heap path, capped by max_rows", paramCapped, form.b.HeapCapped)
			case !form.retry && set.HeapBare != "":
				add(form.name+", heap path", paramBlocks, set.HeapBare)
			default:
				add(form.name+", heap path", paramBlocks, form.b.Heap)
			}
		}
	}
	add("dry run: the exact count", paramCutoff, set.Count)
	if p.Mode == policy.ModeSingle || p.Mode == policy.ModePerRow {
		add("dry run: the eligible rows, as the planner estimates them", paramCutoff, set.Estimate)
	}
	add("dry run and policy check: the index verdict's select, sequential scans and sorts priced out", paramBatch, set.Probe)
	return out
}

// Title names a pass's statements: its sweep, its table and age column, the column's kind, and
// its mode.
func Title(sweep string, p policy.Pass, k Kind) string {
	return fmt.Sprintf("sweep %s, pass %s: table %s, age column %s (%s), mode %s",
		sweep, p.Name, p.Table, p.AgeColumn, k, cmp.Or(p.Mode, policy.ModeBatched))
}

// Write writes title as a comment, then each statement under a comment naming it and its
// placeholders, ended by a semicolon: SQL a DBA can read, and plan by hand.
func Write(w io.Writer, title string, list []Statement) error {
	if _, err := fmt.Fprintf(w, "-- %s\n", title); err != nil {
		return err
	}
	for _, s := range list {
		params := ""
		if s.Params != "" {
			params = "\n--   " + s.Params
		}
		if _, err := fmt.Fprintf(w, "\n-- %s%s\n%s;\n", s.Name, params, s.SQL); err != nil {
			return err
		}
	}
	return nil
}
