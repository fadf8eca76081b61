-- sweep receipts, pass seen: table public.receipts, age column received_ts (epoch-milliseconds), mode batched

-- access path survey: the eligible rows, as the planner estimates them
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT 1 FROM "public"."receipts" AS t WHERE (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)));

-- access path survey: every row, as the planner estimates them
SELECT 1 FROM "public"."receipts" AS t;

-- index path: where the first batch's range of ages starts and ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT (SELECT t."received_ts" FROM "public"."receipts" AS t WHERE (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint ORDER BY t."received_ts" LIMIT 1),
       (SELECT t."received_ts" FROM "public"."receipts" AS t WHERE (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint ORDER BY t."received_ts" OFFSET $2 LIMIT 1);

-- index path: where a resumed batch's range of ages ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch's range
SELECT (SELECT t."received_ts" FROM "public"."receipts" AS t WHERE (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND t."received_ts" >= $3 ORDER BY t."received_ts" OFFSET $2 LIMIT 1);

-- batch, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
DELETE FROM "public"."receipts" AS t WHERE t."received_ts" >= $2 AND t."received_ts" < $3 AND (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)));

-- batch, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
DELETE FROM "public"."receipts" AS t WHERE t."received_ts" >= $2 AND (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)));

-- batch, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "public"."receipts" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "public"."receipts" AS t WHERE (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint))) AND t."received_ts" >= $3 ORDER BY t."received_ts" LIMIT $2))
     AND (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)))
  RETURNING t."received_ts" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
DELETE FROM "public"."receipts" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)));

-- batch retried after a held row lock, skipping held rows, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
WITH deleted AS (
  DELETE FROM "public"."receipts" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."receipts" AS t WHERE t."received_ts" >= $2 AND t."received_ts" < $3 AND (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint))) FOR UPDATE SKIP LOCKED))
     AND (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)))
  RETURNING t."received_ts" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
WITH deleted AS (
  DELETE FROM "public"."receipts" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."receipts" AS t WHERE t."received_ts" >= $2 AND (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint))) FOR UPDATE SKIP LOCKED))
     AND (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)))
  RETURNING t."received_ts" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "public"."receipts" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "public"."receipts" AS t WHERE (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint))) AND t."received_ts" >= $3 ORDER BY t."received_ts" LIMIT $2 FOR UPDATE SKIP LOCKED))
     AND (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)))
  RETURNING t."received_ts" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch retried after a held row lock, skipping held rows, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
WITH deleted AS (
  DELETE FROM "public"."receipts" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."receipts" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint))) FOR UPDATE SKIP LOCKED))
     AND (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)))
  RETURNING t."received_ts" AS age)
SELECT count(*), max(age) FROM deleted;

-- end of a run: the retention lag, the oldest eligible row's seconds past the cutoff
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT (SELECT ((floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint) - t."received_ts")::float8 / 1000 FROM "public"."receipts" AS t WHERE (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint))) ORDER BY t."received_ts" LIMIT 1);

-- dry run: the exact count
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT count(*) FROM "public"."receipts" AS t WHERE (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint AND NOT EXISTS (SELECT 1 FROM "public"."pushers" AS g WHERE g."last_receipt_id" = t."id" AND (g.last_seen > (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)));

-- dry run and policy check: the index verdict's select, sequential scans and sorts priced out
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT t.ctid FROM "public"."receipts" AS t WHERE (t.expiry_ts IS NULL OR t.expiry_ts < (floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint)) AND t."received_ts" < floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint ORDER BY t."received_ts" LIMIT $2;
