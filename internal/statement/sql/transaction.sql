{{/*
  How a batch's transaction begins: BEGIN, the session's reset and the batch's settings, four
  statements sent in one pipeline with the batch's first statement, so a batch spends no round
  trip of its own on them. The settings are set_config(…, true), as SET LOCAL: they end with the
  transaction, and the connection keeps the server's defaults; one SELECT sets them all. Every
  value is a whole number of milliseconds, a keyword the engine chose or the search_path the
  server computed, never text from a policy. Each statement of a pipeline runs under the
  statement_timeout in force when it starts, so the batch's statements run under the batch's.

  A pass runs its batches on one connection, which the pool resets only when the pass gives it
  back; so each batch undoes what the one before may have left on the session (a trigger's
  set_config(…, false) or SET ROLE): the role and every setting back to the session's own, as
  the pool's reset would. The transaction's own mode is named, since it is fixed at BEGIN from
  defaults such a trigger may have changed (default_transaction_read_only, its isolation).

  synchronous_commit off unless SyncCommit: a crash loses at most the last batches' deletes,
  which the next tick repeats, and the batch saves a WAL flush, which the next commit on the
  server then makes (an application's, beside live traffic). A pass that archives always
  commits with it on: its archive may be on another server.

  plan_cache_mode force_custom_plan: a batch's statement may be prepared (pgx caches it when the
  connection string asks for cache_statement), and after five runs PostgreSQL may switch to a
  generic plan, costed without the cutoff or the batch size, which can flip mid-drain to walking
  the age index from its start, or away from the heap path's TID Range Scan.

  Ordered (the index path) prices out sorts and sequential scans: its bound reads the age index
  in order, a batch of entries, and its range of ages is read through the index.

  wal_compression, when BATCH_WAL_COMPRESSION names it: a drain is the first to change most pages
  it passes since the last checkpoint, so most of its WAL is their full-page images, which lz4
  or zstd write in about a half to three fifths of the room. The setting is the superuser's: the role
  needs GRANT SET ON PARAMETER (PostgreSQL 15 and later), which the API's boot probes.

  backend_flush_after, when BATCH_FLUSH_AFTER sets it: a drain dirties every page it passes, far
  more than shared_buffers holds, so its backend writes them out to the kernel as it goes; with
  PostgreSQL's default of no hints for a backend, the kernel gathers them (gigabytes, a tenth of
  its memory) and writes them back in one burst, during which the application's commits wait
  for their own WAL flush a hundred milliseconds and more. With it, the backend asks the kernel
  to start writing after every so many bytes, as the checkpointer does. Any role may set it.

  The search_path, pg_temp last, is computed by the pass's first batch (search-path, below) and
  set as that constant by the others: computed, it is planned and run each batch, about half the
  begin's round trip. After RESET ALL every session of the pool has the same default (the role's
  and the database's), and a schema created mid-pass cannot join the path ahead of those the pass
  started with.

  jit off: a batch's statements run for milliseconds, and compiling them (inlining, optimizing)
  costs a hundred or more; the prices that rule out sorts and scans lift every index-path plan
  past jit_above_cost, so with JIT on each batch paid that compile, several times its own work.
*/}}
{{define "begin" -}}
BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE
{{- end}}

{{define "begin-session" -}}
SET SESSION AUTHORIZATION DEFAULT
{{- end}}

{{define "begin-reset" -}}
RESET ALL
{{- end}}

{{define "begin-settings" -}}
SELECT {{if .SearchPath}}set_config('search_path', {{literal .SearchPath}}, true){{else}}{{template "search-path"}}{{end}},
       set_config('statement_timeout', '{{.StatementTimeoutMs}}', true), set_config('lock_timeout', '{{.LockTimeoutMs}}', true),
       set_config('idle_in_transaction_session_timeout', '{{.IdleTimeoutMs}}', true),
       set_config('synchronous_commit', '{{if .SyncCommit}}on{{else}}off{{end}}', true),
       set_config('plan_cache_mode', 'force_custom_plan', true), set_config('jit', 'off', true)
{{- if .WALCompression}},
       set_config('wal_compression', '{{.WALCompression}}', true)
{{- end}}
{{- if .FlushAfterKB}},
       set_config('backend_flush_after', '{{.FlushAfterKB}}kB', true)
{{- end}}
{{- if .Ordered}},
       set_config('enable_sort', 'off', true), set_config('enable_seqscan', 'off', true)
{{- end}}
{{- end}}

{{/*
  The session's search_path with pg_temp moved last: its schemas in their order, less the
  temporary one, which PostgreSQL otherwise searches first for tables and types. Statements name
  the tables the check resolved, schema-qualified; this keeps a where condition's unqualified
  names, and every read of the catalog by name, from resolving to a temporary table.
*/}}
{{define "search-path" -}}
set_config('search_path', array_to_string(array_append(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) AS s
  WHERE s IS DISTINCT FROM (SELECT n.nspname FROM pg_namespace n WHERE n.oid = pg_my_temp_schema())), 'pg_temp'), ', '), true)
{{- end}}

{{/*
  The settings of a transaction that is no batch, set locally (set_config(…, true) ends with the
  transaction): the search_path, its bounds, and for the lag read a batch's wal_compression and
  backend_flush_after (its first pass over what a drain deleted prunes every page it emptied, as
  many dirty pages and as much WAL as the drain's last second made). One left out keeps the
  session's setting.
*/}}
{{define "timeouts" -}}
SELECT {{template "search-path"}}
{{- if .StatementMs}}, set_config('statement_timeout', '{{.StatementMs}}ms', true){{end}}
{{- if .LockMs}}, set_config('lock_timeout', '{{.LockMs}}ms', true){{end}}
{{- if .WALCompression}}, set_config('wal_compression', '{{.WALCompression}}', true){{end}}
{{- if .FlushAfterKB}}, set_config('backend_flush_after', '{{.FlushAfterKB}}kB', true){{end}}
{{- end}}
