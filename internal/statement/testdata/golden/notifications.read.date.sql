-- sweep notifications, pass read: table public.notifications, age column read_at (date), mode batched

-- access path survey: the eligible rows, as the planner estimates them
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT 1 FROM "public"."notifications" AS t WHERE t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date;

-- access path survey: every row, as the planner estimates them
SELECT 1 FROM "public"."notifications" AS t;

-- index path: where the first batch's range of ages starts and ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT (SELECT t."read_at" FROM "public"."notifications" AS t WHERE t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date ORDER BY t."read_at" LIMIT 1),
       (SELECT t."read_at" FROM "public"."notifications" AS t WHERE t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date ORDER BY t."read_at" OFFSET $2 LIMIT 1);

-- index path: where a resumed batch's range of ages ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch's range
SELECT (SELECT t."read_at" FROM "public"."notifications" AS t WHERE t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date AND t."read_at" >= $3 ORDER BY t."read_at" OFFSET $2 LIMIT 1);

-- batch, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
WITH deleted AS (
  DELETE FROM "public"."notifications" AS t WHERE t."read_at" >= $2 AND t."read_at" < $3 AND t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date
  RETURNING t."read_at" AS age, t."id" AS r0),
c0 AS (
  DELETE FROM "public"."notification_deliveries" AS c WHERE c."notification_id" = ANY (ARRAY(SELECT r0 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0) FROM deleted;

-- batch, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
WITH deleted AS (
  DELETE FROM "public"."notifications" AS t WHERE t."read_at" >= $2 AND t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date
  RETURNING t."read_at" AS age, t."id" AS r0),
c0 AS (
  DELETE FROM "public"."notification_deliveries" AS c WHERE c."notification_id" = ANY (ARRAY(SELECT r0 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0) FROM deleted;

-- batch, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "public"."notifications" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "public"."notifications" AS t WHERE t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date AND t."read_at" >= $3 ORDER BY t."read_at" LIMIT $2))
     AND t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date
  RETURNING t."read_at" AS age, t."id" AS r0),
c0 AS (
  DELETE FROM "public"."notification_deliveries" AS c WHERE c."notification_id" = ANY (ARRAY(SELECT r0 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0) FROM deleted;

-- batch, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
WITH deleted AS (
  DELETE FROM "public"."notifications" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date
  RETURNING t."read_at" AS age, t."id" AS r0),
c0 AS (
  DELETE FROM "public"."notification_deliveries" AS c WHERE c."notification_id" = ANY (ARRAY(SELECT r0 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
WITH deleted AS (
  DELETE FROM "public"."notifications" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."notifications" AS t WHERE t."read_at" >= $2 AND t."read_at" < $3 AND t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date FOR UPDATE SKIP LOCKED))
     AND t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date
  RETURNING t."read_at" AS age, t."id" AS r0),
c0 AS (
  DELETE FROM "public"."notification_deliveries" AS c WHERE c."notification_id" = ANY (ARRAY(SELECT r0 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
WITH deleted AS (
  DELETE FROM "public"."notifications" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."notifications" AS t WHERE t."read_at" >= $2 AND t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date FOR UPDATE SKIP LOCKED))
     AND t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date
  RETURNING t."read_at" AS age, t."id" AS r0),
c0 AS (
  DELETE FROM "public"."notification_deliveries" AS c WHERE c."notification_id" = ANY (ARRAY(SELECT r0 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "public"."notifications" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "public"."notifications" AS t WHERE t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date AND t."read_at" >= $3 ORDER BY t."read_at" LIMIT $2 FOR UPDATE SKIP LOCKED))
     AND t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date
  RETURNING t."read_at" AS age, t."id" AS r0),
c0 AS (
  DELETE FROM "public"."notification_deliveries" AS c WHERE c."notification_id" = ANY (ARRAY(SELECT r0 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0) FROM deleted;

-- batch retried after a held row lock, skipping held rows, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
WITH deleted AS (
  DELETE FROM "public"."notifications" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."notifications" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date FOR UPDATE SKIP LOCKED))
     AND t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date
  RETURNING t."read_at" AS age, t."id" AS r0),
c0 AS (
  DELETE FROM "public"."notification_deliveries" AS c WHERE c."notification_id" = ANY (ARRAY(SELECT r0 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0) FROM deleted;

-- end of a run: the retention lag, the oldest eligible row's seconds past the cutoff
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT (SELECT (((((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date) - t."read_at") * 86400)::float8 FROM "public"."notifications" AS t WHERE t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date ORDER BY t."read_at" LIMIT 1);

-- dry run: the exact count
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
WITH p AS MATERIALIZED (SELECT t."id" AS r0 FROM "public"."notifications" AS t WHERE t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date)
SELECT (SELECT count(*) FROM p), (SELECT count(*) FROM "public"."notification_deliveries" AS c WHERE c."notification_id" IN (SELECT r0 FROM p));

-- dry run and policy check: the index verdict's select, sequential scans and sorts priced out
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT t.ctid FROM "public"."notifications" AS t WHERE t."read_at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'Europe/Paris') - interval '2592000 seconds')::date ORDER BY t."read_at" LIMIT $2;
