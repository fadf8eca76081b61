package statement

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ReadDeleteTriggers lists the user triggers on tables (as statements name them) that fire on
// DELETE and are enabled, each as "table.trigger (BEFORE DELETE, function)", in table order: what
// a pass's deletes run besides themselves, for the policy check and the dry run to show. They are
// the schema's to decide; nothing here refuses them.
func ReadDeleteTriggers(ctx context.Context, pool *pgxpool.Pool, tables []string) ([]string, error) {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = QuoteName(t)
	}
	var out []string
	err := pool.QueryRow(ctx, `
SELECT coalesce(array_agg(format('%s.%s (%s DELETE, %s)', x.name, t.tgname,
                                 CASE WHEN t.tgtype & 2 <> 0 THEN 'BEFORE' WHEN t.tgtype & 64 <> 0 THEN 'INSTEAD OF' ELSE 'AFTER' END,
                                 t.tgfoid::regproc) ORDER BY x.i, t.tgname), '{}')
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(rel, name, i)
JOIN pg_trigger t ON t.tgrelid = to_regclass(x.rel)
WHERE NOT t.tgisinternal AND t.tgenabled <> 'D' AND t.tgtype & 8 <> 0`, names, tables).Scan(&out)
	if err != nil {
		return nil, fmt.Errorf("read delete triggers: %w", err)
	}
	return out, nil
}
