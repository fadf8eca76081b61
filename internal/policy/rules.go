package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// problems collects the problems of one pass, in the order its rules are checked.
type problems []problem

func (ps *problems) add(field, format string, args ...any) {
	*ps = append(*ps, problem{field: field, msg: fmt.Sprintf(format, args...)})
}

// validatePass is the one check of a pass's own rules, shared by Load (which adds lines),
// Validate (specs built in Go, retention overrides) and Policy.Problems. A pass field's rules live
// here and nowhere else. It reports every problem at once; sweep and pass are left for the caller.
func validatePass(p Pass) []problem {
	var out problems
	out = append(out, namingProblems(p)...)
	out = append(out, windowProblems(p)...)
	out = append(out, conditionProblems(p)...)
	out = append(out, validateChildren(p)...)
	mode := p.Mode
	switch mode {
	case "":
		mode = ModeBatched
	case ModeBatched, ModeSingle, ModePerRow, ModePartitions:
	default:
		out.add("mode", "unknown mode %q: want batched (the default), single, per-row or partitions", p.Mode)
		return out // the rules below depend on the mode
	}
	out = append(out, partitionProblems(p, mode)...)
	out = append(out, perRowProblems(p, mode)...)
	out = append(out, capProblems(p, mode)...)
	return out
}

// namingProblems checks the names a pass is found by: its own, its table's, its age column's.
func namingProblems(p Pass) (out problems) {
	if !nameRE.MatchString(p.Name) {
		out.add("name", "the name must be lower-case letters, digits and single dashes, such as expired: it labels metrics and answers")
	}
	if p.Table == "" {
		out.add("table", "table is required")
	} else if err := checkRelationName(p.Table); err != nil {
		out.add("table", "table %q: %v", p.Table, err)
	}
	if p.AgeColumn == "" {
		out.add("age_column", "age_column is required")
	} else if err := checkColumnName(p.AgeColumn); err != nil {
		out.add("age_column", "age_column %q: %v", p.AgeColumn, err)
	}
	return out
}

// windowProblems checks what sets a row's cutoff: the retention and its floor, the time zone and
// the age column's unit.
func windowProblems(p Pass) (out problems) {
	if p.Expiry && p.AllowShortRetention {
		out.add("allow_short_retention", "allow_short_retention has no effect with expiry: true (an expiry's grace may be anything from 0s): remove it")
	} else if msg := checkRetention(p.Retention, p.AllowShortRetention, p.Expiry); msg != "" {
		out.add("retention", "%s", msg)
	} else if p.MinRetention > 0 && p.Retention < p.MinRetention {
		out.add("retention", "retention %s is below this pass's min_retention of %s: the pass keeps its rows at least that long "+
			"whatever SWEEP_RETENTION says; lower min_retention in the policy to shorten it",
			formatDuration(p.Retention), formatDuration(p.MinRetention))
	}
	if p.MinRetention < 0 {
		out.add("min_retention", "min_retention %s is negative: want the shortest window the pass may keep, such as 365d", formatDuration(p.MinRetention))
	}
	if msg := checkTimeZone(p.TimeZone); msg != "" {
		out.add("time_zone", "%s", msg)
	}
	if msg := checkAgeUnit(p.AgeUnit); msg != "" {
		out.add("age_unit", "%s", msg)
	} else if p.AgeUnit != "" && p.TimeZone != "" && p.TimeZone != TimeZoneUTC {
		out.add("time_zone", "time_zone has no effect with age_unit: Unix time counts from one instant, whatever the zone; remove time_zone")
	}
	return out
}

// conditionProblems checks the pass's where and its keep guards.
func conditionProblems(p Pass) (out problems) {
	if strings.TrimSpace(p.Where) != "" {
		for _, problem := range checkCondition(p.Where) {
			out.add("where", "where: %s", problem)
		}
	}
	for i, g := range p.Guards {
		field := fmt.Sprintf("guard.%d", i)
		if err := checkRelationName(g.Table); err != nil {
			out.add(field+".table", "keep guard table %q: %v", g.Table, err)
		}
		out = append(out, checkPairs(field, "keep guard", g.Columns, g.References)...)
		if g.Where != "" {
			for _, problem := range checkCondition(g.Where) {
				out.add(field+".where", "keep guard where: %s", problem)
			}
		}
	}
	return out
}

// partitionProblems checks the fields that are for mode partitions alone, and the row rules that
// mode cannot keep: a whole partition goes whatever its rows say.
func partitionProblems(p Pass, mode Mode) (out problems) {
	if mode == ModePartitions {
		if strings.TrimSpace(p.Where) != "" {
			out.add("where", "where is not for mode partitions: a dropped partition takes every row in it; sweep such rows with a batched pass")
		}
		if len(p.Guards) > 0 {
			out.add("keep_while_referenced_by", "keep guards are not for mode partitions: a dropped partition takes every row in it")
		}
		if len(p.DeleteWith) > 0 {
			out.add("delete_with", "delete_with is not for mode partitions: a dropped partition's rows go without their children")
		}
		if p.TimeZone != "" && p.TimeZone != TimeZoneUTC {
			out.add("time_zone", "time_zone is not for mode partitions: partitions expire by their bounds on the UTC calendar, and the boundary's rows must go by the same one")
		}
	} else {
		if p.KeepDetached {
			out.add("keep_detached", "keep_detached is only for mode partitions: remove it")
		}
		if p.ArchiveSchema != "" {
			out.add("archive_schema", "archive_schema is only for mode partitions (it moves whole partitions): for rows, use archive_to")
		}
		if p.Boundary != "" {
			out.add("boundary", "boundary is only for mode partitions: remove it")
		}
	}
	if p.ArchiveSchema != "" {
		if err := checkIdentifier(p.ArchiveSchema); err != nil {
			out.add("archive_schema", "archive_schema %q: %v", p.ArchiveSchema, err)
		}
		if p.KeepDetached {
			out.add("archive_schema", "archive_schema keeps the detached partitions already, in that schema: remove keep_detached")
		}
	}
	switch p.Boundary {
	case "", BoundaryDelete, BoundaryKeep:
	default:
		out.add("boundary", "unknown boundary %q: want delete (the default: the straddling partition's expired rows are deleted in batches) or keep", p.Boundary)
	}
	return out
}

// perRowProblems checks function and key_column, which are for mode per-row alone.
func perRowProblems(p Pass, mode Mode) (out problems) {
	if p.Function != "" {
		if err := checkRelationName(p.Function); err != nil {
			out.add("function", "function %q: %v", p.Function, err)
		}
	}
	if p.KeyColumn != "" {
		if err := checkColumnName(p.KeyColumn); err != nil {
			out.add("key_column", "key_column %q: %v", p.KeyColumn, err)
		}
	}
	switch {
	case mode == ModePerRow && p.Function == "":
		out.add("mode", "mode per-row needs a function: the SQL function called once per eligible row with its key_column (default id)")
	case mode != ModePerRow && p.Function != "":
		out.add("function", "function is only for mode per-row (this pass is %s): set mode: per-row, or remove function", mode)
	case mode != ModePerRow && p.KeyColumn != "":
		out.add("key_column", "key_column is only for mode per-row (this pass is %s): remove it", mode)
	}
	return out
}

// capProblems checks the batch size and the caps, then what the pass does with the rows beside
// deleting them (cascades, archive_to, delete_with), in the mode it runs in.
func capProblems(p Pass, mode Mode) (out problems) {
	if p.BatchSize != 0 {
		if msg := checkBatchSize(mode, p.BatchSize); msg != "" {
			out.add("batch_size", "%s", msg)
		}
	}
	if p.MaxBatches != 0 {
		if msg := checkMaxBatches(mode, p.MaxBatches); msg != "" {
			out.add("max_batches", "%s", msg)
		}
	}
	out = append(out, checkCascades(p, mode)...)
	if p.ArchiveTo != "" {
		for _, msg := range checkArchiveTo(p, mode) {
			out.add("archive_to", "%s", msg)
		}
	}
	if p.MaxRows != 0 {
		if msg := checkMaxRows(mode, p.MaxRows); msg != "" {
			out.add("max_rows", "%s", msg)
		}
	}
	if mode == ModePerRow && len(p.DeleteWith) > 0 {
		out.add("delete_with", "delete_with has no effect in mode per-row: the function deletes; delete the children in it, or use mode batched")
	}
	if p.ArchiveTo != "" && len(p.DeleteWith) > 0 {
		out.add("archive_to", "archive_to and delete_with together are refused: the children would be deleted without being archived; archive the children in a pass of their own, before this one")
	}
	return out
}

// validateChildren checks a pass's delete_with entries: names, no child twice, and none that an
// unconditional keep guard on the same reference makes pointless.
func validateChildren(p Pass) (out problems) {
	seen := map[[2]string]int{}
	for i, c := range p.DeleteWith {
		field := fmt.Sprintf("delete_with.%d", i)
		if err := checkRelationName(c.Table); err != nil {
			out.add(field+".table", "delete_with table %q: %v", c.Table, err)
		}
		out = append(out, checkPairs(field, "delete_with", c.Columns, c.References)...)
		key := [2]string{c.Table, strings.Join(c.Columns, ", ")}
		if j, dup := seen[key]; dup {
			out.add(field, "delete_with names %s.%s twice (entries %d and %d): keep one", c.Table, ColumnText(c.Columns), j+1, i+1)
		}
		seen[key] = i
		for gi, g := range p.Guards {
			if g.Where == "" && g.Table == c.Table && samePairs(g.Columns, Refs(g.References), c.Columns, Refs(c.References)) {
				out.add(field, "keep guard %d keeps every row that %s.%s references, so delete_with would never delete one of its children: give the guard a where (keep only while a child is in some state), or remove one of them",
					gi+1, c.Table, ColumnText(c.Columns))
			}
		}
	}
	return out
}

// checkMaxRows says why a pass's max_rows is refused, or "" when it is not, as checkBatchSize.
func checkMaxRows(mode Mode, v int) string {
	switch {
	case mode == ModeSingle:
		return "max_rows has no effect in mode single (one statement deletes every eligible row): remove it, or use mode batched"
	case mode == ModePerRow:
		return "max_rows has no effect in mode per-row (one row per call): cap the calls with max_batches"
	case mode == ModePartitions:
		return "max_rows is not for mode partitions: a dropped partition takes every row in it, whatever the cap; cap the drops with max_batches"
	case v < 1:
		return fmt.Sprintf("max_rows %d must be at least 1, or leave it out for no cap", v)
	}
	return ""
}

// checkBatchSize says why a pass's batch_size is refused, or "" when it is not. In a Pass, 0
// means "the server's setting"; the loader asks about a batch_size written as 0 too.
func checkBatchSize(mode Mode, v int) string {
	switch {
	case mode != ModeBatched && mode != ModePartitions:
		return fmt.Sprintf("batch_size has no effect in mode %s (%s): remove it", mode, modeBatching(mode))
	case v < wire.MinRequestBatchSize || v > wire.MaxRequestBatchSize:
		return fmt.Sprintf("batch_size %d is out of range: want %d to %d, or leave it out for the server's BATCH_SIZE",
			v, wire.MinRequestBatchSize, wire.MaxRequestBatchSize)
	}
	return ""
}

// checkMaxBatches says why a pass's max_batches is refused, or "" when it is not, as checkBatchSize.
func checkMaxBatches(mode Mode, v int) string {
	switch {
	case mode == ModeSingle:
		return fmt.Sprintf("max_batches has no effect in mode single (%s): remove it", modeBatching(mode))
	case v < 1:
		return fmt.Sprintf("max_batches %d must be at least 1, or leave it out for the server's MAX_BATCHES", v)
	}
	return ""
}

func modeBatching(m Mode) string {
	if m == ModeSingle {
		return "one statement deletes every eligible row"
	}
	return "one row per call; max_batches caps the calls"
}

// checkRetention says why a retention window is refused, or "" when it is not; short says the
// pass allows short retention, expiry that its age column holds when a row expires, which makes
// the retention a grace after it: any grace from zero up is sound, since the column itself says
// when the row may go.
func checkRetention(d time.Duration, short, expiry bool) string {
	if expiry {
		if d < 0 {
			return fmt.Sprintf("retention %s is negative: with expiry: true the retention is the grace after each row's expiry, and a negative one would delete rows before they expire; want 0s or more", formatDuration(d))
		}
		return ""
	}
	floor := "the floor of " + formatDuration(MinRetention)
	if short {
		floor = "the floor of " + formatDuration(MinShortRetention) + " (allow_short_retention)"
	}
	switch {
	case d == 0:
		return fmt.Sprintf("retention 0 is below %s: a zero window makes every row eligible and would delete live data (if age_column holds when each row expires, say expiry: true, and retention is the grace after it)", floor)
	case d < 0:
		return fmt.Sprintf("retention %s is below %s: a negative window puts the cutoff in the future and would delete live data", formatDuration(d), floor)
	case short && d < MinShortRetention:
		return fmt.Sprintf("retention %s is below %s: a window that short would delete rows still being worked on", formatDuration(d), floor)
	case !short && d < MinRetention:
		hint := "write a longer window, or set allow_short_retention: true for a job queue that keeps finished rows for minutes"
		if d%time.Minute == 0 {
			hint = fmt.Sprintf("did you mean %dd? (for a job queue that keeps finished rows for minutes, set allow_short_retention: true)", d/time.Minute)
		}
		return fmt.Sprintf("retention %s is below %s: a window that short would delete live data; %s", formatDuration(d), floor, hint)
	}
	return ""
}

// checkPairs checks the columns of a keep guard or delete_with entry (what, at field) and the
// swept table's columns they hold: names, one reference per column, none named twice. Empty
// references stand for ["id"].
func checkPairs(field, what string, columns, refs []string) (out problems) {
	for _, c := range columns {
		if err := checkColumnName(c); err != nil {
			out.add(field+".column", "%s column %q: %v", what, c, err)
		}
	}
	for _, r := range refs {
		if err := checkColumnName(r); err != nil {
			out.add(field+".references", "%s references %q: %v", what, r, err)
		}
	}
	at := field + ".references"
	if len(refs) == 0 {
		at = field
	}
	switch all := Refs(refs); {
	case len(columns) == 0:
		out.add(field+".column", "%s names no column: want column: <name>, or a list of them for a key of several columns", what)
	case len(all) != len(columns):
		out.add(at, "%s names %d columns (%s) and %d references (%s): want one reference per column, in the same order, each the swept table's column it holds (references: [a, b] for column: [a_ref, b_ref])",
			what, len(columns), strings.Join(columns, ", "), len(all), strings.Join(all, ", "))
	case repeated(columns) != "":
		out.add(field+".column", "%s names column %q twice: each column of a key once", what, repeated(columns))
	case repeated(all) != "":
		out.add(field+".references", "%s references column %q twice: each column of a key once", what, repeated(all))
	}
	return out
}

// repeated returns the first name in names given twice, "" when none is.
func repeated(names []string) string {
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			return n
		}
	}
	return ""
}

// samePairs reports whether two entries pair the same columns with the same references, in any
// order.
func samePairs(cols, refs, otherCols, otherRefs []string) bool {
	if len(cols) != len(otherCols) || len(cols) != len(refs) || len(otherCols) != len(otherRefs) {
		return false
	}
	for i, c := range cols {
		j := slices.Index(otherCols, c)
		if j < 0 || otherRefs[j] != refs[i] {
			return false
		}
	}
	return true
}

// ColumnText writes a guard's or child's columns as a message names them: the column alone, or
// (a, b) for several.
func ColumnText(columns []string) string {
	if len(columns) == 1 {
		return columns[0]
	}
	return "(" + strings.Join(columns, ", ") + ")"
}
