{{/*
  The reads of a pass, which delete nothing: the dry run's exact count (with each delete_with
  child's rows that would go, in one snapshot), and the selects the planner is asked about.
*/}}
{{define "count" -}}
{{if .Children -}}
WITH p AS MATERIALIZED (SELECT {{range $i, $c := .Children}}{{range $j, $p := $c.Pairs}}{{if or $i $j}}, {{end}}t.{{$p.Reference}} AS {{$p.As}}{{end}}{{end}} FROM {{.Table}} AS t WHERE {{.Predicate}})
SELECT (SELECT count(*) FROM p){{range .Children}}, (SELECT count(*) FROM {{.Table}} AS c WHERE {{template "child-in" .Pairs}}){{end}}
{{- else -}}
SELECT count(*) FROM {{.Table}} AS t WHERE {{.Predicate}}
{{- end}}
{{- end}}

{{/* The child rows the count's p holds a key of: one column, or a key of several as a row value. */}}
{{define "child-in" -}}
{{if eq (len .) 1}}{{with index . 0}}c.{{.Column}} IN (SELECT {{.As}} FROM p){{end}}
{{- else}}({{range $i, $p := .}}{{if $i}}, {{end}}c.{{$p.Column}}{{end}}) IN (SELECT {{range $i, $p := .}}{{if $i}}, {{end}}{{$p.As}}{{end}} FROM p)
{{- end}}
{{- end}}

{{/*
  What the index verdict plans: the pass's own read without its keep guards (their lookups are
  judged from the catalog). A single-mode pass reads every eligible row at once, in no order.
*/}}
{{define "probe" -}}
{{if .Single -}}
SELECT t.ctid FROM {{.Table}} AS t WHERE {{.OwnPredicate}} AND {{.Param "limit"}}::int > 0
{{- else -}}
SELECT t.ctid FROM {{.Table}} AS t WHERE {{.OwnPredicate}} ORDER BY t.{{.Age}} LIMIT {{.Param "limit"}}
{{- end}}
{{- end}}

{{/* The eligible rows and every row, as the planner estimates them: the eligible share. */}}
{{define "estimate"}}SELECT 1 FROM {{.Table}} AS t WHERE {{.Predicate}}{{end}}

{{define "total"}}SELECT 1 FROM {{.Table}} AS t{{end}}
