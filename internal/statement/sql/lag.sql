{{/*
  The retention lag: how many seconds past the cutoff the oldest row the pass would delete is,
  NULL when none is left. It walks the age index from its oldest entry and stops at the first
  row the whole predicate admits (keep guards included: a kept row is not overdue), so it reads
  one index entry and one heap page where the pass is bounded. Each kind measures the distance
  in its own arithmetic: an interval for a time, whole days for a date, units for Unix time.
*/}}
{{define "lag" -}}
SELECT (SELECT {{template "lag-seconds" .}} FROM {{.Table}} AS t WHERE {{.Predicate}} ORDER BY t.{{.Age}} LIMIT 1)
{{- end}}

{{define "lag-seconds" -}}
{{if .PerSecond}}(({{template "cutoff-value" .}}) - t.{{.Age}})::float8{{if ne .PerSecond 1}} / {{.PerSecond}}{{end}}
{{- else if eq .Kind "date"}}((({{template "cutoff-value" .}}) - t.{{.Age}}) * 86400)::float8
{{- else}}extract(epoch FROM {{template "cutoff-value" .}} - t.{{.Age}})::float8
{{- end}}
{{- end}}
