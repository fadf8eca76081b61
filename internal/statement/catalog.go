package statement

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// The catalog reads a run, a dry run and the policy check make, each naming its tables as the
// statements resolve them (schema-qualified, or on the search_path): to_regclass of the quoted
// name, NULL where there is no such table.

// KindsSQL reads the type of each (table, column), a domain read as its base type, as
// format_type writes it; "" when the table or the column does not exist.
const KindsSQL = `
SELECT coalesce((
  SELECT format_type(CASE WHEN ty.typtype = 'd' THEN ty.typbasetype ELSE ty.oid END, NULL)
  FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
  WHERE a.attrelid = to_regclass(x.tbl) AND a.attname = x.col AND a.attnum > 0 AND NOT a.attisdropped), '')
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(tbl, col, i)
ORDER BY x.i`

// ReadKinds learns the kind of each pass's age column from the catalog, in one query, as the
// statements will resolve the table (schema-qualified, or on the search_path).
func ReadKinds(ctx context.Context, pool *pgxpool.Pool, passes []policy.Pass) ([]Kind, error) {
	tables, columns := make([]string, len(passes)), make([]string, len(passes))
	for i, p := range passes {
		tables[i], columns[i] = QuoteName(p.Table), p.AgeColumn
	}
	rows, err := pool.Query(ctx, KindsSQL, tables, columns)
	if err != nil {
		return nil, fmt.Errorf("read age column types: %w", err)
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read age column types: %w", err)
	}
	kinds := make([]Kind, len(passes))
	for i, p := range passes {
		kinds[i] = PassKind(p, types[i])
	}
	return kinds, nil
}

// ReadColumns reads the columns of table, in order, as the statements resolve it
// (schema-qualified, or on the search_path): the list a run's archive statements name.
func ReadColumns(ctx context.Context, pool *pgxpool.Pool, table string) ([]string, error) {
	var cols []string
	err := pool.QueryRow(ctx, ColumnsSQL, QuoteName(table)).Scan(&cols)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("table %q does not exist (or has no columns)", table)
	}
	return cols, nil
}

// ColumnsSQL reads the columns of table $1, in order.
const ColumnsSQL = `SELECT coalesce(array_agg(a.attname::text ORDER BY a.attnum), '{}')
FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`

// PrimaryKeySQL reads the columns of table $1's primary key, in key order, and their types.
const PrimaryKeySQL = `
SELECT coalesce(array_agg(a.attname::text ORDER BY k.i), '{}'), coalesce(array_agg(format_type(a.atttypid, a.atttypmod) ORDER BY k.i), '{}')
FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(n, i)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n
WHERE i.indrelid = to_regclass($1) AND i.indisprimary`

// ReadPrimaryKey reads the columns of table's primary key, in key order, and their types as
// format_type writes them; none for a table without one.
func ReadPrimaryKey(ctx context.Context, pool *pgxpool.Pool, table string) (columns, types []string, err error) {
	err = pool.QueryRow(ctx, PrimaryKeySQL, QuoteName(table)).Scan(&columns, &types)
	return columns, types, err
}

// SameTableSQL answers whether names $1 and $2 are one table (false when either is missing).
const SameTableSQL = `SELECT coalesce(to_regclass($1) = to_regclass($2), false)`

// SameTable reports whether names a and b are one table under two spellings (audit_log and
// public.audit_log).
func SameTable(ctx context.Context, pool *pgxpool.Pool, a, b string) (bool, error) {
	var same bool
	err := pool.QueryRow(ctx, SameTableSQL, QuoteName(a), QuoteName(b)).Scan(&same)
	return same, err
}

// ForeignSQL answers whether table $1 is a foreign table (false when it is missing).
const ForeignSQL = `SELECT coalesce((SELECT relkind = 'f' FROM pg_class WHERE oid = to_regclass($1)), false)`

// IsForeign reports whether table is a foreign table (postgres_fdw's, say).
func IsForeign(ctx context.Context, pool *pgxpool.Pool, table string) (bool, error) {
	var foreign bool
	err := pool.QueryRow(ctx, ForeignSQL, QuoteName(table)).Scan(&foreign)
	return foreign, err
}

// OIDSQL answers table $1's oid, 0 when it is missing.
const OIDSQL = `SELECT coalesce(to_regclass($1)::oid, 0)`

// ReadOID reads table's oid, 0 when there is no such table.
func ReadOID(ctx context.Context, pool *pgxpool.Pool, table string) (uint32, error) {
	var oid uint32
	err := pool.QueryRow(ctx, OIDSQL, QuoteName(table)).Scan(&oid)
	return oid, err
}

// LeavesSQL answers table $1's oid (NULL when it is missing) and its leaf partitions' oids: a
// partitioned table keeps no statistics of its own, and a table outside any partition tree is
// its own leaf.
const LeavesSQL = `SELECT to_regclass($1)::oid,
       ARRAY(SELECT t.relid::oid FROM pg_partition_tree(to_regclass($1)) AS t WHERE t.isleaf
             UNION SELECT c.oid FROM pg_class c WHERE c.oid = to_regclass($1) AND c.relkind <> 'p' ORDER BY 1)`

// ReadLeaves reads table's oid and its leaf partitions' oids.
func ReadLeaves(ctx context.Context, pool *pgxpool.Pool, table string) (oid uint32, leaves []uint32, err error) {
	err = pool.QueryRow(ctx, LeavesSQL, QuoteName(table)).Scan(&oid, &leaves)
	return oid, leaves, err
}

// SurveySQL reads what a batched pass's access path is chosen from, for table $1 and its age
// column $2: the table's relkind, its size in blocks, the server's version number, whether the
// column has statistics and its correlation, reltuples, and the rows changed since its last
// ANALYZE. It fails for a missing table ($1::regclass).
const SurveySQL = `
SELECT c.relkind::text, pg_relation_size(c.oid) / current_setting('block_size')::bigint,
       current_setting('server_version_num')::int, s.attname IS NOT NULL, s.correlation,
       c.reltuples, pg_stat_get_mod_since_analyze(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN LATERAL (SELECT s.attname, s.correlation FROM pg_stats s
                   WHERE s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = $2
                   ORDER BY s.inherited LIMIT 1) s ON true
WHERE c.oid = $1::regclass`

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
