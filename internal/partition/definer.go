package partition

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// A drop function (DefinerSQL, SECURITY DEFINER, created by the table's owner from `api grants`)
// lets a role that does not own a partitioned table drop that table's expired partitions and
// nothing else. It runs in the caller's transaction, so its DETACH is plain, under the caller's
// SET LOCAL lock_timeout: DETACH … CONCURRENTLY cannot run in a transaction block.

// definerPrefix begins the name of every drop function; the rest is the table's name.
const definerPrefix = "sweeprail_drop_"

// DefinerName is the name of the drop function of table relname (unqualified, as the catalog
// spells it), which lives in the table's schema. A name that would pass PostgreSQL's 63 bytes
// keeps its start and ends in a hash of the whole, so that two long names do not collide.
func DefinerName(relname string) string {
	const maxIdent = 63
	name := definerPrefix + relname
	if len(name) <= maxIdent {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(relname))
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	keep := maxIdent - len(definerPrefix) - len(suffix)
	for keep > 0 && !utf8.RuneStart(relname[keep]) {
		keep--
	}
	return definerPrefix + relname[:keep] + suffix
}

// Definer is what the catalog says of a table's drop function.
type Definer struct {
	// Function is its schema-qualified name, quoted where needed, whether it exists or not.
	Function string
	// Usable: it exists with the expected signature, is SECURITY DEFINER, its owner may drop
	// the table's partitions (owns the table or is a member of its owner), and the current role
	// may execute it. Drop may then go through it.
	Usable bool
	// Why says what is wrong with a function that exists but is not usable; empty otherwise.
	Why string
	// Owns: the current role owns the table or is a member of its owner, and may detach directly.
	Owns bool
}

// FindDefiner reads table's drop function (table as a policy names it) and whether the current
// role owns the table.
func FindDefiner(ctx context.Context, q Querier, table string) (Definer, error) {
	var d Definer
	var exists, secdef, ownerOK, exec bool
	err := q.QueryRow(ctx, `
WITH t AS (
  SELECT c.oid, c.relowner, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.oid = to_regclass($1)),
f AS (
  SELECT to_regprocedure(format('%I.%I(regclass, text, boolean)', t.nspname, $2::text)) AS oid FROM t)
SELECT format('%I.%I', t.nspname, $2::text), pg_has_role(t.relowner, 'USAGE'), f.oid IS NOT NULL,
       COALESCE(p.prosecdef, false), COALESCE(pg_has_role(p.proowner, t.relowner, 'USAGE'), false),
       COALESCE(has_function_privilege(f.oid, 'EXECUTE'), false)
FROM t CROSS JOIN f LEFT JOIN pg_proc p ON p.oid = f.oid`, quoteQualified(table), DefinerName(lastPart(table))).
		Scan(&d.Function, &d.Owns, &exists, &secdef, &ownerOK, &exec)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("look up the drop function of %s: %w", table, err)
	}
	switch {
	case !exists:
	case !secdef:
		d.Why = "is not SECURITY DEFINER"
	case !ownerOK:
		d.Why = "is not owned by the table's owner"
	case !exec:
		d.Why = "may not be executed by the current role (GRANT EXECUTE)"
	default:
		d.Usable = true
	}
	return d, nil
}

// CutoffArg is the cutoff as a drop function takes it, for a partition of key: what Expired
// compares each upper bound with, as text the key's type reads (the function runs with TimeZone
// UTC). A timestamp goes to the microsecond, the server's precision, which no bound is finer than.
func CutoffArg(key KeyType, cutoff time.Time) string {
	return cutoffFor(key, cutoff).UTC().Truncate(time.Microsecond).Format("2006-01-02 15:04:05.999999")
}

// CutoffArgEpoch is CutoffArg for an integer key of Unix time, the cutoff in its unit.
func CutoffArgEpoch(cutoff int64) string {
	return strconv.FormatInt(cutoff, 10)
}

// DefinerSQL is the statement that creates (or replaces) the drop function of table (as a policy
// names it) in the table's schema and lets role, alone, execute it: to be run by the table's
// owner, which the function then acts as. The schema is the table's as the running session finds
// it, which is how the API's statements find it too.
func DefinerSQL(table, role string) string {
	r := strings.NewReplacer(
		"@TABLE@", quoteLiteral(quoteQualified(table)),
		"@NAME@", quoteLiteral(DefinerName(lastPart(table))),
		"@ROLE@", quoteLiteral(role),
	)
	return r.Replace(definerTemplate)
}

// definerTemplate creates the drop function. The body is written with @PARENT@ for the table's
// qualified name, filled in when it is created; the function runs with a search_path of
// pg_catalog alone (pg_temp last), so nothing the caller creates can stand in for what it calls.
const definerTemplate = `DO $do$
DECLARE
  t regclass := to_regclass(@TABLE@);
  parent text;
  fn text;
BEGIN
  IF t IS NULL THEN
    RAISE EXCEPTION 'table % does not exist', @TABLE@;
  END IF;
  SELECT format('%I.%I', n.nspname, c.relname), format('%I.%I', n.nspname, @NAME@::text)
    INTO parent, fn
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = t;
  EXECUTE replace(replace($fn$
CREATE OR REPLACE FUNCTION @FN@(part regclass, cutoff text, keep boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET datestyle = 'ISO, YMD'
SET timezone = 'UTC'
AS $body$
DECLARE
  parent CONSTANT regclass := @PARENT@::regclass;
  pending boolean;
  keytype regtype;
  bound text[];
  ub text;
  expired boolean;
  rel text;
BEGIN
  IF part IS NULL OR cutoff IS NULL THEN
    RAISE EXCEPTION 'a partition and a cutoff are required' USING ERRCODE = '22004';
  END IF;
  IF current_setting('lock_timeout') = '0' THEN
    RAISE EXCEPTION 'refusing to detach without a lock_timeout (SET LOCAL lock_timeout)' USING ERRCODE = '55000';
  END IF;
  SELECT i.inhdetachpending INTO pending FROM pg_inherits i WHERE i.inhrelid = part AND i.inhparent = parent;
  IF NOT FOUND THEN
    RAISE EXCEPTION '% is not a partition of %', part, parent USING ERRCODE = '42501';
  END IF;
  IF EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = parent AND partdefid = part) THEN
    RAISE EXCEPTION '% is the default partition of %: it is never dropped', part, parent USING ERRCODE = '42501';
  END IF;
  IF (SELECT relkind FROM pg_class WHERE oid = part) <> 'r' THEN
    RAISE EXCEPTION '% is itself partitioned: refused', part USING ERRCODE = '42501';
  END IF;
  SELECT COALESCE(NULLIF(ty.typbasetype, 0), ty.oid)::regtype INTO keytype
    FROM pg_partitioned_table pt
    JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = pt.partattrs[0]
    JOIN pg_type ty ON ty.oid = a.atttypid
   WHERE pt.partrelid = parent AND pt.partstrat = 'r' AND pt.partnatts = 1 AND pt.partattrs[0] <> 0;
  IF keytype IS NULL OR keytype NOT IN ('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype,
                                        'smallint'::regtype, 'integer'::regtype, 'bigint'::regtype) THEN
    RAISE EXCEPTION '% is not partitioned by RANGE on one time or integer column', parent USING ERRCODE = '42501';
  END IF;
  bound := regexp_match(pg_get_expr((SELECT relpartbound FROM pg_class WHERE oid = part), part),
    '^FOR VALUES FROM \((?:MINVALUE|MAXVALUE|''(?:[^'']|'''')*''|[0-9]+)\) TO \((MINVALUE|MAXVALUE|''(?:[^'']|'''')*''|[0-9]+)\)$');
  IF bound IS NULL OR bound[1] IN ('MINVALUE', 'MAXVALUE') THEN
    RAISE EXCEPTION '% has no finite upper bound: refused', part USING ERRCODE = '42501';
  END IF;
  ub := bound[1];
  IF left(ub, 1) = '''' THEN
    ub := replace(substr(ub, 2, length(ub) - 2), '''''', '''');
  END IF;
  EXECUTE format('SELECT %L::%s <= %L::%s', ub, keytype, cutoff, keytype) INTO expired;
  IF NOT expired THEN
    RAISE EXCEPTION 'partition % of % ends at %, after the cutoff %: refused', part, parent, ub, cutoff
      USING ERRCODE = '42501';
  END IF;
  rel := part::text;
  IF pending THEN
    EXECUTE format('ALTER TABLE %s DETACH PARTITION %s FINALIZE', parent, rel);
  ELSE
    EXECUTE format('ALTER TABLE %s DETACH PARTITION %s', parent, rel);
  END IF;
  IF NOT keep THEN
    EXECUTE format('DROP TABLE %s', rel);
  END IF;
  RETURN rel;
END
$body$
$fn$, '@FN@', fn), '@PARENT@', quote_literal(parent));
  EXECUTE format('REVOKE ALL ON FUNCTION %s(regclass, text, boolean) FROM PUBLIC', fn);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %s(regclass, text, boolean) TO %I', fn, @ROLE@::text);
END
$do$;`

func lastPart(table string) string {
	if i := strings.LastIndex(table, "."); i >= 0 {
		return table[i+1:]
	}
	return table
}

func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
