-- dry run: the exact count, with what the cascades would delete and change
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
WITH p AS MATERIALIZED (SELECT t."id" FROM "public"."applications" AS t WHERE t."last_used_at" < $1::timestamptz),
n1 AS MATERIALIZED (SELECT x."id" FROM "public"."access_tokens" AS x WHERE (x."application_id") IN (SELECT p."id" FROM p)),
n2 AS MATERIALIZED (SELECT 1 FROM "public"."sessions" AS x WHERE (x."token_id") IN (SELECT n1."id" FROM n1))
SELECT (SELECT count(*) FROM p),
       (SELECT count(*) FROM n1),
       0,
       (SELECT count(*) FROM n2),
       0,
       0,
       (SELECT count(*) FROM "public"."app_audit" AS x WHERE (x."application_id") IN (SELECT p."id" FROM p));

-- run: each batch's cascades, before and after its statement
SELECT coalesce(array_agg(s.deleted ORDER BY s.i), '{}'), coalesce(array_agg(s.updated ORDER BY s.i), '{}')
FROM (SELECT x.i, sum(pg_stat_get_xact_tuples_deleted(x.o))::bigint AS deleted, sum(pg_stat_get_xact_tuples_updated(x.o))::bigint AS updated
      FROM unnest($1::oid[], $2::int[]) AS x(o, i) GROUP BY x.i) AS s;
