package sweep

import (
	"context"

	"github.com/sweeprail/sweeprail/internal/statement"
)

// statementsFor returns the statements of each pass of sweep name for its age column's type as
// the catalog has it now, and that type.
func (r *Runner) statementsFor(ctx context.Context, name string) ([]statement.Set, []statement.Kind, error) {
	spec := r.byName[name]
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Settings.StatementTimeout)
	defer cancel()
	kinds, err := statement.ReadKinds(ctx, r.cfg.Pool, spec.Passes)
	if err != nil {
		return nil, nil, err
	}
	out := make([]statement.Set, len(spec.Passes))
	for i, k := range kinds {
		out[i] = r.stmts[name][i][k]
	}
	return out, kinds, nil
}
