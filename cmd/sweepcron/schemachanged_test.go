package main

import (
	"fmt"
	"strings"
	"testing"
)

// schemaChangedBody is the API's answer for a pass whose schema changed since its proof and whose
// check refuses it now: it deleted nothing.
func schemaChangedBody(name string) string {
	return fmt.Sprintf(`{"sweep":%q,"runId":"r5","deleted":0,"batchCount":0,"durationMs":9,"truncated":false,
"stopReason":"schema-changed","passes":[{"pass":"p","deleted":0,"batchCount":0,"stopReason":"schema-changed",
"schemaChanged":{"changed":["added: foreign key grants_token_id_fkey on other.grants: FOREIGN KEY (token_id) REFERENCES tokens(id) ON DELETE CASCADE"],
"refusal":"say that they go too with cascades: [other.grants]"}}],
"error":{"code":"schema-changed","message":"the schema changed since the pass was proven (added: foreign key grants_token_id_fkey …): say that they go too with cascades: [other.grants]","pass":"p"}}`, name)
}

// TestRunSchemaChanged: a pass stopped by schema-changed fails the tick, and its line names the
// changed fact and the check's way out.
func TestRunSchemaChanged(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t,
		fakeSweep{name: "a-ok", h: answer(200, okBody("a-ok"))},
		fakeSweep{name: "b-changed", h: answer(500, schemaChangedBody("b-changed"))},
	)
	code, stdout, _, err := runCron(t, t.Context(), f.env())
	if code != exitFailed {
		t.Fatalf("exit = %d (%v), want %d\n%s", code, err, exitFailed, stdout)
	}
	ls := lines(stdout)
	if len(ls) != 3 {
		t.Fatalf("stdout has %d lines, want 3:\n%s", len(ls), stdout)
	}
	fields := strings.Fields(ls[1])
	for _, has := range []string{"stop=schema-changed", `error=schema-changed pass="p"`, "foreign key grants_token_id_fkey", "cascades: [other.grants]"} {
		if len(fields) < 2 || fields[0] != "b-changed" || fields[1] != "schema-changed" || !strings.Contains(ls[1], has) {
			t.Errorf("line %q, want b-changed schema-changed …%s…", ls[1], has)
		}
	}
	if !strings.Contains(ls[2], "schema-changed=1") || !strings.Contains(err.Error(), "b-changed (schema-changed)") {
		t.Errorf("summary %q, error %v", ls[2], err)
	}
}
