{{/*
  archive_to: a batch moves its rows in the statement that deletes them, so a row is deleted
  exactly when it is archived. The INSERT names the swept table's columns as the run read them
  and takes its values as deleted.*: a column added or dropped since makes the two lists differ
  in length, and the server refuses the statement before anything is deleted. The statement
  answers the rows the archive reported taking (RETURNING) beside the rows deleted: a trigger
  or rule that discards some makes them differ, and the batch is rolled back.
*/}}
{{define "archive-batch" -}}
WITH deleted AS (
  {{template "delete" .}}
  RETURNING t.*),
archived AS (
  {{template "archive-insert" .}}
  RETURNING 1)
SELECT count(*), max(deleted.{{.Age}}), (SELECT count(*) FROM archived) FROM deleted
{{- end}}

{{define "archive-single" -}}
WITH deleted AS (
  DELETE FROM {{.Table}} AS t WHERE {{.Predicate}}
  RETURNING t.*),
archived AS (
  {{template "archive-insert" .}}
  RETURNING 1)
SELECT count(*), (SELECT count(*) FROM archived) FROM deleted
{{- end}}

{{/* OVERRIDING SYSTEM VALUE keeps the rows' own values in GENERATED ALWAYS identity columns. */}}
{{define "archive-insert"}}INSERT INTO {{.Archive}} ({{.Columns}}) OVERRIDING SYSTEM VALUE {{.Rows}}{{end}}

{{/*
  A batch that heals a foreign archive's crash window (statement/archive.go): the same batch, its
  insert skipping the rows the archive holds already (ON CONFLICT DO NOTHING, which postgres_fdw
  sends as is), answering the keys and rows of those it held. The caller compares them with the
  archive's copies before it commits: identical ones are recovered, any other stops the batch.
*/}}
{{define "archive-heal-batch" -}}
WITH deleted AS (
  {{template "delete" .}}
  RETURNING t.*),
archived AS (
  {{template "archive-insert" .}}
  ON CONFLICT DO NOTHING
  RETURNING {{.Key}}),
held AS (
  SELECT deleted.{{.Key}}::text AS key, ROW(deleted.*)::text AS row FROM deleted
  WHERE deleted.{{.Key}} NOT IN (SELECT archived.{{.Key}} FROM archived))
SELECT count(*), max(deleted.{{.Age}}), (SELECT count(*) FROM archived),
       ARRAY(SELECT held.key FROM held ORDER BY held.key), ARRAY(SELECT held.row FROM held ORDER BY held.key)
FROM deleted
{{- end}}

{{define "archive-heal-single" -}}
WITH deleted AS (
  DELETE FROM {{.Table}} AS t WHERE {{.Predicate}}
  RETURNING t.*),
archived AS (
  {{template "archive-insert" .}}
  ON CONFLICT DO NOTHING
  RETURNING {{.Key}}),
held AS (
  SELECT deleted.{{.Key}}::text AS key, ROW(deleted.*)::text AS row FROM deleted
  WHERE deleted.{{.Key}} NOT IN (SELECT archived.{{.Key}} FROM archived))
SELECT count(*), (SELECT count(*) FROM archived),
       ARRAY(SELECT held.key FROM held ORDER BY held.key), ARRAY(SELECT held.row FROM held ORDER BY held.key)
FROM deleted
{{- end}}

{{/* The archive's copies of the rows a healing batch met, by key, as rows of the swept table's columns. */}}
{{define "archive-held"}}SELECT a.{{.Key}}::text, ROW({{.Columns}})::text FROM {{.Archive}} AS a WHERE a.{{.Key}} = ANY ({{.Param "held-keys"}}::{{.KeyType}}[]){{end}}

{{/*
  A foreign archive's batch: the insert without RETURNING, which would make postgres_fdw send
  the rows one by one instead of in its batches; the statement answers the keys it deleted
  instead, and the archive is asked, in the same (remote) transaction, how many rows of those
  keys it holds: the proof, in one round trip.
*/}}
{{define "archive-keyed-batch" -}}
WITH deleted AS (
  {{template "delete" .}}
  RETURNING t.*),
archived AS (
  {{template "archive-insert" .}})
SELECT count(*), max(deleted.{{.Age}}), ARRAY(SELECT deleted.{{.Key}}::text FROM deleted) FROM deleted
{{- end}}

{{define "archive-keyed-single" -}}
WITH deleted AS (
  DELETE FROM {{.Table}} AS t WHERE {{.Predicate}}
  RETURNING t.*),
archived AS (
  {{template "archive-insert" .}})
SELECT count(*), ARRAY(SELECT deleted.{{.Key}}::text FROM deleted) FROM deleted
{{- end}}

{{define "archive-count"}}SELECT count(*) FROM {{.Archive}} AS a WHERE a.{{.Key}} = ANY ({{.Param "deleted-keys"}}::{{.KeyType}}[]){{end}}
