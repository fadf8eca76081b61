package sweep

import (
	"strings"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// childRows pairs each child of a pass with its count; nil for a pass without children.
func childRows(children []policy.Child, counts []int64) []wire.ChildRows {
	if len(children) == 0 {
		return nil
	}
	out := make([]wire.ChildRows, len(children))
	for i, c := range children {
		out[i] = wire.ChildRows{Table: c.Table, Column: strings.Join(c.Columns, ", "), Rows: counts[i]}
	}
	return out
}
