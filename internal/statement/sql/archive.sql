{{/*
  archive_to: a batch moves its rows in the statement that deletes them, so a row is deleted
  exactly when it is archived. The INSERT names the swept table's columns as the run read them
  and takes its values as deleted.*: a column added or dropped since makes the two lists differ
  in length, and the server refuses the statement before anything is deleted.
*/}}
{{define "archive-batch" -}}
WITH deleted AS (
{{.Delete}}
  RETURNING t.*),
archived AS (
  {{.Insert}})
SELECT count(*), max(deleted.{{.Age}}) FROM deleted
{{- end}}

{{define "archive-single" -}}
WITH deleted AS (
  DELETE FROM {{.Table}} AS t WHERE {{.Predicate}}
  RETURNING t.*),
archived AS (
  {{.Insert}})
SELECT count(*) FROM deleted
{{- end}}

{{/* OVERRIDING SYSTEM VALUE keeps the rows' own values in GENERATED ALWAYS identity columns. */}}
{{define "archive-insert"}}INSERT INTO {{.Archive}} ({{.Columns}}) OVERRIDING SYSTEM VALUE {{.Rows}}{{end}}
