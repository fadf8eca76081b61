package statement

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// LateActorsSQL reads what can act on table $1's rows after an archiving batch's proof: its
// deferrable constraint triggers, which fire at commit, and its rules, which rewrite the insert
// itself; each as "trigger <name>" or "rule <name>". Internal triggers (foreign keys) are left
// out: they check rows, they do not change them.
const LateActorsSQL = `
SELECT ARRAY(SELECT format('deferrable constraint trigger %s', quote_ident(t.tgname)) FROM pg_trigger t
             WHERE t.tgrelid = to_regclass($1) AND NOT t.tgisinternal AND t.tgdeferrable ORDER BY t.tgname),
       ARRAY(SELECT format('rule %s', quote_ident(r.rulename)) FROM pg_rewrite r
             WHERE r.ev_class = to_regclass($1) AND r.rulename <> '_RETURN' ORDER BY r.rulename)`

// ReadLateActors reads table's deferrable constraint triggers and rules (LateActorsSQL).
func ReadLateActors(ctx context.Context, pool *pgxpool.Pool, table string) (triggers, rules []string, err error) {
	err = pool.QueryRow(ctx, LateActorsSQL, QuoteName(table)).Scan(&triggers, &rules)
	return triggers, rules, err
}
