{{/*
  The eligibility condition of a pass, over alias t; $1 is the cutoff, bound as a timestamptz.
  A row is eligible when the pass's own where holds, its age is past the cutoff, and no keep
  guard's table still references it. Every part is one boolean expression, ANDed.
*/}}

{{define "predicate" -}}
{{if .Where}}({{.Where}}) AND {{end}}{{template "age-test" .}}
{{- range .Guards}} AND {{template "guard" .}}{{end}}
{{- end}}

{{/* The pass's own condition without its keep guards: what the index verdict plans. */}}
{{define "own-predicate" -}}
{{if .Where}}({{.Where}}) AND {{end}}{{template "age-test" .}}
{{- end}}

{{/*
  The age test. A timestamptz column is compared with the cutoff instant. A timestamp or a date
  holds a wall-clock reading or a calendar day in the pass's time zone: the cutoff is then the
  reference time ($1 + retention, exact: the interval holds no days) read in that zone, minus the
  retention in wall-clock arithmetic, and for a date that reading's date.
*/}}
{{define "age-test" -}}
t.{{.Age}} < {{if eq .Kind "timestamptz"}}$1::timestamptz
{{- else}}((($1::timestamptz + {{.Interval}}) AT TIME ZONE {{.Zone}}) - {{.Interval}}){{if eq .Kind "date"}}::date{{end}}
{{- end}}
{{- end}}

{{/* A keep guard: no row of its table, aliased g, references the row (and satisfies its where). */}}
{{define "guard" -}}
NOT EXISTS (SELECT 1 FROM {{.Table}} AS g WHERE g.{{.Column}} = t.{{.References}}{{if .Where}} AND ({{.Where}}){{end}})
{{- end}}
