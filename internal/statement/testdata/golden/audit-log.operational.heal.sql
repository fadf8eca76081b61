-- batch healing the archive's crash window, index path, first
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
WITH deleted AS (
  DELETE FROM "audit"."log" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "audit"."log" AS t WHERE (t.bucket = 'operational') AND t."occurred_at" < $1::timestamptz ORDER BY t."occurred_at" LIMIT $2))
     AND (t.bucket = 'operational') AND t."occurred_at" < $1::timestamptz
  RETURNING t.*),
archived AS (
  INSERT INTO "cold"."audit_log" ("id", "occurred_at", "bucket", "payload") OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted
  ON CONFLICT DO NOTHING
  RETURNING "id"),
held AS (
  SELECT deleted."id"::text AS key, ROW(deleted.*)::text AS row FROM deleted
  WHERE deleted."id" NOT IN (SELECT archived."id" FROM archived))
SELECT count(*), max(deleted."occurred_at"), (SELECT count(*) FROM archived),
       ARRAY(SELECT held.key FROM held ORDER BY held.key), ARRAY(SELECT held.row FROM held ORDER BY held.key),
       ARRAY(SELECT deleted."id"::text FROM deleted ORDER BY deleted."id"),
       ARRAY(SELECT md5(ROW(deleted.*)::text) FROM deleted ORDER BY deleted."id")
FROM deleted;

-- the archive's copies of the rows it held
--   $1 their keys
SELECT a."id"::text, ROW(a."id", a."occurred_at", a."bucket", a."payload")::text FROM "cold"."audit_log" AS a WHERE a."id" = ANY ($1::bigint[]);
