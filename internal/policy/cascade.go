package policy

import (
	"fmt"
	"slices"
)

// checkCascades holds validatePass's rules for cascades: the tables a pass's deletes change
// through the schema's own ON DELETE CASCADE, SET NULL and SET DEFAULT keys, named so that the
// policy says everything a pass deletes. Which tables those are is the live schema's to say
// (check.Policy walks the keys); here only the names and the mode.
func checkCascades(p Pass, mode Mode) []problem {
	var out []problem
	add := func(field, format string, args ...any) {
		out = append(out, problem{field: field, msg: fmt.Sprintf(format, args...)})
	}
	if len(p.Cascades) > 0 && (mode == ModePerRow || mode == ModePartitions) {
		add("cascades", "cascades is for modes batched and single: in mode %s the %s, and the policy check does not follow its keys; remove it", mode,
			map[Mode]string{ModePerRow: "function deletes", ModePartitions: "partitions are dropped"}[mode])
	}
	// The swept table (by a key onto itself) and a delete_with child may be named too: the
	// schema's keys delete rows of theirs beyond the statement's own, counted apart from them.
	// Whether a key reaches a table is the live schema's to say: the check refuses a named table
	// no key reaches, and an unnamed one a key does.
	for i, t := range p.Cascades {
		field := fmt.Sprintf("cascades.%d", i)
		if err := checkRelationName(t); err != nil {
			add(field, "cascades table %q: %v", t, err)
		}
		if j := slices.Index(p.Cascades, t); j < i {
			add(field, "cascades names %s twice (entries %d and %d): keep one", t, j+1, i+1)
		}
	}
	return out
}

// DeletedTables are the tables pass p deletes from, as sweeprail_rows_deleted_total labels them:
// its own, its delete_with children's, then its cascades', each once. A per-row pass has none:
// it deletes nothing itself, and its function's calls are counted as keys processed.
func DeletedTables(p Pass) []string {
	if p.Mode == ModePerRow {
		return nil
	}
	var out []string
	add := func(t string) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	add(p.Table)
	for _, c := range p.DeleteWith {
		add(c.Table)
	}
	for _, t := range p.Cascades {
		add(t)
	}
	return out
}
