package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// tableCounts is what went with a sweep's own rows, table by table, as the text lines show it:
// each delete_with child's rows (+table=N), and each cascades table's rows the schema's keys
// deleted (+table=N(cascade)) and changed (~table=N(updated)), summed over the passes in the
// order first met. A cascades table the keys left alone shows +table=0(cascade): it is named,
// and nothing happened to it.
type tableCounts struct {
	children []wire.ChildRows
	cascades []wire.CascadeRows
}

// add sums one pass's children and cascades into tc.
func (tc *tableCounts) add(children []wire.ChildRows, cascades []wire.CascadeRows) {
	for _, c := range children {
		i := slices.IndexFunc(tc.children, func(o wire.ChildRows) bool { return o.Table == c.Table })
		if i < 0 {
			tc.children = append(tc.children, wire.ChildRows{Table: c.Table})
			i = len(tc.children) - 1
		}
		tc.children[i].Rows += c.Rows
	}
	for _, c := range cascades {
		i := slices.IndexFunc(tc.cascades, func(o wire.CascadeRows) bool { return o.Table == c.Table })
		if i < 0 {
			tc.cascades = append(tc.cascades, wire.CascadeRows{Table: c.Table})
			i = len(tc.cascades) - 1
		}
		tc.cascades[i].Deleted += c.Deleted
		tc.cascades[i].Updated += c.Updated
	}
}

// pathPerRow is a per-row pass's path (wire.PassResult.Path): its keys are processed, not deleted.
const pathPerRow = "per-row"

// String writes the counts, each after a space; "" when there are none.
func (tc *tableCounts) String() string {
	var b strings.Builder
	for _, c := range tc.children {
		fmt.Fprintf(&b, " +%s=%d", c.Table, c.Rows)
	}
	for _, c := range tc.cascades {
		if c.Deleted > 0 || c.Updated == 0 {
			fmt.Fprintf(&b, " +%s=%d(cascade)", c.Table, c.Deleted)
		}
		if c.Updated > 0 {
			fmt.Fprintf(&b, " ~%s=%d(updated)", c.Table, c.Updated)
		}
	}
	return b.String()
}
