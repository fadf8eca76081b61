{{/*
  A batch statement: its DELETE, then what goes along with it. It answers the rows deleted, the
  newest age among them (where an index-path batch resumes), and the rows each delete_with child
  lost with them.
*/}}
{{define "batch" -}}
WITH deleted AS (
  {{template "delete" .}}
  RETURNING t.{{.Age}} AS age{{template "children-returning" .}}){{template "children" .}}
SELECT count(*), max(age){{template "children-answer" .}} FROM deleted
{{- end}}

{{/* A batch's DELETE, by its form's shape: the heap path's, a range of ages, or by rows. */}}
{{define "delete" -}}
{{if .Heap}}{{template "heap-delete" .}}{{else if .Range}}{{template "index-range-delete" .}}{{else}}{{template "index-delete" .}}{{end}}
{{- end}}

{{/*
  An index-path batch by rows, where more than a batch of rows share the age a range would start
  at (a range would be empty): at most a batch of rows, the oldest first, picked by ctid from the
  age index, the predicate standing on the delete target too (a row changed under us is
  re-checked after the wait and kept if it no longer qualifies). After resumes it at the age the
  batch starts at; Lock picks FOR UPDATE SKIP LOCKED, skipping held rows.
*/}}
{{define "index-delete" -}}
DELETE FROM {{.Table}} AS t
   WHERE t.ctid = ANY (ARRAY(
           SELECT t.ctid FROM {{.Table}} AS t WHERE {{.Predicate}}{{if .After}} AND t.{{.Age}} >= {{.Param "after"}}{{end}} ORDER BY t.{{.Age}} LIMIT {{.Param "limit"}}{{template "locking" .}}))
     AND {{.Predicate}}
{{- end}}

{{/*
  An index-path batch over a range of ages, or from an age on for the last range (Bounded
  false): the range's end is the age a batch of rows past its start (index-bound), so it holds at
  most a batch of the pass's rows. The planner sees both ends, and reads the range through a
  bitmap of the age index, in heap order: each page once, where the batch deletes its rows.
  Lock and Capped (at most what max_rows leaves: rows that reach the range between its bound and
  its delete are left to the next run) pick first and delete what they picked.
*/}}
{{define "index-range-delete" -}}
{{if or .Lock .Capped -}}
DELETE FROM {{.Table}} AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM {{.Table}} AS t WHERE {{template "ages" .}} AND {{.Predicate}}{{template "cap" .}}{{template "locking" .}}))
     AND {{.Predicate}}
{{- else -}}
DELETE FROM {{.Table}} AS t WHERE {{template "ages" .}} AND {{.Predicate}}
{{- end}}
{{- end}}

{{define "ages"}}t.{{.Age}} >= {{.Param "from"}}{{if .Bounded}} AND t.{{.Age}} < {{.Param "before"}}{{end}}{{end}}

{{/*
  Where an index-path batch's range of ages ends: the age a batch of rows past its start, read
  from the age index alone (the pass's own condition, without its keep guards, which can only
  keep more rows), NULL when fewer are left. The first batch's start is the oldest eligible age;
  a resumed batch starts where the previous one ended.
*/}}
{{define "index-bound" -}}
{{if .After -}}
SELECT (SELECT t.{{.Age}} FROM {{.Table}} AS t WHERE {{.OwnPredicate}} AND t.{{.Age}} >= {{.Param "resume"}} ORDER BY t.{{.Age}} OFFSET {{.Param "limit"}} LIMIT 1)
{{- else -}}
SELECT (SELECT t.{{.Age}} FROM {{.Table}} AS t WHERE {{.OwnPredicate}} ORDER BY t.{{.Age}} LIMIT 1),
       (SELECT t.{{.Age}} FROM {{.Table}} AS t WHERE {{.OwnPredicate}} ORDER BY t.{{.Age}} OFFSET {{.Param "limit"}} LIMIT 1)
{{- end}}
{{- end}}

{{/*
  A heap-path batch over a range of blocks, [first, end): plain comparisons on ctid, which
  PostgreSQL 14 and later plan as a TID Range Scan. Its plain form is the range and the
  predicate alone; Lock and Capped (at most what max_rows leaves) pick first and delete what
  they picked.
*/}}
{{define "heap-delete" -}}
{{if or .Lock .Capped -}}
DELETE FROM {{.Table}} AS t
   WHERE t.ctid = ANY (ARRAY(SELECT t.ctid FROM {{.Table}} AS t WHERE {{template "blocks" .}} AND {{.Predicate}}{{template "cap" .}}{{template "locking" .}}))
     AND {{.Predicate}}
{{- else -}}
DELETE FROM {{.Table}} AS t WHERE {{template "blocks" .}} AND {{.Predicate}}
{{- end}}
{{- end}}

{{define "blocks"}}t.ctid >= {{.Param "first-block"}} AND t.ctid < {{.Param "end-block"}}{{end}}

{{define "cap"}}{{if .Capped}} LIMIT {{.Param "left"}}{{end}}{{end}}

{{define "locking"}}{{if .Lock}} FOR UPDATE SKIP LOCKED{{end}}{{end}}

{{/*
  delete_with: the parent delete returns the columns the children reference, and each child is
  a data-modifying CTE deleting the rows that hold one of them, keyed on the parents actually
  deleted. c.<column> = ANY (ARRAY(…)) is an index scan on the child column, where an IN over
  the CTE could be planned as a hash join reading the whole child table. A key of several
  columns is an EXISTS over the deleted rows, matched as one row value: a semi-join that looks
  each deleted key up in the child's index on those columns.
*/}}
{{define "children-returning"}}{{range .Children}}{{range .Pairs}}, t.{{.Reference}} AS {{.As}}{{end}}{{end}}{{end}}

{{define "children"}}{{range .Children}},
c{{.I}} AS (
  DELETE FROM {{.Table}} AS c WHERE {{template "child-match" .Pairs}}
  RETURNING 1){{end}}{{end}}

{{define "child-match" -}}
{{if eq (len .) 1}}{{with index . 0}}c.{{.Column}} = ANY (ARRAY(SELECT {{.As}} FROM deleted)){{end}}
{{- else}}EXISTS (SELECT 1 FROM deleted AS d WHERE ({{range $i, $p := .}}{{if $i}}, {{end}}c.{{$p.Column}}{{end}}) = ({{range $i, $p := .}}{{if $i}}, {{end}}d.{{$p.As}}{{end}}))
{{- end}}
{{- end}}

{{define "children-answer"}}{{range .Children}}, (SELECT count(*) FROM c{{.I}}){{end}}{{end}}
