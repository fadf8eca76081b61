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

// List returns what a run of pass p executes with set, then what its dry run executes, in the
// order a run reaches them, each with the parameters its form declares; arch is the run's
// archive statements for a pass with archive_to, nil otherwise. A partitions-mode pass detaches
// and drops its expired partitions first (package partition), then runs the batched statements
// on each boundary partition in place of p.Table.
func List(p policy.Pass, set Set, arch *Archive) []Statement {
	var out []Statement
	add := func(name string, f Form) {
		if f.SQL != "" {
			out = append(out, Statement{Name: name, Params: f.Params.String(), SQL: f.SQL})
		}
	}
	switch p.Mode {
	case policy.ModeSingle:
		single := set.Single
		if arch != nil {
			single = arch.Single
		}
		add("delete every eligible row, in one statement", single)
	case policy.ModePerRow:
		add("per-row: lock one eligible key and call the function on it, once per transaction", set.PerRow)
	default:
		add("access path survey: the eligible rows, as the planner estimates them", set.Estimate)
		add("access path survey: every row, as the planner estimates them", set.Total)
		add("index path: where the first batch's range of ages starts and ends", set.Bound)
		add("index path: where a resumed batch's range of ages ends", set.BoundAfter)
		unlocked, locked := set.Unlocked, set.Locked
		if arch != nil {
			unlocked, locked = arch.Unlocked, arch.Locked
		}
		for _, form := range []struct {
			name string
			b    Batch
		}{{"batch", unlocked}, {"batch retried after a held row lock, skipping held rows", locked}} {
			capped := ""
			if p.MaxRows > 0 {
				capped = ", capped by max_rows"
			}
			add(form.name+", index path, a range of ages"+capped, form.b.Range)
			add(form.name+", index path, the last range of ages"+capped, form.b.Tail)
			add(form.name+", index path, by rows where more than a batch share its first age", form.b.IndexAfter)
			add(form.name+", heap path"+capped, form.b.Heap)
		}
	}
	if arch != nil && p.Mode != policy.ModePerRow {
		add("archive proof, after each batch's statement in its transaction: the deleted keys the archive lacks or holds otherwise", arch.Proof)
	}
	add("end of a run: the retention lag, the oldest eligible row's seconds past the cutoff", set.Lag)
	add("dry run: the exact count", set.Count)
	if p.Mode == policy.ModeSingle || p.Mode == policy.ModePerRow {
		add("dry run: the eligible rows, as the planner estimates them", set.Estimate)
	}
	add("dry run and policy check: the index verdict's select, sequential scans and sorts priced out", set.Probe)
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
	if _, err := fmt.Fprintf(w, "-- %s\n", OneLine(title)); err != nil {
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
