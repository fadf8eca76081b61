package partition

// The drop function's SQL. Neither block below holds a name: `api grants` hands the table, the
// function and the role to the grant block as quoted identifiers in SET LOCAL statements, and the
// block quotes them again with format('%I') where it builds the function. The function reads its
// table and its window from settings of its own (SET clauses, so no caller can change them), and
// computes the cutoff itself, from the database clock.

// definerGrant is the statement `api grants` prints for a table, before the SET LOCAL lines: the
// block that creates the function, drops the one that took its cutoff from the caller, and lets
// the role alone execute it.
const definerGrant = `DO $sweeprail_grant$
DECLARE
  nsp text := current_setting('sweeprail.grant_schema');
  rel text := current_setting('sweeprail.grant_table');
  fname text := current_setting('sweeprail.grant_function');
  zone text := COALESCE(NULLIF(current_setting('sweeprail.grant_time_zone'), ''), current_setting('TimeZone'));
  t regclass;
  parent text;
  fn text;
BEGIN
  IF nsp = '' THEN
    t := to_regclass(format('%I', rel));
  ELSE
    t := to_regclass(format('%I.%I', nsp, rel));
  END IF;
  IF t IS NULL THEN
    RAISE EXCEPTION 'table % does not exist', concat_ws('.', NULLIF(nsp, ''), rel);
  END IF;
  PERFORM now() AT TIME ZONE zone;
  SELECT format('%I.%I', n.nspname, c.relname), format('%I.%I', n.nspname, fname)
    INTO parent, fn
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = t;
  EXECUTE format('DROP FUNCTION IF EXISTS %s(regclass, text, boolean)', fn);
  EXECUTE format('CREATE OR REPLACE FUNCTION %s(part regclass, keep boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET datestyle = %L
SET timezone = %L
SET sweeprail.drop_parent = %L
SET sweeprail.drop_retention_seconds = %L
SET sweeprail.drop_time_zone = %L
SET sweeprail.drop_units_per_second = %L
AS %L', fn, 'ISO, YMD', 'UTC', parent,
    current_setting('sweeprail.grant_retention_seconds')::bigint,
    zone,
    current_setting('sweeprail.grant_units_per_second')::bigint,
    $sweeprail_body$` + definerBody + `$sweeprail_body$);
  EXECUTE format('REVOKE ALL ON FUNCTION %s(regclass, boolean) FROM PUBLIC', fn);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %s(regclass, boolean) TO %I', fn, current_setting('sweeprail.grant_role'));
END
$sweeprail_grant$;`

// definerBody is the drop function's body. The cutoff is the transaction's start on the database
// clock minus the retention baked in at grant time: what the caller passes is a partition alone.
const definerBody = `
DECLARE
  parent CONSTANT regclass := current_setting('sweeprail.drop_parent')::regclass;
  retention CONSTANT bigint := current_setting('sweeprail.drop_retention_seconds')::bigint;
  zone CONSTANT text := current_setting('sweeprail.drop_time_zone');
  per CONSTANT bigint := current_setting('sweeprail.drop_units_per_second')::bigint;
  cutoff CONSTANT timestamptz := now() - make_interval(secs => retention);
  lock_ms bigint;
  pending boolean;
  keytype regtype;
  bound text[];
  ub text;
  expired boolean;
  rel text;
BEGIN
  IF part IS NULL THEN
    RAISE EXCEPTION 'a partition is required' USING ERRCODE = '22004';
  END IF;
  SELECT setting::bigint INTO lock_ms FROM pg_settings WHERE name = 'lock_timeout';
  IF lock_ms = 0 OR lock_ms > 60000 THEN
    RAISE EXCEPTION 'refusing to detach under a lock_timeout of % ms: want 1 ms to a minute (SET LOCAL lock_timeout)', lock_ms
      USING ERRCODE = '55000';
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
  IF keytype NOT IN ('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype) AND per <= 0 THEN
    RAISE EXCEPTION '% has an integer key and the function no unit of Unix time: grant it again', parent USING ERRCODE = '42501';
  END IF;
  bound := regexp_match(pg_get_expr((SELECT relpartbound FROM pg_class WHERE oid = part), part),
    '^FOR VALUES FROM \((?:MINVALUE|MAXVALUE|''(?:[^'']|'''')*''|-?[0-9]+)\) TO \((MINVALUE|MAXVALUE|''(?:[^'']|'''')*''|-?[0-9]+)\)$');
  IF bound IS NULL OR bound[1] IN ('MINVALUE', 'MAXVALUE') THEN
    RAISE EXCEPTION '% has no finite upper bound: refused', part USING ERRCODE = '42501';
  END IF;
  ub := bound[1];
  IF left(ub, 1) = '''' THEN
    ub := replace(substr(ub, 2, length(ub) - 2), '''''', '''');
  END IF;
  expired := CASE keytype
    WHEN 'timestamptz'::regtype THEN ub::timestamptz <= cutoff
    WHEN 'timestamp'::regtype THEN ub::timestamp <= cutoff AT TIME ZONE zone
    WHEN 'date'::regtype THEN ub::date <= (cutoff AT TIME ZONE zone)::date
    ELSE ub::numeric <= floor(extract(epoch FROM cutoff) * per)
  END;
  IF NOT expired THEN
    RAISE EXCEPTION 'partition % of % ends at %, after the cutoff % (retention % s on the database clock): refused',
      part, parent, ub, cutoff, retention USING ERRCODE = '42501';
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
`
