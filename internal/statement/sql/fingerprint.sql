{{/*
  A pass's fingerprint: the catalog facts its proof rests on, one line each, and the md5 of them
  sorted. The tables are the pass's as its statements name them; a name that resolves to nothing
  is a fact too. Keys are read from and onto those tables, whatever schema holds the other end,
  so a key a migration adds from a table no policy names changes it. One read, no lock taken.
*/}}
{{define "fingerprint" -}}
WITH rel AS (
  SELECT x.name, c.oid, c.relkind
  FROM unnest({{.Param "tables"}}::text[]) AS x(name)
  LEFT JOIN pg_class c ON c.oid = to_regclass(x.name)
), fact(f) AS (
{{template "fingerprint-tables" .}}
  UNION ALL
{{template "fingerprint-columns" .}}
  UNION ALL
{{template "fingerprint-keys" .}}
  UNION ALL
{{template "fingerprint-triggers" .}}
  UNION ALL
{{template "fingerprint-rules" .}}
  UNION ALL
{{template "fingerprint-indexes" .}}
)
SELECT md5(coalesce(string_agg(f, E'\n' ORDER BY f COLLATE "C"), '')),
       coalesce(array_agg(f ORDER BY f COLLATE "C"), '{}')
FROM (SELECT DISTINCT f FROM fact) AS d
{{- end}}

{{define "fingerprint-tables" -}}
  SELECT format('table %s: %s', r.name, CASE WHEN r.oid IS NULL THEN 'missing'
                ELSE format('%s (relkind %s)%s', r.oid::regclass, r.relkind,
                            (SELECT ' options ' || array_to_string(ft.ftoptions, ', ') FROM pg_foreign_table ft WHERE ft.ftrelid = r.oid)) END)
  FROM rel r
{{- end}}

{{define "fingerprint-columns" -}}
  SELECT format('column %s.%I: %s%s', a.attrelid::regclass, a.attname, format_type(a.atttypid, a.atttypmod),
                CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END)
  FROM pg_attribute a JOIN rel r ON r.oid = a.attrelid
  WHERE a.attnum > 0 AND NOT a.attisdropped
{{- end}}

{{define "fingerprint-keys" -}}
  SELECT format('foreign key %I on %s: %s', k.conname, k.conrelid::regclass, pg_get_constraintdef(k.oid))
  FROM pg_constraint k
  WHERE k.contype = 'f' AND k.conparentid = 0
    AND (k.conrelid IN (SELECT oid FROM rel) OR k.confrelid IN (SELECT oid FROM rel))
{{- end}}

{{define "fingerprint-triggers" -}}
  SELECT format('trigger %I on %s: %s (enabled %s)', t.tgname, t.tgrelid::regclass, pg_get_triggerdef(t.oid), t.tgenabled)
  FROM pg_trigger t JOIN rel r ON r.oid = t.tgrelid
  WHERE NOT t.tgisinternal
{{- end}}

{{define "fingerprint-rules" -}}
  SELECT format('rule %I on %s: %s', w.rulename, w.ev_class::regclass, pg_get_ruledef(w.oid))
  FROM pg_rewrite w JOIN rel r ON r.oid = w.ev_class
  WHERE w.rulename <> '_RETURN'
{{- end}}

{{define "fingerprint-indexes" -}}
  SELECT format('index %s: %s%s', i.indexrelid::regclass, pg_get_indexdef(i.indexrelid),
                CASE WHEN i.indisvalid AND i.indisready THEN '' ELSE ' (not valid)' END)
  FROM pg_index i JOIN rel r ON r.oid = i.indrelid
{{- end}}
