-- a batch's transaction, heap path
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SET LOCAL statement_timeout = 5000;
SET LOCAL lock_timeout = 50;
SET LOCAL idle_in_transaction_session_timeout = 10000;
SET LOCAL synchronous_commit = off;
SET LOCAL plan_cache_mode = force_custom_plan;

-- a batch's transaction, index path, with BATCH_SYNC_COMMIT (or archiving), after a held row lock
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE;
SET SESSION AUTHORIZATION DEFAULT;
RESET ALL;
SET LOCAL statement_timeout = 5000;
SET LOCAL lock_timeout = 2000;
SET LOCAL idle_in_transaction_session_timeout = 10000;
SET LOCAL synchronous_commit = on;
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL enable_sort = off;
SET LOCAL enable_seqscan = off;
