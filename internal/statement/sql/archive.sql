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
{{.Delete}}
  RETURNING t.*),
archived AS (
  {{.Insert}}
  RETURNING 1)
SELECT count(*), max(deleted.{{.Age}}), (SELECT count(*) FROM archived) FROM deleted
{{- end}}

{{define "archive-single" -}}
WITH deleted AS (
  DELETE FROM {{.Table}} AS t WHERE {{.Predicate}}
  RETURNING t.*),
archived AS (
  {{.Insert}}
  RETURNING 1)
SELECT count(*), (SELECT count(*) FROM archived) FROM deleted
{{- end}}

{{/* OVERRIDING SYSTEM VALUE keeps the rows' own values in GENERATED ALWAYS identity columns. */}}
{{define "archive-insert"}}INSERT INTO {{.Archive}} ({{.Columns}}) OVERRIDING SYSTEM VALUE {{.Rows}}{{end}}
