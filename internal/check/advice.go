package check

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// ageRefusal is a pass whose batch select no index serves, waiting for the advice: the passes of
// one table are advised together, once the whole policy has been checked.
type ageRefusal struct {
	sweep string
	p     policy.Pass
}

// adviseAgeIndexes refuses each pass that no index serves with the fewest indexes that serve them
// all: one per table and age column. A table's several passes get one index, suggested once (on
// the first of them; the others name it), made partial only by the conditions every one of them
// shares, since an index partial on one pass's where cannot serve another's. A single pass gets
// the index partial on the simple parts of its own where.
func (c *checker) adviseAgeIndexes(ctx context.Context, unserved []ageRefusal) (findings, error) {
	var found findings
	type key struct{ table, column string }
	var order []key
	groups := map[key][]ageRefusal{}
	for _, r := range unserved {
		k := key{r.p.Table, r.p.AgeColumn}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	for _, k := range order {
		refused := groups[k]
		where := refused[0].p.Where
		if len(refused) > 1 {
			where = sharedConjuncts(refused)
		}
		fix, err := c.indexFor(ctx, k.table, k.column, where, "t")
		if err != nil {
			return findings{}, err
		}
		what := fmt.Sprintf("no index serves the batch select, so every batch would read all of table %q", k.table)
		first := refused[0]
		if len(refused) == 1 {
			found.refuse(c.problem(first.sweep, first.p.Name, "", "%s: create the index, or set allow_unindexed: true for a table that stays small: %s", what, fix))
			continue
		}
		var names []string
		for _, r := range refused {
			names = append(names, fmt.Sprintf("%s.%s", r.sweep, r.p.Name))
		}
		found.refuse(c.problem(first.sweep, first.p.Name, "", "%s: create the index, which serves all %d passes of the table that no index serves (%s), or set allow_unindexed: true for a table that stays small: %s",
			what, len(refused), strings.Join(names, ", "), fix))
		for _, r := range refused[1:] {
			found.refuse(c.problem(r.sweep, r.p.Name, "", "%s: the index suggested for pass %q of sweep %q serves this pass too, or set allow_unindexed: true for a table that stays small",
				what, first.p.Name, first.sweep))
		}
	}
	return found, nil
}

// sharedConjuncts is the simple conjuncts (policy.PartialPredicate's) that every refused pass's
// where holds, joined by AND, as the first pass spells them: what an index serving them all may
// be partial on.
func sharedConjuncts(refused []ageRefusal) string {
	var shared []string
	for i, r := range refused {
		pred, _ := policy.PartialPredicate(r.p.Where, "t")
		var parts []string
		if pred != "" {
			parts = strings.Split(pred, " AND ")
		}
		if i == 0 {
			shared = parts
			continue
		}
		keys := map[string]bool{}
		for _, p := range parts {
			keys[conjunctKey(p)] = true
		}
		shared = slices.DeleteFunc(shared, func(s string) bool { return !keys[conjunctKey(s)] })
	}
	return strings.Join(shared, " AND ")
}

// conjunctKey is what a simple conjunct is compared by: two that PostgreSQL reads alike, told
// apart only by the case of unquoted words, by spacing or by != for <>, share a key. Quoted
// literals and identifiers are kept as written, since their case and spaces matter.
func conjunctKey(s string) string {
	word := func(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }
	var out []rune
	var quote rune // the open quote, 0 outside one
	spaced := false
	for _, r := range s {
		switch {
		case quote != 0:
			out = append(out, r)
			if r == quote {
				quote = 0
			}
			continue
		case unicode.IsSpace(r):
			spaced = true
			continue
		}
		// A space matters only between two words (a NOT IN, not anot IN).
		if spaced && len(out) > 0 && word(out[len(out)-1]) && word(r) {
			out = append(out, ' ')
		}
		spaced = false
		switch {
		case r == '\'' || r == '"':
			quote = r
		case r == '=' && len(out) > 0 && out[len(out)-1] == '!':
			out[len(out)-1], r = '<', '>'
		}
		out = append(out, unicode.ToLower(r))
	}
	return string(out)
}
