package statement

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// Grants returns the least privileges the statements of specs need, as GRANT statements to role,
// one per object, in a stable order:
//
//	swept table          SELECT, UPDATE (the row locks of FOR UPDATE SKIP LOCKED), DELETE
//	keep guard's table   SELECT
//	archive_to table     INSERT, SELECT (each batch reads its rows back from it)
//	delete_with child    SELECT, DELETE
//	cascades table       SELECT (the dry run counts its rows; the keys' own triggers delete them)
//	per-row function     EXECUTE (with a comment: what it writes, unless SECURITY DEFINER)
//	every schema named   USAGE
//
// A partitions-mode pass's detach and drop need the owner, which no GRANT gives: a comment line
// says so (partition.DefinerSQL does it for the role).
func Grants(specs []policy.Spec, role string) []string {
	r := pgx.Identifier{role}.Sanitize()
	tables := map[string]map[string]bool{}
	schemas := map[string]bool{}
	var functions, notes []string
	add := func(table string, privs ...string) {
		if schema, _, ok := strings.Cut(table, "."); ok {
			schemas[schema] = true
		}
		if tables[table] == nil {
			tables[table] = map[string]bool{}
		}
		for _, p := range privs {
			tables[table][p] = true
		}
	}
	for _, s := range policy.Normalize(specs) {
		for _, p := range s.Passes {
			add(p.Table, "SELECT", "UPDATE", "DELETE")
			for _, g := range p.Guards {
				add(g.Table, "SELECT")
			}
			if p.ArchiveTo != "" {
				add(p.ArchiveTo, "INSERT", "SELECT")
			}
			for _, c := range p.DeleteWith {
				add(c.Table, "SELECT", "DELETE")
			}
			for _, c := range p.Cascades {
				add(c, "SELECT")
			}
			switch p.Mode {
			case policy.ModePerRow:
				if schema, _, ok := strings.Cut(p.Function, "."); ok {
					schemas[schema] = true
				}
				functions = append(functions, fmt.Sprintf("-- %s runs with the role's privileges unless it is SECURITY DEFINER: grant what it writes too.\nGRANT EXECUTE ON FUNCTION %s TO %s;",
					OneLine(p.Function), QuoteName(p.Function), r))
			case policy.ModePartitions:
				notes = append(notes, fmt.Sprintf("-- pass %q of sweep %q drops partitions of %s: DETACH PARTITION and DROP TABLE need the table's owner, which no GRANT gives; the drop function below does it for the role (or make the role a member of the owner, which archive_schema needs).",
					p.Name, s.Name, OneLine(p.Table)))
			}
		}
	}
	var out []string
	for _, schema := range slices.Sorted(maps.Keys(schemas)) {
		out = append(out, fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s;", pgx.Identifier{schema}.Sanitize(), r))
	}
	order := []string{"SELECT", "INSERT", "UPDATE", "DELETE"}
	for _, table := range slices.Sorted(maps.Keys(tables)) {
		var privs []string
		for _, p := range order {
			if tables[table][p] {
				privs = append(privs, p)
			}
		}
		out = append(out, fmt.Sprintf("GRANT %s ON %s TO %s;", strings.Join(privs, ", "), QuoteName(table), r))
	}
	slices.Sort(functions)
	out = append(out, slices.Compact(functions)...)
	return append(out, notes...)
}
