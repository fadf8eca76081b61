-- sweep sessions, pass expired: table public.sessions, age column expires_at (timestamp), mode single

-- delete every eligible row, in one statement
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
WITH deleted AS (
  DELETE FROM "public"."sessions" AS t WHERE t."expires_at" < ((($1::timestamptz + interval '0 seconds') AT TIME ZONE 'UTC') - interval '0 seconds')
  RETURNING 1 AS one)
SELECT count(*) FROM deleted;

-- end of a run: the retention lag, the oldest eligible row's seconds past the cutoff
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT (SELECT extract(epoch FROM ((($1::timestamptz + interval '0 seconds') AT TIME ZONE 'UTC') - interval '0 seconds') - t."expires_at")::float8 FROM "public"."sessions" AS t WHERE t."expires_at" < ((($1::timestamptz + interval '0 seconds') AT TIME ZONE 'UTC') - interval '0 seconds') ORDER BY t."expires_at" LIMIT 1);

-- dry run: the exact count
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT count(*) FROM "public"."sessions" AS t WHERE t."expires_at" < ((($1::timestamptz + interval '0 seconds') AT TIME ZONE 'UTC') - interval '0 seconds');

-- dry run: the eligible rows, as the planner estimates them
--   $1 cutoff (timestamptz: the run's reference time minus the retention)
SELECT 1 FROM "public"."sessions" AS t WHERE t."expires_at" < ((($1::timestamptz + interval '0 seconds') AT TIME ZONE 'UTC') - interval '0 seconds');

-- dry run and policy check: the index verdict's select, sequential scans and sorts priced out
--   $1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)
SELECT t.ctid FROM "public"."sessions" AS t WHERE t."expires_at" < ((($1::timestamptz + interval '0 seconds') AT TIME ZONE 'UTC') - interval '0 seconds') AND $2::int > 0;
