package sweep

import (
	"context"
	"fmt"
	"sync"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// statements are a catalog's passes as its statements name their tables (statement.Names), and
// each pass's statements for each kind of age column. The answers keep the policy's names.
type statements struct {
	sql   map[string][]policy.Pass
	stmts map[string][][statement.Kinds]statement.Set
}

// catalogStatements builds the statements of specs with their tables named as names resolves them.
func catalogStatements(specs []policy.Spec, names statement.Names) *statements {
	out := &statements{sql: map[string][]policy.Pass{}, stmts: map[string][][statement.Kinds]statement.Set{}}
	for _, s := range specs {
		for _, p := range s.Passes {
			q := names.Pass(p)
			var byKind [statement.Kinds]statement.Set
			for k := range statement.Kinds {
				byKind[k] = statement.Build(q, k)
			}
			out.sql[s.Name] = append(out.sql[s.Name], q)
			out.stmts[s.Name] = append(out.stmts[s.Name], byKind)
		}
	}
	return out
}

// resolvedNames guards the statements of a Runner: built at NewRunner from the names the policy
// check resolved (Config.Names), or, given none, from those the first run resolves the same way.
// A table missing then is named as written, and resolved again by the next run.
type resolvedNames struct {
	mu   sync.Mutex
	done *statements
}

// statements are r's statements, resolving the catalog's names first if no run has.
func (r *Runner) statements(ctx context.Context) (*statements, error) {
	r.names.mu.Lock()
	defer r.names.mu.Unlock()
	if r.names.done != nil {
		return r.names.done, nil
	}
	tables := statement.SpecTables(r.cfg.Specs)
	names, err := statement.ReadNames(ctx, r.cfg.Pool, tables)
	if err != nil {
		return nil, fmt.Errorf("read the catalog's tables: %w", err)
	}
	st := catalogStatements(r.cfg.Specs, names)
	if len(names) == len(tables) {
		r.names.done = st
	}
	return st, nil
}
