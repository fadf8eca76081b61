-- sweep outbox, pass dispatched: table public.outbox_events, age column dispatched_at (timestamptz), mode batched

-- access path survey: the eligible rows, as the planner estimates them
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT 1 FROM "public"."outbox_events" AS t WHERE (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz)));

-- access path survey: every row, as the planner estimates them
SELECT 1 FROM "public"."outbox_events" AS t;

-- index path: where the first batch's range of ages starts and ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT (SELECT t."dispatched_at" FROM "public"."outbox_events" AS t WHERE (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz ORDER BY t."dispatched_at" LIMIT 1),
       (SELECT t."dispatched_at" FROM "public"."outbox_events" AS t WHERE (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz ORDER BY t."dispatched_at" OFFSET $2 LIMIT 1);

-- index path: where a resumed batch's range of ages ends
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch's range
SELECT (SELECT t."dispatched_at" FROM "public"."outbox_events" AS t WHERE (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND t."dispatched_at" >= $3 ORDER BY t."dispatched_at" OFFSET $2 LIMIT 1);

-- batch, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
DELETE FROM "public"."outbox_events" AS t WHERE t."dispatched_at" >= $2 AND t."dispatched_at" < $3 AND (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz)));

-- batch, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
DELETE FROM "public"."outbox_events" AS t WHERE t."dispatched_at" >= $2 AND (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz)));

-- batch, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "public"."outbox_events" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "public"."outbox_events" AS t WHERE (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz))) AND t."dispatched_at" >= $3 ORDER BY t."dispatched_at" LIMIT $2))
     AND (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz)))
  RETURNING t."dispatched_at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
DELETE FROM "public"."outbox_events" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz)));

-- batch retried after a held row lock, skipping held rows, index path, a range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range, $3 the age it ends before
WITH deleted AS (
  DELETE FROM "public"."outbox_events" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."outbox_events" AS t WHERE t."dispatched_at" >= $2 AND t."dispatched_at" < $3 AND (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz))) FOR UPDATE SKIP LOCKED))
     AND (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz)))
  RETURNING t."dispatched_at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, the last range of ages
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 first age of the range
WITH deleted AS (
  DELETE FROM "public"."outbox_events" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."outbox_events" AS t WHERE t."dispatched_at" >= $2 AND (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz))) FOR UPDATE SKIP LOCKED))
     AND (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz)))
  RETURNING t."dispatched_at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch retried after a held row lock, skipping held rows, index path, by rows where more than a batch share its first age
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows), $3 first age of the batch
WITH deleted AS (
  DELETE FROM "public"."outbox_events" AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM "public"."outbox_events" AS t WHERE (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz))) AND t."dispatched_at" >= $3 ORDER BY t."dispatched_at" LIMIT $2 FOR UPDATE SKIP LOCKED))
     AND (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz)))
  RETURNING t."dispatched_at" AS age)
SELECT count(*), max(age) FROM deleted;

-- batch retried after a held row lock, skipping held rows, heap path
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)')
WITH deleted AS (
  DELETE FROM "public"."outbox_events" AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM "public"."outbox_events" AS t WHERE t.ctid >= $2 AND t.ctid < $3 AND (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz))) FOR UPDATE SKIP LOCKED))
     AND (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz)))
  RETURNING t."dispatched_at" AS age)
SELECT count(*), max(age) FROM deleted;

-- end of a run: the retention lag, the oldest eligible row's seconds past the cutoff
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT (SELECT extract(epoch FROM $1::timestamptz - t."dispatched_at")::float8 FROM "public"."outbox_events" AS t WHERE (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz))) ORDER BY t."dispatched_at" LIMIT 1);

-- dry run: the exact count
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT count(*) FROM "public"."outbox_events" AS t WHERE (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz AND NOT EXISTS (SELECT 1 FROM "public"."webhook_deliveries" AS g WHERE g."outbox_event_id" = t."id") AND NOT EXISTS (SELECT 1 FROM "app"."replays" AS g WHERE g."event_ref" = t."ref" AND (g.state = 'pending' AND g.requested_at > ($1::timestamptz)));

-- dry run and policy check: the index verdict's select, sequential scans and sorts priced out
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT t.ctid FROM "public"."outbox_events" AS t WHERE (t.dispatched_at IS NOT NULL) AND t."dispatched_at" < $1::timestamptz ORDER BY t."dispatched_at" LIMIT $2;
