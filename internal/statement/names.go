package statement

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// Names maps each table a policy names, as the policy writes it, to the table the policy check
// resolved it to, schema-qualified ("notifications" → "public.notifications"). Statements name
// the resolved tables, so a table created later earlier on the search_path, or a temporary one,
// never stands in for the one the check proved.
type Names map[string]string

// name is t resolved, or t as written when n does not hold it.
func (n Names) name(t string) string {
	if q, ok := n[t]; ok {
		return q
	}
	return t
}

// Pass is p naming every table by its resolved name: the swept table, keep guards, delete_with
// children, cascades and archive_to. Its statements are built from it; its answers name p's.
func (n Names) Pass(p policy.Pass) policy.Pass {
	p.Table, p.ArchiveTo = n.name(p.Table), n.name(p.ArchiveTo)
	p.Guards, p.DeleteWith, p.Cascades = slices.Clone(p.Guards), slices.Clone(p.DeleteWith), slices.Clone(p.Cascades)
	for i := range p.Guards {
		p.Guards[i].Table = n.name(p.Guards[i].Table)
	}
	for i := range p.DeleteWith {
		p.DeleteWith[i].Table = n.name(p.DeleteWith[i].Table)
	}
	for i := range p.Cascades {
		p.Cascades[i] = n.name(p.Cascades[i])
	}
	return p
}

// SpecTables are the tables specs name, each once, in order.
func SpecTables(specs []policy.Spec) []string {
	var out []string
	add := func(t string) {
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	for _, s := range specs {
		for _, p := range s.Passes {
			add(p.Table)
			for _, g := range p.Guards {
				add(g.Table)
			}
			for _, c := range p.DeleteWith {
				add(c.Table)
			}
			for _, t := range p.Cascades {
				add(t)
			}
			add(p.ArchiveTo)
		}
	}
	return out
}

// NamesSQL resolves each name of $1 ($2 quoted, as statements write it) to its table's schema
// and name, by oid, NULL for a name that is no table or only a temporary one. It runs under the
// search_path Timeouts sets, pg_temp last, so a temporary table never shadows a real one.
const NamesSQL = `
SELECT x.name, n.nspname::text, c.relname::text
FROM unnest($1::text[], $2::text[]) AS x(name, quoted)
LEFT JOIN pg_class c ON c.oid = to_regclass(x.quoted) AND c.relnamespace <> pg_my_temp_schema()
LEFT JOIN pg_namespace n ON n.oid = c.relnamespace`

// ReadNames resolves tables, as the policy writes them, to the tables statements will name: a
// table that does not exist is left out, for the policy check to refuse. A schema whose name
// holds a dot is an error, since a policy's name cannot say it.
func ReadNames(ctx context.Context, pool *pgxpool.Pool, tables []string) (Names, error) {
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = QuoteName(t)
	}
	out := Names{}
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := (Timeouts{}).Set(ctx, tx); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, NamesSQL, tables, quoted)
		if err != nil {
			return err
		}
		var name string
		var schema, rel *string
		_, err = pgx.ForEachRow(rows, []any{&name, &schema, &rel}, func() error {
			if schema == nil || rel == nil {
				return nil
			}
			if strings.Contains(*schema, ".") {
				return fmt.Errorf("table %q is in schema %q, whose name holds a dot, which a policy cannot name: move the table to another schema", name, *schema)
			}
			out[name] = *schema + "." + *rel
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("resolve table names: %w", err)
	}
	return out, nil
}
