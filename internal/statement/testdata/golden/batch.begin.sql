-- a batch's transaction, heap path
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SELECT set_config('search_path', array_to_string(array_append(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) AS s
  WHERE s IS DISTINCT FROM (SELECT n.nspname FROM pg_namespace n WHERE n.oid = pg_my_temp_schema())), 'pg_temp'), ', '), true);
SET LOCAL statement_timeout = 5000;
SET LOCAL lock_timeout = 50;
SET LOCAL idle_in_transaction_session_timeout = 10000;
SET LOCAL synchronous_commit = off;
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL jit = off;

-- a batch's transaction, index path, with BATCH_SYNC_COMMIT (or archiving), after a held row lock
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SELECT set_config('search_path', array_to_string(array_append(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) AS s
  WHERE s IS DISTINCT FROM (SELECT n.nspname FROM pg_namespace n WHERE n.oid = pg_my_temp_schema())), 'pg_temp'), ', '), true);
SET LOCAL statement_timeout = 5000;
SET LOCAL lock_timeout = 2000;
SET LOCAL idle_in_transaction_session_timeout = 10000;
SET LOCAL synchronous_commit = on;
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL jit = off;
SET LOCAL enable_sort = off;
SET LOCAL enable_seqscan = off;

-- a batch's transaction, heap path, with BATCH_SYNC_COMMIT, BATCH_WAL_COMPRESSION=lz4 and BATCH_FLUSH_AFTER=256KiB
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SELECT set_config('search_path', array_to_string(array_append(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) AS s
  WHERE s IS DISTINCT FROM (SELECT n.nspname FROM pg_namespace n WHERE n.oid = pg_my_temp_schema())), 'pg_temp'), ', '), true);
SET LOCAL statement_timeout = 5000;
SET LOCAL lock_timeout = 2000;
SET LOCAL idle_in_transaction_session_timeout = 10000;
SET LOCAL synchronous_commit = on;
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL jit = off;
SET LOCAL wal_compression = lz4;
SET LOCAL backend_flush_after = '256kB';

-- a later batch of the pass, the search_path its first computed set as it is
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SELECT set_config('search_path', 'public, "it''s", pg_temp', true);
SET LOCAL statement_timeout = 5000;
SET LOCAL lock_timeout = 2000;
SET LOCAL idle_in_transaction_session_timeout = 10000;
SET LOCAL synchronous_commit = on;
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL jit = off;

-- the same where a schema's name holds a backslash
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SELECT set_config('search_path', E'public, "back\\slash", pg_temp', true);
SET LOCAL statement_timeout = 5000;
SET LOCAL lock_timeout = 2000;
SET LOCAL idle_in_transaction_session_timeout = 10000;
SET LOCAL synchronous_commit = on;
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL jit = off;

-- a transaction that is no batch: the search_path, pg_temp last, and its statement and lock timeouts, or one of them
SELECT set_config('search_path', array_to_string(array_append(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) AS s
  WHERE s IS DISTINCT FROM (SELECT n.nspname FROM pg_namespace n WHERE n.oid = pg_my_temp_schema())), 'pg_temp'), ', '), true), set_config('statement_timeout', '10000ms', true), set_config('lock_timeout', '1ms', true);
SELECT set_config('search_path', array_to_string(array_append(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) AS s
  WHERE s IS DISTINCT FROM (SELECT n.nspname FROM pg_namespace n WHERE n.oid = pg_my_temp_schema())), 'pg_temp'), ', '), true), set_config('statement_timeout', '10000ms', true);
SELECT set_config('search_path', array_to_string(array_append(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) AS s
  WHERE s IS DISTINCT FROM (SELECT n.nspname FROM pg_namespace n WHERE n.oid = pg_my_temp_schema())), 'pg_temp'), ', '), true), set_config('lock_timeout', '2000ms', true);

-- the lag read's, with BATCH_WAL_COMPRESSION=lz4 and BATCH_FLUSH_AFTER=256KiB
SELECT set_config('search_path', array_to_string(array_append(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) AS s
  WHERE s IS DISTINCT FROM (SELECT n.nspname FROM pg_namespace n WHERE n.oid = pg_my_temp_schema())), 'pg_temp'), ', '), true), set_config('statement_timeout', '1000ms', true), set_config('lock_timeout', '20ms', true), set_config('wal_compression', 'lz4', true), set_config('backend_flush_after', '256kB', true);
