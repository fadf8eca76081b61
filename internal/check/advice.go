package check

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
func (c *checker) adviseAgeIndexes(ctx context.Context) error {
	type key struct{ table, column string }
	var order []key
	groups := map[key][]ageRefusal{}
	for _, r := range c.ageRefusals {
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
			return err
		}
		what := fmt.Sprintf("no index serves the batch select, so every batch would read all of table %q", k.table)
		first := refused[0]
		if len(refused) == 1 {
			c.fail(first.sweep, first.p.Name, "", "%s: create the index, or set allow_unindexed: true for a table that stays small: %s", what, fix)
			continue
		}
		var names []string
		for _, r := range refused {
			names = append(names, fmt.Sprintf("%s.%s", r.sweep, r.p.Name))
		}
		c.fail(first.sweep, first.p.Name, "", "%s: create the index, which serves all %d passes of the table that no index serves (%s), or set allow_unindexed: true for a table that stays small: %s",
			what, len(refused), strings.Join(names, ", "), fix)
		for _, r := range refused[1:] {
			c.fail(r.sweep, r.p.Name, "", "%s: the index suggested for pass %q of sweep %q serves this pass too, or set allow_unindexed: true for a table that stays small",
				what, first.p.Name, first.sweep)
		}
	}
	return nil
}

// sharedConjuncts is the simple conjuncts (policy.PartialPredicate's) that every refused pass's
// where holds, joined by AND: what an index serving them all may be partial on.
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
		shared = slices.DeleteFunc(shared, func(s string) bool { return !slices.Contains(parts, s) })
	}
	return strings.Join(shared, " AND ")
}
