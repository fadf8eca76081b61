-- sweep events, pass old: table events, age column at (timestamp), mode partitions

-- access path survey: the eligible rows, as the planner estimates them
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT 1 FROM "events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds');

-- access path survey: every row, as the planner estimates them
SELECT 1 FROM "events" AS t;

-- batch, index path, first
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
WITH deleted AS (
  DELETE FROM "events" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') ORDER BY t."at" LIMIT $2))
     AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds')
  RETURNING t."at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch, index path, resumed
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 newest age the previous batch deleted
WITH deleted AS (
  DELETE FROM "events" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') AND t."at" >= $3 ORDER BY t."at" LIMIT $2))
     AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds')
  RETURNING t."at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
  DELETE FROM "events" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds');

-- batch retried after a held row lock, skipping held rows, index path, first
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
WITH deleted AS (
  DELETE FROM "events" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') ORDER BY t."at" LIMIT $2 FOR UPDATE SKIP LOCKED))
     AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds')
  RETURNING t."at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, resumed
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 newest age the previous batch deleted
WITH deleted AS (
  DELETE FROM "events" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') AND t."at" >= $3 ORDER BY t."at" LIMIT $2 FOR UPDATE SKIP LOCKED))
     AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds')
  RETURNING t."at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch retried after a held row lock, skipping held rows, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
WITH deleted AS (
  DELETE FROM "events" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "events" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') FOR UPDATE SKIP LOCKED))
     AND t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds')
  RETURNING t."at" AS age)
SELECT count(*), max(age) FROM deleted;

-- dry run: the exact count
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT count(*) FROM "events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds');

-- dry run and policy check: the index verdict's select, sequential scans and sorts priced out
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT t.ctid FROM "events" AS t WHERE t."at" < ((($1::timestamptz + interval '1209600 seconds') AT TIME ZONE 'UTC') - interval '1209600 seconds') ORDER BY t."at" LIMIT $2;
