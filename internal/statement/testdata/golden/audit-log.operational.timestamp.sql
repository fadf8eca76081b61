-- sweep audit-log, pass operational: table audit.log, age column occurred_at (timestamp), mode batched

-- access path survey: the eligible rows, as the planner estimates them
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT 1 FROM "audit"."log" AS t WHERE (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds');

-- access path survey: every row, as the planner estimates them
SELECT 1 FROM "audit"."log" AS t;

-- index path: where the first batch's range of ages starts and ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT (SELECT t."occurred_at" FROM "audit"."log" AS t WHERE (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds') ORDER BY t."occurred_at" LIMIT 1),
       (SELECT t."occurred_at" FROM "audit"."log" AS t WHERE (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds') ORDER BY t."occurred_at" OFFSET $2 LIMIT 1);

-- index path: where a resumed batch's range of ages ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch's range
SELECT (SELECT t."occurred_at" FROM "audit"."log" AS t WHERE (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds') AND t."occurred_at" >= $3 ORDER BY t."occurred_at" OFFSET $2 LIMIT 1);

-- batch, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
WITH deleted AS (
  DELETE FROM "audit"."log" AS t WHERE t."occurred_at" >= $2 AND t."occurred_at" < $3 AND (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds')
  RETURNING t.*),
archived AS (
  INSERT INTO "cold"."audit_log" ("id", "occurred_at", "bucket", "payload") OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted)
SELECT count(*), max(deleted."occurred_at"),
       ARRAY(SELECT deleted."id"::text FROM deleted ORDER BY deleted."id"),
       ARRAY(SELECT md5(ROW(deleted.*)::text) FROM deleted ORDER BY deleted."id")
FROM deleted;

-- batch, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
WITH deleted AS (
  DELETE FROM "audit"."log" AS t WHERE t."occurred_at" >= $2 AND (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds')
  RETURNING t.*),
archived AS (
  INSERT INTO "cold"."audit_log" ("id", "occurred_at", "bucket", "payload") OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted)
SELECT count(*), max(deleted."occurred_at"),
       ARRAY(SELECT deleted."id"::text FROM deleted ORDER BY deleted."id"),
       ARRAY(SELECT md5(ROW(deleted.*)::text) FROM deleted ORDER BY deleted."id")
FROM deleted;

-- batch, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "audit"."log" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "audit"."log" AS t WHERE (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds') AND t."occurred_at" >= $3 ORDER BY t."occurred_at" LIMIT $2))
     AND (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds')
  RETURNING t.*),
archived AS (
  INSERT INTO "cold"."audit_log" ("id", "occurred_at", "bucket", "payload") OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted)
SELECT count(*), max(deleted."occurred_at"),
       ARRAY(SELECT deleted."id"::text FROM deleted ORDER BY deleted."id"),
       ARRAY(SELECT md5(ROW(deleted.*)::text) FROM deleted ORDER BY deleted."id")
FROM deleted;

-- batch, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
WITH deleted AS (
  DELETE FROM "audit"."log" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds')
  RETURNING t.*),
archived AS (
  INSERT INTO "cold"."audit_log" ("id", "occurred_at", "bucket", "payload") OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted)
SELECT count(*), max(deleted."occurred_at"),
       ARRAY(SELECT deleted."id"::text FROM deleted ORDER BY deleted."id"),
       ARRAY(SELECT md5(ROW(deleted.*)::text) FROM deleted ORDER BY deleted."id")
FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
WITH deleted AS (
  DELETE FROM "audit"."log" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "audit"."log" AS t WHERE t."occurred_at" >= $2 AND t."occurred_at" < $3 AND (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds') FOR UPDATE SKIP LOCKED))
     AND (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds')
  RETURNING t.*),
archived AS (
  INSERT INTO "cold"."audit_log" ("id", "occurred_at", "bucket", "payload") OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted)
SELECT count(*), max(deleted."occurred_at"),
       ARRAY(SELECT deleted."id"::text FROM deleted ORDER BY deleted."id"),
       ARRAY(SELECT md5(ROW(deleted.*)::text) FROM deleted ORDER BY deleted."id")
FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
WITH deleted AS (
  DELETE FROM "audit"."log" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "audit"."log" AS t WHERE t."occurred_at" >= $2 AND (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds') FOR UPDATE SKIP LOCKED))
     AND (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds')
  RETURNING t.*),
archived AS (
  INSERT INTO "cold"."audit_log" ("id", "occurred_at", "bucket", "payload") OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted)
SELECT count(*), max(deleted."occurred_at"),
       ARRAY(SELECT deleted."id"::text FROM deleted ORDER BY deleted."id"),
       ARRAY(SELECT md5(ROW(deleted.*)::text) FROM deleted ORDER BY deleted."id")
FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "audit"."log" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "audit"."log" AS t WHERE (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds') AND t."occurred_at" >= $3 ORDER BY t."occurred_at" LIMIT $2 FOR UPDATE SKIP LOCKED))
     AND (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds')
  RETURNING t.*),
archived AS (
  INSERT INTO "cold"."audit_log" ("id", "occurred_at", "bucket", "payload") OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted)
SELECT count(*), max(deleted."occurred_at"),
       ARRAY(SELECT deleted."id"::text FROM deleted ORDER BY deleted."id"),
       ARRAY(SELECT md5(ROW(deleted.*)::text) FROM deleted ORDER BY deleted."id")
FROM deleted;

-- batch retried after a held row lock, skipping held rows, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
WITH deleted AS (
  DELETE FROM "audit"."log" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "audit"."log" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds') FOR UPDATE SKIP LOCKED))
     AND (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds')
  RETURNING t.*),
archived AS (
  INSERT INTO "cold"."audit_log" ("id", "occurred_at", "bucket", "payload") OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted)
SELECT count(*), max(deleted."occurred_at"),
       ARRAY(SELECT deleted."id"::text FROM deleted ORDER BY deleted."id"),
       ARRAY(SELECT md5(ROW(deleted.*)::text) FROM deleted ORDER BY deleted."id")
FROM deleted;

-- archive proof, after each batch's statement in its transaction: the deleted keys the archive lacks or holds otherwise
--   $1 the keys deleted, $2 the md5 of each deleted row's text
WITH d AS (
  SELECT * FROM unnest($1::bigint[], $2::text[]) AS d(key, digest)),
a AS (
  SELECT a."id" AS key, md5(ROW(a."id", a."occurred_at", a."bucket", a."payload")::text) AS digest FROM "cold"."audit_log" AS a
  WHERE a."id" = ANY ($1::bigint[])),
j AS (
  SELECT d.key, bool_or(a.key IS NOT NULL) AS held, coalesce(bool_or(a.digest = d.digest), false) AS same
  FROM d LEFT JOIN a ON a.key = d.key GROUP BY d.key)
SELECT ARRAY(SELECT j.key::text FROM j WHERE NOT j.held ORDER BY j.key),
       ARRAY(SELECT j.key::text FROM j WHERE j.held AND NOT j.same ORDER BY j.key);

-- end of a run: the retention lag, the oldest eligible row's seconds past the cutoff
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT (SELECT extract(epoch FROM ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds') - t."occurred_at")::float8 FROM "audit"."log" AS t WHERE (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds') ORDER BY t."occurred_at" LIMIT 1);

-- dry run: the exact count
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT count(*) FROM "audit"."log" AS t WHERE (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds');

-- dry run and policy check: the index verdict's select, sequential scans and sorts priced out
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT t.ctid FROM "audit"."log" AS t WHERE (t.bucket = 'operational') AND t."occurred_at" < ((($1::timestamptz + interval '7776000 seconds') AT TIME ZONE 'UTC') - interval '7776000 seconds') ORDER BY t."occurred_at" LIMIT $2;
