-- sweep accounts, pass closed: table public.accounts, age column closed_at (timestamptz), mode per-row

-- per-row: lock one eligible key and call the function on it, once per transaction
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT "erase_account"(k.key) FROM (
  SELECT t."id" AS key FROM "public"."accounts" AS t WHERE t."closed_at" < $1::timestamptz ORDER BY t."closed_at" LIMIT 1 FOR UPDATE OF t SKIP LOCKED
) AS k;

-- end of a run: the retention lag, the oldest eligible row's seconds past the cutoff
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT (SELECT extract(epoch FROM $1::timestamptz - t."closed_at")::float8 FROM "public"."accounts" AS t WHERE t."closed_at" < $1::timestamptz ORDER BY t."closed_at" LIMIT 1);

-- dry run: the exact count
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT count(*) FROM "public"."accounts" AS t WHERE t."closed_at" < $1::timestamptz;

-- dry run: the eligible rows, as the planner estimates them
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT 1 FROM "public"."accounts" AS t WHERE t."closed_at" < $1::timestamptz;

-- dry run and policy check: the index verdict's select, sequential scans and sorts priced out
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT t.ctid FROM "public"."accounts" AS t WHERE t."closed_at" < $1::timestamptz ORDER BY t."closed_at" LIMIT $2;
