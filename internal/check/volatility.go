package check

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/statement"
)

// volatileSQL lists the VOLATILE functions a probe view ($1, its oid) calls when read, as
// regprocedure text ("wipe_account(uuid)"), sorted.
//
// It reads the view's stored query tree (pg_rewrite.ev_action, a pg_node_tree) rather than
// pg_depend: PostgreSQL records no dependency on a built-in ("pinned") object, so pg_depend never
// names random() or set_config(). In the tree, a function call is :funcid, an aggregate
// :aggfnoid, a window function :winfnoid, an operator :opno (also IN, ANY, IS DISTINCT FROM,
// NULLIF), :opnos (row comparisons), :eqop and :sortop (DISTINCT, GROUP BY, ORDER BY inside a
// subquery); an operator runs its pg_operator.oprcode, and an explicit or implicit cast with a
// function is a :funcid. Literal text never matches: constants print as bytes, names escape
// their spaces. Relations the query reads (:relid) are followed: a view's own query runs with it,
// and so do the row-level security policies of a table that has them enabled. For user types
// the view depends on (pg_depend does name those), their input and output functions and the
// CHECK constraints of a domain; an aggregate brings its support functions, whose volatility
// its own pg_proc row does not reflect (CREATE AGGREGATE marks every aggregate immutable).
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

// volatileCalls returns the name and argument types of every VOLATILE function that condition (a
// SQL boolean over alias t of table, possibly with subqueries) calls when evaluated: directly,
// behind an operator or a cast, inside a view or an aggregate it reads. A policy condition may
// call only IMMUTABLE or STABLE functions, since a volatile one can write (wipe_account) or
// change the session (set_config), and runs even in a dry run's count.
//
// It lets PostgreSQL resolve the condition: inside tx, under a savepoint it rolls back whatever
// happens, it creates a temporary view of SELECT 1 FROM table AS t WHERE (condition) and reads
// the view's query tree (see volatileSQL). Nothing of the condition runs; the view is parsed,
// never read. The statement goes through the extended protocol, which takes one statement only:
// a condition that tries to end the view and start a statement of its own is a syntax error.
//
// The check trusts declared volatility: a function declared STABLE or IMMUTABLE that calls a
// volatile one, or writes through dynamic SQL, is not seen. Least privilege (the API's role may
// not write what it does not sweep) is the line behind it. Creating the view needs the TEMPORARY
// privilege on the database, which PUBLIC has by default.
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
