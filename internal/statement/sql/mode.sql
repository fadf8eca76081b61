{{/* Mode single: every eligible row in one statement, answering how many (and their children). */}}
{{define "single" -}}
WITH deleted AS (
  DELETE FROM {{.Table}} AS t WHERE {{.Predicate}}
  RETURNING 1 AS one{{template "children-returning" .}}){{template "children" .}}
SELECT count(*){{template "children-answer" .}} FROM deleted
{{- end}}

{{/* Mode per-row: lock one eligible key, skipping keys another run holds, and call the function on it. */}}
{{define "per-row" -}}
SELECT {{.Function}}(k.key) FROM (
  SELECT t.{{.RowKey}} AS key FROM {{.Table}} AS t WHERE {{.Predicate}} ORDER BY t.{{.Age}} LIMIT 1 FOR UPDATE OF t SKIP LOCKED
) AS k
{{- end}}
