{{/*
  What the schema's own ON DELETE keys change (statement/cascade.go). The dry run counts it in
  one snapshot: p is the eligible rows, each other node a table the statement or a CASCADE
  deletes from (its rows referencing a deleted row of a node before it, by any of its keys), in
  an order where every node comes after the nodes it references. Each node carries only the
  columns the keys onto it point at.
*/}}
{{define "cascade-count" -}}
WITH p AS MATERIALIZED (SELECT {{.Root.Columns}} FROM {{.Table}} AS t WHERE {{.Predicate}}){{range .Nodes}},
{{.Name}} AS MATERIALIZED (SELECT {{.Columns}} FROM {{.Table}} AS x WHERE {{template "cascade-matches" .Matches}}){{end}}
SELECT {{range $i, $a := .Answers}}{{if $i}},
       {{end}}{{template "cascade-answer" $a}}{{end}}
{{- end}}

{{/* The rows of x that reference a deleted row of a node, by any of its keys onto it. */}}
{{define "cascade-matches"}}{{range $i, $m := .}}{{if $i}} OR {{end}}({{$m.Columns}}) IN (SELECT {{$m.Refs}} FROM {{$m.From}}){{end}}{{end}}

{{/* One number of the answer: a node's rows (less a delete_with child's own), a table's matching rows, or 0. */}}
{{define "cascade-answer" -}}
{{if .Node}}(SELECT count(*) FROM {{.Node}}){{with .Less}} - {{template "cascade-rows" .}}{{end}}
{{- else if .Rows}}{{template "cascade-rows" .Rows}}
{{- else}}0{{end}}
{{- end}}

{{define "cascade-rows"}}(SELECT count(*) FROM {{.Table}} AS x WHERE {{template "cascade-matches" .Matches}}){{end}}

{{/*
  What a batch's transaction lost, per table of the pass's cascades, from its own statistics:
  tuples deleted and updated in this transaction so far, summed over the table's leaf
  partitions ($2 numbers the table each oid of $1 belongs to). Read before and after the batch
  statement, on the same transaction: the difference is what the statement and the keys it fired
  did, with no second scan of anything.
*/}}
{{define "cascade-stats" -}}
SELECT coalesce(array_agg(s.deleted ORDER BY s.i), '{}'), coalesce(array_agg(s.updated ORDER BY s.i), '{}')
FROM (SELECT x.i, sum(pg_stat_get_xact_tuples_deleted(x.o))::bigint AS deleted, sum(pg_stat_get_xact_tuples_updated(x.o))::bigint AS updated
      FROM unnest($1::oid[], $2::int[]) AS x(o, i) GROUP BY x.i) AS s
{{- end}}
