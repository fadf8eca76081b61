-- sweep events, pass old: table public.events, age column at (timestamp), mode partitions

-- access path survey: the eligible rows, as the planner estimates them
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT 1 FROM "public"."events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds');

-- access path survey: every row, as the planner estimates them
SELECT 1 FROM "public"."events" AS t;

-- index path: where the first batch's range of ages starts and ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT (SELECT t."at" FROM "public"."events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') ORDER BY t."at" LIMIT 1),
       (SELECT t."at" FROM "public"."events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') ORDER BY t."at" OFFSET $2 LIMIT 1);

-- index path: where a resumed batch's range of ages ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch's range
SELECT (SELECT t."at" FROM "public"."events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') AND t."at" >= $3 ORDER BY t."at" OFFSET $2 LIMIT 1);

-- batch, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
DELETE FROM "public"."events" AS t WHERE t."at" >= $2 AND t."at" < $3 AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds');

-- batch, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
DELETE FROM "public"."events" AS t WHERE t."at" >= $2 AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds');

-- batch, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "public"."events" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "public"."events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') AND t."at" >= $3 ORDER BY t."at" LIMIT $2))
     AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds')
  RETURNING t."at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
DELETE FROM "public"."events" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds');

-- batch retried after a held row lock, skipping held rows, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
WITH deleted AS (
  DELETE FROM "public"."events" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."events" AS t WHERE t."at" >= $2 AND t."at" < $3 AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') FOR UPDATE SKIP LOCKED))
     AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds')
  RETURNING t."at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
WITH deleted AS (
  DELETE FROM "public"."events" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."events" AS t WHERE t."at" >= $2 AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') FOR UPDATE SKIP LOCKED))
     AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds')
  RETURNING t."at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "public"."events" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "public"."events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') AND t."at" >= $3 ORDER BY t."at" LIMIT $2 FOR UPDATE SKIP LOCKED))
     AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds')
  RETURNING t."at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch retried after a held row lock, skipping held rows, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
WITH deleted AS (
  DELETE FROM "public"."events" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."events" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') FOR UPDATE SKIP LOCKED))
     AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds')
  RETURNING t."at" AS age)
SELECT count(*), max(age) FROM deleted;

-- end of a run: the retention lag, the oldest eligible row's seconds past the cutoff
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT (SELECT extract(epoch FROM ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') - t."at")::float8 FROM "public"."events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') ORDER BY t."at" LIMIT 1);

-- dry run: the exact count
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT count(*) FROM "public"."events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds');

-- dry run and policy check: the index verdict's select, sequential scans and sorts priced out
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT t.ctid FROM "public"."events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') ORDER BY t."at" LIMIT $2;
