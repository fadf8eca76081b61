package check

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sweeprail/sweeprail/internal/explain"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// table looks name up as the statements will resolve it: schema-qualified, or on the search_path.
func (c *checker) table(ctx context.Context, name string) (*tableInfo, error) {
	if t, ok := c.tables[name]; ok {
		return t, nil
	}
	t := &tableInfo{}
	var oid uint32
	var kind string
	err := c.pool.QueryRow(ctx, `SELECT c.oid, c.relkind::text FROM pg_class c WHERE c.oid = to_regclass($1)`,
		statement.QuoteName(name)).Scan(&oid, &kind)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if t.problem, err = c.missingTable(ctx, name); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("look up table %q: %w", name, err)
	case kind != "r" && kind != "p":
		t.problem = fmt.Sprintf("is %s, not a table: name the table it stands for", relkindName(kind))
	default:
		t.oid, t.partitioned = oid, kind == "p"
		if t.columns, err = c.columns(ctx, oid); err != nil {
			return nil, fmt.Errorf("read columns of %q: %w", name, err)
		}
	}
	c.tables[name] = t
	return t, nil
}

// missingTable explains a name that resolves to nothing: where it was looked for, and the tables
// of that name in any schema or spelling (a table created as "Sessions" is not sessions).
func (c *checker) missingTable(ctx context.Context, name string) (string, error) {
	bare := name[strings.LastIndex(name, ".")+1:]
	var path string
	var similar []string
	err := c.pool.QueryRow(ctx, `
SELECT array_to_string(current_schemas(false), ', '),
       ARRAY(SELECT CASE WHEN pg_table_is_visible(c.oid) THEN '' ELSE n.nspname || '.' END || c.relname
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE lower(c.relname) = lower($1) AND c.relkind IN ('r', 'p')
               AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
             ORDER BY 1 LIMIT 5)`, bare).Scan(&path, &similar)
	if err != nil {
		return "", fmt.Errorf("look up tables like %q: %w", name, err)
	}
	msg := "does not exist"
	if !strings.Contains(name, ".") {
		msg += fmt.Sprintf(" on the search_path (%s)", path)
	}
	if len(similar) > 0 {
		msg += fmt.Sprintf("; tables of that name: %s (names are matched exactly as written, schema.table for another schema)", strings.Join(similar, ", "))
	} else {
		msg += ": create it, or fix the name"
	}
	return msg, nil
}

func (c *checker) columns(ctx context.Context, oid uint32) ([]columnInfo, error) {
	rows, err := c.pool.Query(ctx, `
SELECT a.attname, format_type(a.atttypid, a.atttypmod),
       (CASE WHEN ty.typtype = 'd' THEN ty.typbasetype ELSE ty.oid END)
         IN ('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype),
       (CASE WHEN ty.typtype = 'd' THEN ty.typbasetype ELSE ty.oid END)
         IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype, 'numeric'::regtype),
       format_type(CASE WHEN ty.typtype = 'd' THEN ty.typbasetype ELSE ty.oid END, NULL)
FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, oid)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (columnInfo, error) {
		var ci columnInfo
		var base string
		err := r.Scan(&ci.name, &ci.typ, &ci.temporal, &ci.numeric, &base)
		ci.kind = statement.KindOf(base)
		return ci, err
	})
}

// function checks that a per-row function exists where the statement will look for it and can be
// called with one argument (more are fine when they have defaults). Whether that argument's type
// fits the key column is left to compiling the statement.
func (c *checker) function(ctx context.Context, name string) (string, error) {
	schema, fn, qualified := strings.Cut(name, ".")
	if !qualified {
		schema, fn = "", name
	}
	rows, err := c.pool.Query(ctx, `
SELECT p.oid::regprocedure::text, p.pronargs - p.pronargdefaults <= 1 AND p.pronargs >= 1
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.proname = $1 AND p.prokind = 'f'
  AND CASE WHEN $2::text = '' THEN pg_function_is_visible(p.oid) ELSE n.nspname = $2::text END
ORDER BY 1`, fn, schema)
	if err != nil {
		return "", fmt.Errorf("look up function %q: %w", name, err)
	}
	type proc struct {
		signature string
		oneArg    bool
	}
	procs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (proc, error) {
		var p proc
		err := r.Scan(&p.signature, &p.oneArg)
		return p, err
	})
	if err != nil {
		return "", fmt.Errorf("look up function %q: %w", name, err)
	}
	if len(procs) == 0 {
		where := "on the search_path"
		if qualified {
			where = "in schema " + schema
		}
		return fmt.Sprintf("does not exist %s: create it, or fix function (it is called once per eligible row with the key column's value)", where), nil
	}
	var found []string
	for _, p := range procs {
		if p.oneArg {
			return "", nil
		}
		found = append(found, p.signature)
	}
	return fmt.Sprintf("does not take one argument (found: %s): it is called once per eligible row with the key column's value", strings.Join(found, "; ")), nil
}

// explain plans query with the check's timeouts; see explain.JSON.
func (c *checker) explain(ctx context.Context, forceIndex bool, query string, args ...any) ([]byte, error) {
	return explain.JSON(ctx, c.pool, checkStatementTimeout, checkLockTimeout, forceIndex, query, args...)
}

// leadingIndex reports whether table has a valid, non-partial index whose first columns are
// columns, in any order: the index that turns each keep-guard or child lookup into a descent of
// the index.
func (c *checker) leadingIndex(ctx context.Context, table string, columns []string) (bool, error) {
	t, err := c.table(ctx, table)
	if err != nil {
		return false, err
	}
	var ok bool
	err = c.pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = $1 AND i.indisvalid AND i.indpred IS NULL AND `+leadsWith+`)`, t.oid, columns).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up indexes of %q: %w", table, err)
	}
	return ok, nil
}

// leadsWith holds for an index i whose first key columns are the columns named by $2, in any
// order.
const leadsWith = `i.indnkeyatts >= cardinality($2::text[])
  AND NOT EXISTS (SELECT 1 FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS x(a, o)
                  WHERE x.o <= cardinality($2::text[])
                    AND x.a NOT IN (SELECT attnum FROM pg_attribute WHERE attrelid = i.indrelid AND attname = ANY ($2::text[])))`

// pgProblem tells a statement's own failure (it does not compile, a permission is missing),
// which is a problem of the policy, from the database's (a lost connection), which ends the check.
func pgProblem(err error) (*pgconn.PgError, error) {
	var pgErr *pgconn.PgError
	if err == nil || errors.As(err, &pgErr) {
		return pgErr, nil
	}
	return nil, err
}

// describePgError writes a PostgreSQL error for an operator: its message and SQLSTATE, where in
// the condition it points when it points into it (offset: the characters before the condition in
// the query sent), and its detail and hint.
func describePgError(e *pgconn.PgError, condition string, offset int) string {
	msg := fmt.Sprintf("%s (SQLSTATE %s)", e.Message, e.Code)
	if condition != "" && e.Position > 0 {
		runes := []rune(condition)
		switch at := int(e.Position) - 1 - offset; {
		case at >= 0 && at < len(runes):
			msg += fmt.Sprintf(" at %q", string(runes[at:min(at+30, len(runes))]))
		case at == len(runes):
			msg += " at the end of the condition"
		}
	}
	if e.Detail != "" {
		msg += "; " + e.Detail
	}
	if e.Hint != "" {
		msg += "; hint: " + e.Hint
	}
	if e.Code == "42501" {
		msg += "; the API's database role needs SELECT, UPDATE and DELETE on the swept table (UPDATE for FOR UPDATE), SELECT on guard tables, and SELECT and DELETE on delete_with tables"
	}
	return msg
}

func relkindName(kind string) string {
	switch kind {
	case "v":
		return "a view"
	case "m":
		return "a materialized view"
	case "f":
		return "a foreign table"
	case "S":
		return "a sequence"
	case "i", "I":
		return "an index"
	case "c":
		return "a composite type"
	}
	return "a relation of kind " + kind
}

// ageKind is the kind of p's age column as the catalog step read it.
func (c *checker) ageKind(p policy.Pass) statement.Kind {
	if k, ok := statement.KindOfUnit(p.AgeUnit); ok {
		return k
	}
	if t, ok := c.tables[p.Table]; ok {
		if col, ok := t.column(p.AgeColumn); ok {
			return col.kind
		}
	}
	return statement.Instant
}

// indexFor writes the CREATE INDEX CONCURRENTLY that would serve a select on table by column,
// made partial by the parts of where, a condition over alias, that can stand in an index
// predicate.
func (c *checker) indexFor(ctx context.Context, table, column, where, alias string) (string, error) {
	return c.indexOn(ctx, table, []string{column}, where, alias)
}

// indexOn is indexFor for a select by several columns (a key of several): an index on all of
// them, the statistics of the first alone telling its size and whether it is mostly NULL.
func (c *checker) indexOn(ctx context.Context, table string, columns []string, where, alias string) (string, error) {
	var quoted []string
	for _, name := range append(strings.Split(table, "."), columns...) {
		var q string
		// quote_ident quotes only where needed (upper case, a keyword), so the suggestion reads
		// as a person would write it.
		if err := c.pool.QueryRow(ctx, "SELECT quote_ident($1)", name).Scan(&q); err != nil {
			return "", fmt.Errorf("quote %q: %w", name, err)
		}
		quoted = append(quoted, q)
	}
	n := len(quoted) - len(columns)
	stmt := fmt.Sprintf("CREATE INDEX CONCURRENTLY ON %s (%s)", strings.Join(quoted[:n], "."), strings.Join(quoted[n:], ", "))
	pred, complete := policy.PartialPredicate(where, alias)
	st, err := c.columnStats(ctx, table, columns[0])
	if err != nil {
		return "", err
	}
	if notNull := quoted[n] + " IS NOT NULL"; st.known && st.nullFrac >= mostlyNull && !strings.Contains(pred, notNull) {
		pred = strings.Join(slices.DeleteFunc([]string{pred, notNull}, func(s string) bool { return s == "" }), " AND ")
	}
	if pred != "" {
		stmt += " WHERE " + pred
	}
	// Said before the statement, so the statement stays last, ready to copy.
	if st.known {
		size, err := c.estimatedSize(ctx, st, pred)
		if err != nil {
			return "", err
		}
		stmt = fmt.Sprintf("(about %s by the planner's statistics) ", prettySize(size)) + stmt
	}
	if !complete {
		stmt = "(a partial index matching more of the condition would be smaller; only its simple parts are shown) " + stmt
	}
	return stmt + ";", nil
}
