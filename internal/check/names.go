package check

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// Names resolves every table the policy's passes name (swept tables, keep guards, delete_with
// children, cascades, archives) to the table it names now, schema-qualified, by oid and under a
// search_path with pg_temp last: what a runner's statements name (sweep.Config.Names), so that
// a table created later, earlier on the search_path or temporary, never stands in for the one
// this check proved. Call it after Policy passed: a table it does not find is left out.
func Names(ctx context.Context, pool *pgxpool.Pool, p *policy.Policy) (statement.Names, error) {
	names, err := statement.ReadNames(ctx, pool, statement.SpecTables(policy.Normalize(p.Specs)))
	if err != nil {
		return nil, fmt.Errorf("check policy: %w", err)
	}
	return names, nil
}
