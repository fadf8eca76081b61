package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// catalogLiteral is the Go literal that Catalog() returned before the catalog became
// catalog.yaml. It pins the bundled sweeps: an edit of catalog.yaml that changes what is deleted
// must change this too, on purpose.
func catalogLiteral() []Spec {
	return []Spec{
		{Name: "email-messages", Passes: []Pass{
			{Name: "sent", Table: "email_messages", AgeColumn: "sent_at", Where: "t.status = 'sent'", Retention: 7 * day},
			{Name: "failed", Table: "email_messages", AgeColumn: "created_at", Where: "t.status = 'failed'", Retention: 90 * day},
		}},
		{Name: "webhook-deliveries", Passes: []Pass{
			{Name: "finished", Table: "webhook_deliveries", AgeColumn: "created_at", Where: "t.status IN ('success', 'dead_letter')", Retention: 30 * day},
		}},
		{Name: "audit-log", Passes: []Pass{
			{Name: "operational", Table: "audit_log", AgeColumn: "occurred_at", Where: "t.retention_bucket = 'operational'", Retention: 90 * day},
			{Name: "compliance", Table: "audit_log", AgeColumn: "occurred_at", Where: "t.retention_bucket = 'compliance'", Retention: 365 * day, MinRetention: 365 * day},
		}},
		{Name: "outbox", Passes: []Pass{
			{Name: "dispatched", Table: "outbox_events", AgeColumn: "dispatched_at", Where: "t.dispatched_at IS NOT NULL", Retention: 7 * day,
				Guards: []Guard{{Table: "webhook_deliveries", Columns: []string{"outbox_event_id"}, References: []string{"id"}}}},
		}},
		{Name: "consents", Passes: []Pass{
			{Name: "orphaned", Table: "consent_records", AgeColumn: "expires_at", Where: "t.user_id IS NULL", Retention: 365 * day},
		}},
		{Name: "notifications", Passes: []Pass{
			{Name: "read", Table: "notifications", AgeColumn: "read_at", Where: "t.read_at IS NOT NULL", Retention: 30 * day},
		}},
		{Name: "refresh-tokens", Passes: []Pass{
			{Name: "expired", Table: "refresh_tokens", AgeColumn: "expires_at", Retention: day},
		}},
		{Name: "idempotency-records", Passes: []Pass{
			{Name: "completed", Table: "idempotency_records", AgeColumn: "completed_at", Where: "t.status = 'completed'", Retention: 48 * time.Hour},
			{Name: "abandoned", Table: "idempotency_records", AgeColumn: "created_at", Where: "t.status = 'in_progress' AND t.lease_expires_at < now()",
				Retention: 48 * time.Hour, Mode: ModeSingle},
		}},
		{Name: "account-erasure", Passes: []Pass{
			{Name: "requested", Table: "accounts", AgeColumn: "deletion_requested_at", Where: "t.deleted_at IS NULL", Retention: 30 * day,
				Mode: ModePerRow, Function: "wipe_account", KeyColumn: "id"},
		}},
	}
}

func TestCatalogFile(t *testing.T) {
	t.Parallel()
	t.Run("equals the Go literal it replaced", func(t *testing.T) {
		want := catalogLiteral()
		// The literal left batched passes' mode empty; the policy spells the default out.
		for i := range want {
			for j := range want[i].Passes {
				if want[i].Passes[j].Mode == "" {
					want[i].Passes[j].Mode = ModeBatched
				}
				want[i].Passes[j].TimeZone = TimeZoneUTC
			}
		}
		pol, err := Load(DefaultFile, catalogYAML)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(pol.Specs, want) {
			t.Errorf("catalog.yaml parses to\n%+v\nwant\n%+v", pol.Specs, want)
		}
		if !reflect.DeepEqual(Catalog(), want) {
			t.Error("Catalog() is not the parsed catalog.yaml")
		}
	})
	t.Run("each call returns a fresh copy", func(t *testing.T) {
		a := Catalog()
		a[0].Passes[0].Retention = time.Hour
		if Catalog()[0].Passes[0].Retention == time.Hour {
			t.Fatal("a caller's change to Catalog() leaked into the next call")
		}
	})
	t.Run("a broken embedded file panics", func(t *testing.T) {
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(r.(string), "programming error") {
				t.Fatalf("recover() = %v, want a panic naming a programming error", r)
			}
		}()
		mustLoad(DefaultFile, []byte("sweeps: [\n"))
	})
}

// pass wraps pass-level YAML (indented for a pass) into a one-sweep policy; the pass's keys start
// on line 4.
func onePass(body string) string {
	return "sweeps:\n  - name: notes\n    passes:\n" + body
}

const goodPass = `      - name: read
        table: notifications
        age_column: read_at
        retention: 30d
`

func TestLoadPolicyRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		// want are substrings of the error, the first usually its location.
		want []string
	}{
		{"malformed YAML", "sweeps:\n  - name: [a\n", []string{`p.yaml:2: malformed YAML: did not find expected ',' or ']'`}},
		{"unclosed flow mapping", "sweeps: {\n", []string{"p.yaml:2: malformed YAML: did not find expected node content"}},
		{"mapping value in a scalar", "sweeps:\n  - name: a: b\n", []string{"p.yaml:2: malformed YAML: mapping values are not allowed in this context"}},
		{"unclosed quote", "sweeps:\n  - name: 'a\n", []string{"p.yaml:2: malformed YAML"}},
		{"tab indentation", "sweeps:\n\t- name: a\n", []string{"p.yaml:2: malformed YAML", "tab in the indentation"}},
		{"empty file", "", []string{"p.yaml: the policy is empty"}},
		{"only comments", "# nothing\n", []string{"p.yaml: the policy is empty"}},
		{"two documents", onePass(goodPass) + "---\nsweeps: []\n", []string{"p.yaml:8: a second YAML document"}},
		{"top level a list", "- a\n", []string{"p.yaml:1: the top level is a list"}},
		{"no sweeps key", "passes: []\n", []string{`p.yaml:1: unknown key "passes" in the top level; the keys are: sweeps`, "p.yaml:1: no sweeps: key"}},
		{"sweep for sweeps", "sweep: []\n", []string{`p.yaml:1: unknown key "sweep" in the top level (did you mean "sweeps"?)`}},
		{"empty sweeps", "sweeps: []\n", []string{"p.yaml:1: sweeps is empty"}},
		{"unknown key", onePass(goodPass + "        age_colum: read_at\n"), []string{
			`p.yaml:8: pass "read" of sweep "notes": unknown key "age_colum" in a pass (did you mean "age_column"?); the keys are: name, table,`}},
		{"camelCase key", onePass(strings.Replace(goodPass, "age_column", "ageColumn", 1)), []string{
			`p.yaml:6: pass "read" of sweep "notes": unknown key "ageColumn" in a pass (did you mean "age_column"?)`, "p.yaml:4", "age_column is required"}},
		{"unknown sweep key", "sweeps:\n  - name: notes\n    schedule: hourly\n    passes:\n" + goodPass, []string{`p.yaml:3: sweep "notes": unknown key "schedule" in a sweep`}},
		{"duplicate key", onePass(goodPass + "        retention: 60d\n"), []string{`p.yaml:8: pass "read" of sweep "notes": key "retention" is given twice in a pass (first at line 7)`}},
		{"anchor at the top level", "base: &b {table: x}\n" + onePass(goodPass), []string{`p.yaml:1: unknown key "base" in the top level`}},
		{"merge key", onePass(strings.Replace(goodPass, "        table: notifications\n", "        table: &t notifications\n", 1) +
			"      - <<: {table: notifications}\n        name: other\n        age_column: read_at\n        retention: 1d\n"),
			[]string{`p.yaml:8: pass "other" of sweep "notes": merge keys (<<) are not supported in a pass: write the keys out`}},
		{"alias to a value of the wrong type", onePass(strings.Replace(goodPass, "retention: 30d", "retention: 30d\n        keep_while_referenced_by: &g\n          - {table: x, column: y}", 1) +
			"      - name: other\n        table: *g\n        age_column: read_at\n        retention: 1d\n"),
			[]string{`p.yaml:8: pass "other" of sweep "notes": table is a list`}}, // the anchor's line
		{"retention below min_retention", onePass(goodPass + "        min_retention: 90d\n"), []string{
			`p.yaml:7: pass "read" of sweep "notes": retention 30d is below this pass's min_retention of 90d`}},
		{"min_retention malformed", onePass(goodPass + "        min_retention: a year\n"), []string{
			`p.yaml:8: pass "read" of sweep "notes": min_retention: `}},
		{"min_retention a list", onePass(goodPass + "        min_retention: [1d]\n"), []string{
			`p.yaml:8: pass "read" of sweep "notes": min_retention is a list`}},
		{"min_retention negative", onePass(goodPass + "        min_retention: -1h\n"), []string{
			`p.yaml:8: pass "read" of sweep "notes": min_retention -1h is negative`}},
		{"table a list", onePass(strings.Replace(goodPass, "table: notifications", "table: [notifications]", 1)), []string{`p.yaml:5: pass "read" of sweep "notes": table is a list: want a string`}},
		{"name a number", "sweeps:\n  - name: 2024\n    passes:\n" + goodPass, []string{`p.yaml:2: name is a number (2024): want a string (quote it`}},
		{"batch_size a string", onePass(goodPass + "        batch_size: \"500\"\n"), []string{`p.yaml:8: pass "read" of sweep "notes": batch_size is a string ("500"): want a whole number`}},
		{"allow_unindexed yes", onePass(goodPass + "        allow_unindexed: yes\n"), []string{`p.yaml:8: pass "read" of sweep "notes": allow_unindexed is a string ("yes"): want true or false`}},
		{"where empty", onePass(goodPass + "        where:\n"), []string{`p.yaml:8: pass "read" of sweep "notes": where is empty: want a string`}},
		{"retention 0", onePass(strings.Replace(goodPass, "30d", "0", 1)), []string{`p.yaml:7: pass "read" of sweep "notes": retention 0 is below the floor of 1h: a zero window makes every row eligible`}},
		{"retention -1d", onePass(strings.Replace(goodPass, "30d", "-1d", 1)), []string{`p.yaml:7: pass "read" of sweep "notes": retention -1d is below the floor of 1h: a negative window`}},
		{"retention 5m", onePass(strings.Replace(goodPass, "30d", "5m", 1)), []string{`p.yaml:7: pass "read" of sweep "notes": retention 5m is below the floor of 1h: a window that short would delete live data; did you mean 5d?`}},
		{"retention without unit", onePass(strings.Replace(goodPass, "30d", "30", 1)), []string{`p.yaml:7: pass "read" of sweep "notes": retention: invalid duration "30": want whole days such as 30d`}},
		{"retention missing", onePass(strings.Replace(goodPass, "        retention: 30d\n", "", 1)), []string{`p.yaml:4: pass "read" of sweep "notes": retention is required`}},
		{"table missing", onePass(strings.Replace(goodPass, "        table: notifications\n", "", 1)), []string{`p.yaml:4: pass "read" of sweep "notes": table is required`}},
		{"duplicate sweep names", onePass(goodPass) + "  - name: notes\n    passes:\n" + goodPass, []string{`p.yaml:8: sweep "notes": the name is used twice (first at line 2)`}},
		{"duplicate pass names", onePass(goodPass + goodPass), []string{`p.yaml:8: pass "read" of sweep "notes": the name is used twice in this sweep (first at line 4)`}},
		{"sweep name not URL-safe", "sweeps:\n  - name: Old/Notes\n    passes:\n" + goodPass, []string{`p.yaml:2: sweep "Old/Notes": the name must be lower-case letters, digits and single dashes`, "POST /internal/sweep-<name>"}},
		{"sweep name with underscore", "sweeps:\n  - name: old_notes\n    passes:\n" + goodPass, []string{`p.yaml:2: sweep "old_notes": the name must be`}},
		{"pass name not URL-safe", onePass(strings.Replace(goodPass, "name: read", "name: Read Ones", 1)), []string{`p.yaml:4: pass "Read Ones" of sweep "notes": the name must be`}},
		{"no passes", "sweeps:\n  - name: notes\n", []string{`p.yaml:2: sweep "notes": no passes: key`}},
		{"unknown mode", onePass(goodPass + "        mode: bulk\n"), []string{`p.yaml:8: pass "read" of sweep "notes": unknown mode "bulk": want batched (the default), single, per-row or partitions`}},
		{"per-row without function", onePass(goodPass + "        mode: per-row\n"), []string{`p.yaml:8: pass "read" of sweep "notes": mode per-row needs a function`}},
		{"function without per-row", onePass(goodPass + "        function: wipe\n"), []string{`p.yaml:8: pass "read" of sweep "notes": function is only for mode per-row (this pass is batched)`}},
		{"key_column without per-row", onePass(goodPass + "        key_column: id\n"), []string{`p.yaml:8: pass "read" of sweep "notes": key_column is only for mode per-row`}},
		{"batch_size in single", onePass(goodPass + "        mode: single\n        batch_size: 10\n"), []string{`p.yaml:9: pass "read" of sweep "notes": batch_size has no effect in mode single`}},
		{"max_batches in single", onePass(goodPass + "        mode: single\n        max_batches: 10\n"), []string{`p.yaml:9: pass "read" of sweep "notes": max_batches has no effect in mode single`}},
		{"batch_size 0", onePass(goodPass + "        batch_size: 0\n"), []string{`p.yaml:8: pass "read" of sweep "notes": batch_size 0 is out of range: want 1 to 50000`}},
		{"batch_size too large", onePass(goodPass + "        batch_size: 100000\n"), []string{`batch_size 100000 is out of range`}},
		{"max_batches 0", onePass(goodPass + "        max_batches: 0\n"), []string{`p.yaml:8: pass "read" of sweep "notes": max_batches 0 must be at least 1`}},
		{"table with three parts", onePass(strings.Replace(goodPass, "table: notifications", "table: db.app.notifications", 1)), []string{`p.yaml:5: pass "read" of sweep "notes": table "db.app.notifications": want name or schema.name`}},
		{"table quoted", onePass(strings.Replace(goodPass, "table: notifications", `table: '"Notifications"'`, 1)), []string{`p.yaml:5: pass "read" of sweep "notes": table "\"Notifications\"": write the name without quotes`}},
		{"table with a newline", onePass(strings.Replace(goodPass, "table: notifications", `table: "notifications\nCREATE TABLE pwned();--"`, 1)),
			[]string{`p.yaml:5: pass "read" of sweep "notes": table "notifications\nCREATE TABLE pwned();--": the name holds a control character`, "rename the object"}},
		{"age column with a tab", onePass(strings.Replace(goodPass, "age_column: read_at", `age_column: "read\tat"`, 1)),
			[]string{`p.yaml:6: pass "read" of sweep "notes": age_column "read\tat": the name holds a control character`}},
		{"archive_schema with an escape", onePass(goodPass + "        mode: partitions\n        archive_schema: \"old\\x1b\"\n"),
			[]string{`pass "read" of sweep "notes": archive_schema`, "control character"}},
		{"age column qualified", onePass(strings.Replace(goodPass, "age_column: read_at", "age_column: t.read_at", 1)), []string{`p.yaml:6: pass "read" of sweep "notes": age_column "t.read_at": name the column alone`}},
		{"guards not a list", onePass(goodPass + "        keep_while_referenced_by: webhook_deliveries\n"), []string{`p.yaml:8: pass "read" of sweep "notes": keep_while_referenced_by is a string ("webhook_deliveries"): want a list`}},
		{"guard without column", onePass(goodPass + "        keep_while_referenced_by:\n          - table: x\n"), []string{`p.yaml:9: pass "read" of sweep "notes": column is required`}},
		{"guard unknown key", onePass(goodPass + "        keep_while_referenced_by:\n          - table: x\n            column: y\n            on: z\n"), []string{`p.yaml:11: pass "read" of sweep "notes": unknown key "on" in a keep guard`}},
		{"where ends the statement", onePass(goodPass + "        where: true; DROP TABLE x\n"), []string{`p.yaml:8: pass "read" of sweep "notes": where: ';' is refused: a condition cannot end our statement`}},
		{"where escapes its parentheses", onePass(goodPass + "        where: true) OR (true\n"), []string{`p.yaml:8: pass "read" of sweep "notes": where: a ')' closes a parenthesis the condition did not open`, "widen the delete"}},
		{"where with a line comment", onePass(goodPass + "        where: t.kind = 'x' --\n"), []string{`p.yaml:8: pass "read" of sweep "notes": where: comments (-- and /*) are refused`}},
		{"where with a block comment", onePass(goodPass + "        where: t.kind = 'x' /* hi */\n"), []string{`where: comments (-- and /*) are refused`}},
		{"where with dollar quoting", onePass(goodPass + "        where: t.kind = $$x$$\n"), []string{`p.yaml:8: pass "read" of sweep "notes": where: '$' is refused outside quotes`}},
		{"where with a parameter", onePass(goodPass + "        where: t.read_at < $2\n"), []string{`where: '$' is refused outside quotes`}},
		{"where with an open string", onePass(goodPass + "        where: t.kind = 'x\n"), []string{`p.yaml:8: pass "read" of sweep "notes": where: a string literal is not closed`}},
		{"where with an open parenthesis", onePass(goodPass + "        where: (t.kind = 'x'\n"), []string{`where: 1 '(' not closed`}},
		{"where with a backslash in a plain string", onePass(goodPass + "        where: t.kind = 'a\\'\n"), []string{`where: a backslash in a plain '…' string`}},
		{"guard where ends the statement", onePass(goodPass + "        keep_while_referenced_by:\n          - table: x\n            column: y\n            where: true; DROP TABLE x\n"),
			[]string{`p.yaml:11: pass "read" of sweep "notes": keep guard where: ';' is refused`}},
		{"guard where with a parameter", onePass(goodPass + "        keep_while_referenced_by:\n          - {table: x, column: y, where: g.at < $1}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": keep guard where: '$' is refused outside quotes`, "write :cutoff for the cutoff"}},
		{"guard where empty", onePass(goodPass + "        keep_while_referenced_by:\n          - {table: x, column: y, where: ''}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": where is an empty string`}},
		{"cascades not a list", onePass(goodPass + "        cascades: x\n"), []string{`p.yaml:8: pass "read" of sweep "notes": cascades is a string ("x"): want a list of table names`}},
		{"cascades entry not a name", onePass(goodPass + "        cascades:\n          - {table: x}\n"), []string{`p.yaml:9: pass "read" of sweep "notes": a cascades entry is a mapping: want a table name`}},
		{"cascades twice", onePass(goodPass + "        cascades: [x, y, x]\n"), []string{`p.yaml:8: pass "read" of sweep "notes": cascades names x twice (entries 1 and 3): keep one`}},
		{"cascades per-row", onePass(goodPass + "        mode: per-row\n        function: f\n        cascades: [x]\n"),
			[]string{`cascades is for modes batched and single: in mode per-row the function deletes`}},
		{"delete_with not a list", onePass(goodPass + "        delete_with: x\n"), []string{`p.yaml:8: pass "read" of sweep "notes": delete_with is a string ("x"): want a list of {table, column, references, without_foreign_key}`}},
		{"delete_with without column", onePass(goodPass + "        delete_with:\n          - table: x\n"), []string{`p.yaml:9: pass "read" of sweep "notes": column is required`}},
		{"delete_with with a where", onePass(goodPass + "        delete_with:\n          - {table: x, column: y, where: 'true'}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": unknown key "where" in a delete_with child; the keys are: table, column, references`}},
		{"delete_with qualified column", onePass(goodPass + "        delete_with:\n          - {table: x, column: x.y}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": delete_with column "x.y": name the column alone`}},
		{"delete_with twice", onePass(goodPass + "        delete_with:\n          - {table: x, column: y}\n          - {table: x, column: y, references: id}\n"),
			[]string{`p.yaml:10: pass "read" of sweep "notes": delete_with names x.y twice (entries 1 and 2): keep one`}},
		{"column a number", onePass(goodPass + "        delete_with:\n          - {table: x, column: 7}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": column is a number (7): want a string`}},
		{"column a mapping", onePass(goodPass + "        delete_with:\n          - {table: x, column: {a: b}}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": column is a mapping: want a column name, or a list of them for a key of several columns`}},
		{"column an empty list", onePass(goodPass + "        keep_while_referenced_by:\n          - {table: x, column: []}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": column is an empty list: want a column name, or a list of them`}},
		{"column list of a number", onePass(goodPass + "        delete_with:\n          - {table: x, column: [a, 3]}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": an entry of column is a number (3): want a column name`}},
		{"lists of unequal length", onePass(goodPass + "        delete_with:\n          - {table: x, column: [a, b], references: [origin]}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": delete_with names 2 columns (a, b) and 1 references (origin): want one reference per column, in the same order`}},
		{"several columns, references left out", onePass(goodPass + "        keep_while_referenced_by:\n          - {table: x, column: [a, b]}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": keep guard names 2 columns (a, b) and 1 references (id): want one reference per column`}},
		{"a column twice", onePass(goodPass + "        delete_with:\n          - {table: x, column: [a, a], references: [o, id]}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": delete_with names column "a" twice`}},
		{"a reference twice", onePass(goodPass + "        keep_while_referenced_by:\n          - {table: x, column: [a, b], references: [id, id]}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": keep guard references column "id" twice`}},
		{"without_foreign_key a string", onePass(goodPass + "        delete_with:\n          - {table: x, column: y, without_foreign_key: 'yes'}\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": without_foreign_key is a string ("yes"): want true or false`}},
		{"two-column delete_with under its guard, reordered", onePass(goodPass + "        keep_while_referenced_by:\n          - {table: x, column: [a, b], references: [o, id]}\n        delete_with:\n          - {table: x, column: [b, a], references: [id, o]}\n"),
			[]string{`p.yaml:11: pass "read" of sweep "notes": keep guard 1 keeps every row that x.(b, a) references`}},
		{"delete_with under an unconditional guard", onePass(goodPass + "        keep_while_referenced_by:\n          - {table: x, column: y}\n        delete_with:\n          - {table: x, column: y}\n"),
			[]string{`p.yaml:11: pass "read" of sweep "notes": keep guard 1 keeps every row that x.y references, so delete_with would never delete one of its children`}},
		{"delete_with in per-row", onePass(goodPass + "        mode: per-row\n        function: f\n        delete_with:\n          - {table: x, column: y}\n"),
			[]string{`p.yaml:11: pass "read" of sweep "notes": delete_with has no effect in mode per-row`}},
		{"max_rows in per-row", onePass(goodPass + "        mode: per-row\n        function: f\n        max_rows: 5\n"),
			[]string{`p.yaml:10: pass "read" of sweep "notes": max_rows has no effect in mode per-row (one row per call): cap the calls with max_batches`}},
		{"expiry a string", onePass(goodPass + "        expiry: \"yes\"\n"), []string{`p.yaml:8: pass "read" of sweep "notes": expiry is a string ("yes"): want true or false`}},
		{"time_zone a number", onePass(goodPass + "        time_zone: 14\n"), []string{`p.yaml:8: pass "read" of sweep "notes": time_zone is a number (14): want a string`}},
		{"time_zone with a quote", onePass(goodPass + "        time_zone: \"UTC'\"\n"), []string{`p.yaml:8: pass "read" of sweep "notes": time_zone "UTC'" is no zone name`}},
		{"delete_with in partitions", onePass(goodPass + "        mode: partitions\n        delete_with:\n          - {table: x, column: y}\n"),
			[]string{`p.yaml:10: pass "read" of sweep "notes": delete_with is not for mode partitions`}},
		{"time_zone in partitions", onePass(goodPass + "        mode: partitions\n        time_zone: database\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": time_zone is not for mode partitions`}},
		{"max_rows in partitions", onePass(goodPass + "        mode: partitions\n        max_rows: 10\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": max_rows is not for mode partitions`}},
		{"time_zone Database", onePass(goodPass + "        time_zone: Database\n"), []string{`p.yaml:8: pass "read" of sweep "notes": time_zone "Database": write database, in lower case`}},
		{"age_unit unknown", onePass(goodPass + "        age_unit: ms\n"), []string{`p.yaml:8: pass "read" of sweep "notes": age_unit "ms" is no unit: want seconds, milliseconds or microseconds`}},
		{"age_unit with a time_zone", onePass(goodPass + "        age_unit: seconds\n        time_zone: Europe/Paris\n"),
			[]string{`p.yaml:9: pass "read" of sweep "notes": time_zone has no effect with age_unit`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol, err := Load("p.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("accepted:\n%s\nspecs: %+v", tt.yaml, pol.Specs)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Errorf("error %T is no *Error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestLoadPolicyReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := Load("p.yaml", []byte(`sweeps:
  - name: Bad
    passes:
      - name: a
        table: t
        age_column: c
        retention: 5m
        colour: blue
  - name: bad
    passes:
      - name: b
        table: t
        age_column: c
        retention: 1d
        where: true) OR (true
`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{"p.yaml:2: sweep \"Bad\"", "p.yaml:7: pass \"a\"", "p.yaml:8: pass \"a\"", "p.yaml:15: pass \"b\" of sweep \"bad\""} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 4 {
		t.Errorf("%d problems reported, want 4:\n%v", n, err)
	}
}

func TestLoadPolicyAccepts(t *testing.T) {
	t.Parallel()
	pol, err := Load("p.yaml", []byte(`# every key once
sweeps:
  - name: expired-sessions
    passes:
      - name: expired
        table: app.sessions
        age_column: expires_at
        retention: 48h
        where: |
          t.kind IN ('web', 'api')
            AND t.note <> 'it''s; not -- a comment'
        keep_while_referenced_by:
          - table: app.session_events
            column: session_id
          - table: audit
            column: subject
            references: token
            where: g.kind = 'hold' AND g.at >= :cutoff
        batch_size: 500
        max_batches: 20
        allow_unindexed: false
        expiry: true
        time_zone: Europe/Paris
        max_rows: 10000
        delete_with:
          - table: app.session_tokens
            column: session_id
          - {table: app.session_marks, column: mark, references: token}
      - name: purge
        table: accounts
        age_column: deletion_requested_at
        retention: 30d
        mode: per-row
        function: app.purge_account
        key_column: account_id
        max_batches: 100
      - name: few
        table: claims
        age_column: created_at
        retention: 1h
        mode: single
        allow_unindexed: true
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Spec{{Name: "expired-sessions", Passes: []Pass{
		{Name: "expired", Table: "app.sessions", AgeColumn: "expires_at", Retention: 48 * time.Hour, Mode: ModeBatched, TimeZone: "Europe/Paris",
			Where: "t.kind IN ('web', 'api')\n  AND t.note <> 'it''s; not -- a comment'",
			Guards: []Guard{{Table: "app.session_events", Columns: []string{"session_id"}, References: []string{"id"}},
				{Table: "audit", Columns: []string{"subject"}, References: []string{"token"}, Where: "g.kind = 'hold' AND g.at >= :cutoff"}},
			BatchSize:  500,
			MaxBatches: 20,
			Expiry:     true, MaxRows: 10000,
			DeleteWith: []Child{{Table: "app.session_tokens", Columns: []string{"session_id"}, References: []string{"id"}}, {Table: "app.session_marks", Columns: []string{"mark"}, References: []string{"token"}}}},
		{Name: "purge", Table: "accounts", AgeColumn: "deletion_requested_at", Retention: 30 * day, Mode: ModePerRow, TimeZone: TimeZoneUTC,
			Function: "app.purge_account", KeyColumn: "account_id", MaxBatches: 100},
		{Name: "few", Table: "claims", AgeColumn: "created_at", Retention: time.Hour, Mode: ModeSingle, TimeZone: TimeZoneUTC, AllowUnindexed: true},
	}}}
	if !reflect.DeepEqual(pol.Specs, want) {
		t.Fatalf("specs =\n%+v\nwant\n%+v", pol.Specs, want)
	}
	for _, tt := range []struct {
		sweep, pass, field string
		line               int
	}{
		{"expired-sessions", "", "", 3},
		{"expired-sessions", "expired", "", 5},
		{"expired-sessions", "expired", "where", 9},
		{"expired-sessions", "expired", "guard.1.references", 17},
		{"expired-sessions", "expired", "guard.1.where", 18},
		{"expired-sessions", "expired", "time_zone", 23},
		{"expired-sessions", "expired", "delete_with.0.column", 27},
		{"expired-sessions", "expired", "delete_with.1", 28},
		{"expired-sessions", "purge", "function", 34},
		{"expired-sessions", "purge", "no-such-field", 29},
	} {
		if got := pol.Line(tt.sweep, tt.pass, tt.field); got != tt.line {
			t.Errorf("line(%s, %s, %s) = %d, want %d", tt.sweep, tt.pass, tt.field, got, tt.line)
		}
	}
}

func TestCheckCondition(t *testing.T) {
	t.Parallel()
	accept := []string{
		"t.status = 'sent'",
		"t.status = 'a;b' AND t.note = 'x -- y /* z'",
		"t.note = 'it''s' OR t.note = ')'",
		`t.note = E'it\'s )'`,
		`t.note = e'\\' AND (t.a OR t.b)`,
		`"odd;name""(" IS NULL`,
		"t.kind IN ('(', ')') AND (t.a = 1 OR (t.b = 2))",
		"t.at < now() - interval '1 day'",
		"t.price - 1 > 0",
		"t.a / 2 > 1",
		"type'x' = t.a", // the word type, then a plain string: E'…' only starts a word
		"t.a < :cutoff",
		"t.a::date < :cutoff::date",
	}
	for _, where := range accept {
		if problems := checkCondition(where); len(problems) > 0 {
			t.Errorf("checkCondition(%q) = %q, want none", where, problems)
		}
	}
	refuse := []struct{ where, want string }{
		{"", "empty"},
		{"true; DROP TABLE x", "';' is refused"},
		{"true) OR (true", "closes a parenthesis"},
		{"(true))((true", "closes a parenthesis"},
		{"t.a = 1 -- and the rest", "comments"},
		{"t.a = 1 /* and the rest", "comments"},
		{"t.a = $$x$$", "'$' is refused"},
		{"t.a = $tag$x$tag$", "'$' is refused"},
		{"t.a < $1", "'$' is refused"},
		{"t.a < :cutoff AND t.b = $1", "'$' is refused"},
		{"t.a = 'open", "string literal is not closed"},
		{`t.a = E'open\'`, "string literal is not closed"},
		{`"open = 1`, "quoted identifier is not closed"},
		{"((t.a", "2 '(' not closed"},
		{`t.a = 'x\' OR true OR t.a = '`, "backslash in a plain"},
		{"t.a = 1\x00", "control character"},
	}
	for _, tt := range refuse {
		problems := checkCondition(tt.where)
		if !strings.Contains(strings.Join(problems, "\n"), tt.want) {
			t.Errorf("checkCondition(%q) = %q, want a problem containing %q", tt.where, problems, tt.want)
		}
	}
}

// TestWithCutoff checks where :cutoff is the placeholder: a word of its own outside quotes.
func TestWithCutoff(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ where, want string }{
		{"t.a < :cutoff", "t.a < ($1::timestamptz)"},
		{":cutoff > t.a AND (g.b >= :cutoff)", "($1::timestamptz) > t.a AND (g.b >= ($1::timestamptz))"},
		{"t.a < :cutoff::date", "t.a < ($1::timestamptz)::date"},
		{"t.note = ':cutoff'", "t.note = ':cutoff'"},
		{`"odd :cutoff" IS NULL`, `"odd :cutoff" IS NULL`},
		{"t.a::cutoff IS NULL", "t.a::cutoff IS NULL"},
		{"t.a < :cutoffs", "t.a < :cutoffs"},
		{"t.a < :cutoff_2", "t.a < :cutoff_2"},
		{"t.a < now()", "t.a < now()"},
	} {
		if got := WithCutoff(tt.where); got != tt.want {
			t.Errorf("WithCutoff(%q) = %q, want %q", tt.where, got, tt.want)
		}
	}
}

func TestPartialPredicate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		where, pred string
		complete    bool
	}{
		{"", "", true},
		{"t.read_at IS NOT NULL", "read_at IS NOT NULL", true},
		{"t.status = 'sent'", "status = 'sent'", true},
		{"t.status IN ('success', 'dead_letter')", "status IN ('success', 'dead_letter')", true},
		{"status = 'done' and t.archived = true", "status = 'done' AND archived = true", true},
		{`t."Kind" <> 'x'`, `"Kind" <> 'x'`, true},
		{"t.status = 'in_progress' AND t.lease_expires_at < now()", "status = 'in_progress'", false},
		{"t.a = 1 OR t.b = 2", "", false},
		{"t.a = 1 AND t.b = 2 OR t.c = 3", "", false},
		{"t.a BETWEEN 1 AND t.b IS NULL", "", false},
		{"t.a = 'x AND y' AND (t.b = 1 OR t.c = 2)", "a = 'x AND y'", false},
		{"t.brand = 'x'", "brand = 'x'", true},
	}
	for _, tt := range []struct {
		where, pred string
		complete    bool
	}{
		{"g.state = 'runnable'", "state = 'runnable'", true},
		{"g.state IN ('a', 'b') AND t.x = 1", "state IN ('a', 'b')", false},
		{"g.at >= :cutoff AND g.kind = 'x'", "kind = 'x'", false},
	} {
		if pred, complete := PartialPredicate(tt.where, "g"); pred != tt.pred || complete != tt.complete {
			t.Errorf("PartialPredicate(%q, g) = %q, %v; want %q, %v", tt.where, pred, complete, tt.pred, tt.complete)
		}
	}
	for _, tt := range tests {
		pred, complete := PartialPredicate(tt.where, "t")
		if pred != tt.pred || complete != tt.complete {
			t.Errorf("PartialPredicate(%q) = %q, %v; want %q, %v", tt.where, pred, complete, tt.pred, tt.complete)
		}
	}
}

// TestArchiveWithChildrenRefused: delete_with's children would go without being archived.
func TestArchiveWithChildrenRefused(t *testing.T) {
	t.Parallel()
	_, err := Load("p.yaml", []byte(`sweeps:
  - name: events
    passes:
      - name: old
        table: events
        age_column: at
        retention: 30d
        archive_to: cold.events
        delete_with:
          - {table: deliveries, column: event_id}
`))
	if err == nil || !strings.Contains(err.Error(), "p.yaml:8: pass \"old\" of sweep \"events\": archive_to and delete_with together are refused") {
		t.Fatalf("err = %v", err)
	}
}

// TestLoadKeyColumns: column and references take a string or a list, without_foreign_key a
// boolean, for keep guards and delete_with alike.
func TestLoadKeyColumns(t *testing.T) {
	t.Parallel()
	pol, err := Load("p.yaml", []byte(`sweeps:
  - name: media
    passes:
      - name: remote
        table: remote_media
        age_column: created_at
        retention: 30d
        keep_while_referenced_by:
          - {table: pins, column: [origin, media], references: [media_origin, media_id]}
        delete_with:
          - table: remote_thumbnails
            column: [media_origin, media_id]
            references: [media_origin, media_id]
            without_foreign_key: true
          - {table: url_cache, column: media_id, references: [media_id], without_foreign_key: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := pol.Specs[0].Passes[0]
	wantGuard := Guard{Table: "pins", Columns: []string{"origin", "media"}, References: []string{"media_origin", "media_id"}}
	wantChildren := []Child{
		{Table: "remote_thumbnails", Columns: []string{"media_origin", "media_id"}, References: []string{"media_origin", "media_id"}, WithoutForeignKey: true},
		{Table: "url_cache", Columns: []string{"media_id"}, References: []string{"media_id"}},
	}
	if !reflect.DeepEqual(p.Guards, []Guard{wantGuard}) {
		t.Errorf("guards = %+v, want %+v", p.Guards, wantGuard)
	}
	if !reflect.DeepEqual(p.DeleteWith, wantChildren) {
		t.Errorf("delete_with = %+v, want %+v", p.DeleteWith, wantChildren)
	}
	c := CatalogPass(p)
	if got := c.DeleteWith[0]; got.Column != "media_origin, media_id" || !got.WithoutForeignKey || len(got.ReferencesColumns) != 2 {
		t.Errorf("catalog child = %+v", got)
	}
}

// TestValidateKeyColumns: specs built in Go meet the loader's rules on key columns: a guard or
// child with no column, or with more references than columns, is refused before any SQL is
// rendered from it.
func TestValidateKeyColumns(t *testing.T) {
	t.Parallel()
	base := Pass{Name: "p", Table: "media", AgeColumn: "created_at", Retention: 30 * 24 * time.Hour}
	tests := []struct {
		name string
		edit func(p *Pass)
		want string
	}{
		{"a guard with no column", func(p *Pass) { p.Guards = []Guard{{Table: "pins"}} }, "keep guard names no column"},
		{"a child with no column", func(p *Pass) { p.DeleteWith = []Child{{Table: "thumbs"}} }, "delete_with names no column"},
		{"a child with two references for one column", func(p *Pass) {
			p.DeleteWith = []Child{{Table: "thumbs", Columns: []string{"media_id"}, References: []string{"origin", "id"}}}
		}, "delete_with names 1 columns (media_id) and 2 references (origin, id)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := base
			tt.edit(&p)
			err := Validate([]Spec{{Name: "s", Passes: []Pass{p}}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
