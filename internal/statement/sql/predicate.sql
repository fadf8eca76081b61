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
  retention in wall-clock arithmetic, and for a date that reading's date. A number of Unix time
  (age_unit) is compared with the cutoff in its unit.
*/}}
{{define "age-test"}}t.{{.Age}} < {{template "cutoff-value" .}}{{end}}

{{/* The cutoff as the age column compares with it: the right side of the age test. */}}
{{define "cutoff-value" -}}
{{if .PerSecond}}{{template "epoch-cutoff" .PerSecond}}
{{- else if eq .Kind "timestamptz"}}{{cutoff}}::timestamptz
{{- else}}((({{cutoff}}::timestamptz + {{.Interval}}) AT TIME ZONE {{.Zone}}) - {{.Interval}}){{if eq .Kind "date"}}::date{{end}}
{{- end}}
{{- end}}

{{/*
  The cutoff instant as a number of Unix time, in the age column's unit (. is the units per
  second): rounded down, so a row is eligible when its age is a whole unit before the cutoff.
  An integer, which an index on an integer column serves as it serves a bound parameter.
*/}}
{{define "epoch-cutoff"}}floor(extract(epoch FROM {{cutoff}}::timestamptz){{if ne . 1}} * {{.}}{{end}})::bigint{{end}}

{{/* A keep guard: no row of its table, aliased g, references the row (and satisfies its where). */}}
{{define "guard" -}}
NOT EXISTS (SELECT 1 FROM {{.Table}} AS g WHERE {{template "guard-match" .Pairs}}{{if .Where}} AND ({{.Where}}){{end}})
{{- end}}

{{/*
  The guard's reference: one column compared, or a key of several as one row value, which the
  planner splits into ANDed equalities that an index on the guard's columns serves together.
*/}}
{{define "guard-match" -}}
{{if eq (len .) 1}}{{with index . 0}}g.{{.Column}} = t.{{.Reference}}{{end}}
{{- else}}({{range $i, $p := .}}{{if $i}}, {{end}}g.{{$p.Column}}{{end}}) = ({{range $i, $p := .}}{{if $i}}, {{end}}t.{{$p.Reference}}{{end}})
{{- end}}
{{- end}}
