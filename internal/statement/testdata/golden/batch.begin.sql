-- a batch's transaction, heap path
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SELECT set_config('search_path', array_to_string(array_append(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) AS s
  WHERE s IS DISTINCT FROM (SELECT n.nspname FROM pg_namespace n WHERE n.oid = pg_my_temp_schema())), 'pg_temp'), ', '), true),
       set_config('statement_timeout', '5000', true), set_config('lock_timeout', '50', true),
       set_config('idle_in_transaction_session_timeout', '10000', true),
       set_config('synchronous_commit', 'off', true),
       set_config('plan_cache_mode', 'force_custom_plan', true), set_config('jit', 'off', true);

-- a batch's transaction, index path, with BATCH_SYNC_COMMIT (or archiving), after a held row lock
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SELECT set_config('search_path', array_to_string(array_append(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) AS s
  WHERE s IS DISTINCT FROM (SELECT n.nspname FROM pg_namespace n WHERE n.oid = pg_my_temp_schema())), 'pg_temp'), ', '), true),
       set_config('statement_timeout', '5000', true), set_config('lock_timeout', '2000', true),
       set_config('idle_in_transaction_session_timeout', '10000', true),
       set_config('synchronous_commit', 'on', true),
       set_config('plan_cache_mode', 'force_custom_plan', true), set_config('jit', 'off', true),
       set_config('enable_sort', 'off', true), set_config('enable_seqscan', 'off', true);

-- a batch's transaction, heap path, with BATCH_SYNC_COMMIT, BATCH_WAL_COMPRESSION=lz4 and BATCH_FLUSH_AFTER=256KiB
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SELECT set_config('search_path', array_to_string(array_append(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) AS s
  WHERE s IS DISTINCT FROM (SELECT n.nspname FROM pg_namespace n WHERE n.oid = pg_my_temp_schema())), 'pg_temp'), ', '), true),
       set_config('statement_timeout', '5000', true), set_config('lock_timeout', '2000', true),
       set_config('idle_in_transaction_session_timeout', '10000', true),
       set_config('synchronous_commit', 'on', true),
       set_config('plan_cache_mode', 'force_custom_plan', true), set_config('jit', 'off', true),
       set_config('wal_compression', 'lz4', true),
       set_config('backend_flush_after', '256kB', true);

-- a later batch of the pass, the search_path its first computed set as it is
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SELECT set_config('search_path', 'public, "it''s", pg_temp', true),
       set_config('statement_timeout', '5000', true), set_config('lock_timeout', '2000', true),
       set_config('idle_in_transaction_session_timeout', '10000', true),
       set_config('synchronous_commit', 'on', true),
       set_config('plan_cache_mode', 'force_custom_plan', true), set_config('jit', 'off', true);

-- the same where a schema's name holds a backslash
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SELECT set_config('search_path', E'public, "back\\slash", pg_temp', true),
       set_config('statement_timeout', '5000', true), set_config('lock_timeout', '2000', true),
       set_config('idle_in_transaction_session_timeout', '10000', true),
       set_config('synchronous_commit', 'on', true),
       set_config('plan_cache_mode', 'force_custom_plan', true), set_config('jit', 'off', true);

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
