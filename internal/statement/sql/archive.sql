{{/*
  archive_to: a batch moves its rows in the statement that deletes them, so a row is deleted
  exactly when it is archived. The INSERT names the swept table's columns as the run read them
  and takes its values as deleted.*: a column added or dropped since makes the two lists differ
  in length, and the server refuses the statement before anything is deleted. The statement
  answers the keys it deleted and the md5 of each deleted row's text ("archive-digests"), which
  the next statement of the transaction compares with the archive's rows ("archive-proof").
*/}}
{{define "archive-batch" -}}
WITH deleted AS (
  {{template "delete" .}}
  RETURNING t.*),
archived AS (
  {{template "archive-insert" .}})
SELECT count(*), max(deleted.{{.Age}}),
       {{template "archive-digests" .}}
FROM deleted
{{- end}}

{{define "archive-single" -}}
WITH deleted AS (
  DELETE FROM {{.Table}} AS t WHERE {{.Predicate}}
  RETURNING t.*),
archived AS (
  {{template "archive-insert" .}})
SELECT count(*),
       {{template "archive-digests" .}}
FROM deleted
{{- end}}

{{define "archive-digests"}}ARRAY(SELECT deleted.{{.Key}}::text FROM deleted ORDER BY deleted.{{.Key}}),
       ARRAY(SELECT md5(ROW(deleted.*)::text) FROM deleted ORDER BY deleted.{{.Key}}){{end}}

{{/*
  The archive proof, a statement of its own after the batch's: by then the INSERT's AFTER
  triggers, row and statement, have run (they fire as the statement that queued them ends), so
  it sees what they left. A key the archive lacks, or whose row's digest differs from the
  deleted row's, is answered; the caller rolls the batch back.
*/}}
{{define "archive-proof" -}}
WITH d AS (
  SELECT * FROM unnest({{.Param "deleted-keys"}}::{{.KeyType}}[], {{.Param "digests"}}::text[]) AS d(key, digest)),
a AS (
  SELECT a.{{.Key}} AS key, md5(ROW({{.Columns}})::text) AS digest FROM {{.Archive}} AS a
  WHERE a.{{.Key}} = ANY ({{.Param "deleted-keys"}}::{{.KeyType}}[])),
j AS (
  SELECT d.key, bool_or(a.key IS NOT NULL) AS held, coalesce(bool_or(a.digest = d.digest), false) AS same
  FROM d LEFT JOIN a ON a.key = d.key GROUP BY d.key)
SELECT ARRAY(SELECT j.key::text FROM j WHERE NOT j.held ORDER BY j.key),
       ARRAY(SELECT j.key::text FROM j WHERE j.held AND NOT j.same ORDER BY j.key)
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
       ARRAY(SELECT held.key FROM held ORDER BY held.key), ARRAY(SELECT held.row FROM held ORDER BY held.key),
       {{template "archive-digests" .}}
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
       ARRAY(SELECT held.key FROM held ORDER BY held.key), ARRAY(SELECT held.row FROM held ORDER BY held.key),
       {{template "archive-digests" .}}
FROM deleted
{{- end}}

{{/* The archive's copies of the rows a healing batch met, by key, as rows of the swept table's columns. */}}
{{define "archive-held"}}SELECT a.{{.Key}}::text, ROW({{.Columns}})::text FROM {{.Archive}} AS a WHERE a.{{.Key}} = ANY ({{.Param "held-keys"}}::{{.KeyType}}[]){{end}}
