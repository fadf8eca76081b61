-- sweep media, pass remote: table public.remote_media, age column created_ts (date), mode batched

-- access path survey: the eligible rows, as the planner estimates them
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT 1 FROM "public"."remote_media" AS t WHERE t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id"));

-- access path survey: every row, as the planner estimates them
SELECT 1 FROM "public"."remote_media" AS t;

-- index path: where the first batch's range of ages starts and ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT (SELECT t."created_ts" FROM "public"."remote_media" AS t WHERE t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date ORDER BY t."created_ts" LIMIT 1),
       (SELECT t."created_ts" FROM "public"."remote_media" AS t WHERE t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date ORDER BY t."created_ts" OFFSET $2 LIMIT 1);

-- index path: where a resumed batch's range of ages ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch's range
SELECT (SELECT t."created_ts" FROM "public"."remote_media" AS t WHERE t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND t."created_ts" >= $3 ORDER BY t."created_ts" OFFSET $2 LIMIT 1);

-- batch, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
WITH deleted AS (
  DELETE FROM "public"."remote_media" AS t WHERE t."created_ts" >= $2 AND t."created_ts" < $3 AND t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id"))
  RETURNING t."created_ts" AS age, t."media_id" AS r0_0, t."media_origin" AS r0_1, t."media_id" AS r1),
c0 AS (
  DELETE FROM "public"."remote_thumbnails" AS c WHERE EXISTS (SELECT 1 FROM deleted AS d WHERE (c."media_id", c."media_origin") = (d.r0_0, d.r0_1))
  RETURNING 1),
c1 AS (
  DELETE FROM "public"."url_cache" AS c WHERE c."media_id" = ANY (ARRAY(SELECT r1 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0), (SELECT count(*) FROM c1) FROM deleted;

-- batch, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
WITH deleted AS (
  DELETE FROM "public"."remote_media" AS t WHERE t."created_ts" >= $2 AND t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id"))
  RETURNING t."created_ts" AS age, t."media_id" AS r0_0, t."media_origin" AS r0_1, t."media_id" AS r1),
c0 AS (
  DELETE FROM "public"."remote_thumbnails" AS c WHERE EXISTS (SELECT 1 FROM deleted AS d WHERE (c."media_id", c."media_origin") = (d.r0_0, d.r0_1))
  RETURNING 1),
c1 AS (
  DELETE FROM "public"."url_cache" AS c WHERE c."media_id" = ANY (ARRAY(SELECT r1 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0), (SELECT count(*) FROM c1) FROM deleted;

-- batch, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "public"."remote_media" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "public"."remote_media" AS t WHERE t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id")) AND t."created_ts" >= $3 ORDER BY t."created_ts" LIMIT $2))
     AND t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id"))
  RETURNING t."created_ts" AS age, t."media_id" AS r0_0, t."media_origin" AS r0_1, t."media_id" AS r1),
c0 AS (
  DELETE FROM "public"."remote_thumbnails" AS c WHERE EXISTS (SELECT 1 FROM deleted AS d WHERE (c."media_id", c."media_origin") = (d.r0_0, d.r0_1))
  RETURNING 1),
c1 AS (
  DELETE FROM "public"."url_cache" AS c WHERE c."media_id" = ANY (ARRAY(SELECT r1 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0), (SELECT count(*) FROM c1) FROM deleted;

-- batch, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
WITH deleted AS (
  DELETE FROM "public"."remote_media" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id"))
  RETURNING t."created_ts" AS age, t."media_id" AS r0_0, t."media_origin" AS r0_1, t."media_id" AS r1),
c0 AS (
  DELETE FROM "public"."remote_thumbnails" AS c WHERE EXISTS (SELECT 1 FROM deleted AS d WHERE (c."media_id", c."media_origin") = (d.r0_0, d.r0_1))
  RETURNING 1),
c1 AS (
  DELETE FROM "public"."url_cache" AS c WHERE c."media_id" = ANY (ARRAY(SELECT r1 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0), (SELECT count(*) FROM c1) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
WITH deleted AS (
  DELETE FROM "public"."remote_media" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."remote_media" AS t WHERE t."created_ts" >= $2 AND t."created_ts" < $3 AND t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id")) FOR UPDATE SKIP LOCKED))
     AND t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id"))
  RETURNING t."created_ts" AS age, t."media_id" AS r0_0, t."media_origin" AS r0_1, t."media_id" AS r1),
c0 AS (
  DELETE FROM "public"."remote_thumbnails" AS c WHERE EXISTS (SELECT 1 FROM deleted AS d WHERE (c."media_id", c."media_origin") = (d.r0_0, d.r0_1))
  RETURNING 1),
c1 AS (
  DELETE FROM "public"."url_cache" AS c WHERE c."media_id" = ANY (ARRAY(SELECT r1 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0), (SELECT count(*) FROM c1) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
WITH deleted AS (
  DELETE FROM "public"."remote_media" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."remote_media" AS t WHERE t."created_ts" >= $2 AND t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id")) FOR UPDATE SKIP LOCKED))
     AND t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id"))
  RETURNING t."created_ts" AS age, t."media_id" AS r0_0, t."media_origin" AS r0_1, t."media_id" AS r1),
c0 AS (
  DELETE FROM "public"."remote_thumbnails" AS c WHERE EXISTS (SELECT 1 FROM deleted AS d WHERE (c."media_id", c."media_origin") = (d.r0_0, d.r0_1))
  RETURNING 1),
c1 AS (
  DELETE FROM "public"."url_cache" AS c WHERE c."media_id" = ANY (ARRAY(SELECT r1 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0), (SELECT count(*) FROM c1) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "public"."remote_media" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "public"."remote_media" AS t WHERE t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id")) AND t."created_ts" >= $3 ORDER BY t."created_ts" LIMIT $2 FOR UPDATE SKIP LOCKED))
     AND t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id"))
  RETURNING t."created_ts" AS age, t."media_id" AS r0_0, t."media_origin" AS r0_1, t."media_id" AS r1),
c0 AS (
  DELETE FROM "public"."remote_thumbnails" AS c WHERE EXISTS (SELECT 1 FROM deleted AS d WHERE (c."media_id", c."media_origin") = (d.r0_0, d.r0_1))
  RETURNING 1),
c1 AS (
  DELETE FROM "public"."url_cache" AS c WHERE c."media_id" = ANY (ARRAY(SELECT r1 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0), (SELECT count(*) FROM c1) FROM deleted;

-- batch retried after a held row lock, skipping held rows, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
WITH deleted AS (
  DELETE FROM "public"."remote_media" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."remote_media" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id")) FOR UPDATE SKIP LOCKED))
     AND t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id"))
  RETURNING t."created_ts" AS age, t."media_id" AS r0_0, t."media_origin" AS r0_1, t."media_id" AS r1),
c0 AS (
  DELETE FROM "public"."remote_thumbnails" AS c WHERE EXISTS (SELECT 1 FROM deleted AS d WHERE (c."media_id", c."media_origin") = (d.r0_0, d.r0_1))
  RETURNING 1),
c1 AS (
  DELETE FROM "public"."url_cache" AS c WHERE c."media_id" = ANY (ARRAY(SELECT r1 FROM deleted))
  RETURNING 1)
SELECT count(*), max(age), (SELECT count(*) FROM c0), (SELECT count(*) FROM c1) FROM deleted;

-- end of a run: the retention lag, the oldest eligible row's seconds past the cutoff
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT (SELECT (((((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date) - t."created_ts") * 86400)::float8 FROM "public"."remote_media" AS t WHERE t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id")) ORDER BY t."created_ts" LIMIT 1);

-- dry run: the exact count
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
WITH p AS MATERIALIZED (SELECT t."media_id" AS r0_0, t."media_origin" AS r0_1, t."media_id" AS r1 FROM "public"."remote_media" AS t WHERE t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date AND NOT EXISTS (SELECT 1 FROM "public"."media_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id")))
SELECT (SELECT count(*) FROM p), (SELECT count(*) FROM "public"."remote_thumbnails" AS c WHERE (c."media_id", c."media_origin") IN (SELECT r0_0, r0_1 FROM p)), (SELECT count(*) FROM "public"."url_cache" AS c WHERE c."media_id" IN (SELECT r1 FROM p));

-- dry run and policy check: the index verdict's select, sequential scans and sorts priced out
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT t.ctid FROM "public"."remote_media" AS t WHERE t."created_ts" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')::date ORDER BY t."created_ts" LIMIT $2;
