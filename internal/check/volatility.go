package check

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/statement"
)

// volatileSQL lists, as sorted regprocedure text, the VOLATILE functions probe view $1 calls when
// read. It reads the view's query tree, since pg_depend never names a built-in (random()):
//
//	:funcid :aggfnoid :winfnoid      a call or a cast, an aggregate, a window function
//	:opno :opnos :eqop :sortop       an operator (its oprcode), row comparison, DISTINCT, ORDER BY
//	:relid                           a view read, or a table's row-level security, followed
//
// with the types' input, output and domain CHECK functions and the aggregates' support functions.
const volatileSQL = `
WITH RECURSIVE
rels(oid) AS (
    SELECT $1::oid
  UNION
    SELECT m[1]::oid
    FROM rels
    JOIN pg_class c ON c.oid = rels.oid
    CROSS JOIN LATERAL (
        SELECT r.ev_action::text AS tree FROM pg_rewrite r
        WHERE r.ev_class = c.oid AND r.ev_type = '1' AND c.relkind = 'v'
      UNION ALL
        SELECT p.polqual::text FROM pg_policy p
        WHERE p.polrelid = c.oid AND c.relrowsecurity AND p.polqual IS NOT NULL
    ) t
    CROSS JOIN LATERAL regexp_matches(t.tree, ':relid (\d+)', 'g') m
),
trees(tree) AS (
    SELECT r.ev_action::text FROM rels
    JOIN pg_class c ON c.oid = rels.oid AND c.relkind = 'v'
    JOIN pg_rewrite r ON r.ev_class = c.oid AND r.ev_type = '1'
  UNION ALL
    SELECT p.polqual::text FROM rels
    JOIN pg_class c ON c.oid = rels.oid AND c.relrowsecurity
    JOIN pg_policy p ON p.polrelid = c.oid
    WHERE p.polqual IS NOT NULL
),
types(oid) AS (
    SELECT d.refobjid FROM rels
    JOIN pg_rewrite r ON r.ev_class = rels.oid
    JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid AND d.refclassid = 'pg_type'::regclass
),
procs(oid) AS (
    SELECT m[2]::oid FROM trees, regexp_matches(tree, ':(funcid|aggfnoid|winfnoid) (\d+)', 'g') m
  UNION
    SELECT o.oprcode::oid FROM trees, regexp_matches(tree, ':(opno|eqop|sortop) (\d+)', 'g') m
    JOIN pg_operator o ON o.oid = m[2]::oid
  UNION
    SELECT o.oprcode::oid FROM trees, regexp_matches(tree, ':opnos \(o ([0-9 ]+)\)', 'g') m,
    unnest(string_to_array(m[1], ' ')) x
    JOIN pg_operator o ON o.oid = x::oid
  UNION
    SELECT f FROM types
    JOIN pg_type ty ON ty.oid = types.oid,
    LATERAL (VALUES (ty.typinput::oid), (ty.typoutput::oid)) v(f)
  UNION
    SELECT m[2]::oid FROM types
    JOIN pg_constraint con ON con.contypid = types.oid AND con.conbin IS NOT NULL,
    regexp_matches(con.conbin::text, ':(funcid|aggfnoid|winfnoid) (\d+)', 'g') m
),
every(oid) AS (
    SELECT oid FROM procs
  UNION
    SELECT f FROM procs
    JOIN pg_aggregate a ON a.aggfnoid = procs.oid,
    LATERAL (VALUES (a.aggtransfn::oid), (a.aggfinalfn::oid), (a.aggcombinefn::oid), (a.aggserialfn::oid),
                    (a.aggdeserialfn::oid), (a.aggmtransfn::oid), (a.aggminvtransfn::oid), (a.aggmfinalfn::oid)) v(f)
)
SELECT p.oid::regprocedure::text FROM every
JOIN pg_proc p ON p.oid = every.oid
WHERE p.provolatile = 'v'
ORDER BY 1`

// volatileCalls names every VOLATILE function condition (a boolean over alias t of table) calls
// when evaluated, however reached: such a call can write or change the session, even in a dry
// run's count. PostgreSQL resolves the condition into a temporary view under a savepoint rolled
// back whatever happens: nothing of it runs, and the extended protocol takes one statement only.
// Declared volatility is trusted; least privilege is the line behind it.
func volatileCalls(ctx context.Context, tx pgx.Tx, table string, condition string) ([]string, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("volatility check: savepoint: %w", err)
	}
	defer func() { _ = sp.Rollback(ctx) }()

	view := "sweeprail_volatility_" + uuid.NewString()[:8]
	create := fmt.Sprintf("CREATE TEMPORARY VIEW %s AS SELECT 1 FROM %s AS t WHERE (%s)",
		pgx.Identifier{view}.Sanitize(), statement.QuoteName(table), condition)
	if _, err := sp.Conn().PgConn().ExecParams(ctx, create, nil, nil, nil, nil).Close(); err != nil {
		return nil, fmt.Errorf("volatility check: resolve the condition on %s: %w", table, err)
	}
	var oid uint32
	if err := sp.QueryRow(ctx, `SELECT oid FROM pg_class WHERE relname = $1 AND relnamespace = pg_my_temp_schema()`,
		view).Scan(&oid); err != nil {
		return nil, fmt.Errorf("volatility check: find the probe view: %w", err)
	}
	rows, err := sp.Query(ctx, volatileSQL, oid)
	if err != nil {
		return nil, fmt.Errorf("volatility check: read the condition's functions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("volatility check: read the condition's functions: %w", err)
	}
	return names, nil
}
