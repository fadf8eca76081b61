package sweep

import (
	"context"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// deleteTriggers lists the user DELETE triggers of the tables pass p's statement deletes from,
// for the dry run to show.
func (r *Runner) deleteTriggers(ctx context.Context, p policy.Pass) ([]string, error) {
	tables := []string{p.Table}
	for _, c := range p.DeleteWith {
		tables = append(tables, c.Table)
	}
	return statement.ReadDeleteTriggers(ctx, r.cfg.Pool, tables)
}
