package main

import (
	"testing"
)

// cascadeRunBody is a run whose pass deleted a one-to-one parent with each row, and whose keys
// deleted and changed rows of its cascades.
const cascadeRunBody = `{"sweep":"members","runId":"r1","deleted":30,"batchCount":5,"durationMs":40,"truncated":false,"stopReason":"exhausted",
"passes":[{"pass":"left","deleted":30,"batchCount":5,"stopReason":"exhausted","path":"index",
  "children":[{"table":"profiles","column":"id","rows":30}],
  "cascades":[{"table":"members","deleted":0,"updated":0},{"table":"profile_photos","deleted":60,"updated":0},{"table":"profile_views","deleted":0,"updated":30}]}],
"error":null}`

// perRowRunBody is a run of one per-row pass, which deletes nothing itself.
const perRowRunBody = `{"sweep":"erasure","runId":"r2","deleted":0,"processed":163,"batchCount":163,"durationMs":900,"truncated":false,"stopReason":"exhausted",
"passes":[{"pass":"forget","deleted":0,"processed":163,"batchCount":163,"stopReason":"exhausted","path":"per-row"}],"error":null}`

// perRowIdleBody is a per-row pass that found no key: it processed none, and says so.
const perRowIdleBody = `{"sweep":"erasure","runId":"r3","deleted":0,"batchCount":0,"durationMs":3,"truncated":false,"stopReason":"exhausted",
"passes":[{"pass":"forget","deleted":0,"batchCount":0,"stopReason":"exhausted","path":"per-row"}],"error":null}`

// cascadeDryRunBody is a dry run of two passes: one counting its cascades, one whose keys form a
// cycle the count cannot follow.
const cascadeDryRunBody = `{"sweep":"members","dryRun":true,"referenceTime":"2026-12-01T00:00:00Z","counted":"…","passes":[
{"pass":"left","eligible":30,"estimate":31,"countTimedOut":false,"indexed":true,
 "children":[{"table":"profiles","column":"id","rows":30}],
 "cascades":[{"table":"members","deleted":0,"updated":0},{"table":"profile_photos","deleted":60,"updated":0},{"table":"profile_views","deleted":0,"updated":30}]},
{"pass":"threads","eligible":10,"estimate":10,"countTimedOut":false,"indexed":true,"cascadesUncounted":true}]}`

// TestRunLines holds the text line of each kind of answer, exactly: what went with the rows,
// table by table, and a per-row pass's processed keys.
func TestRunLines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		args       []string
		want       string
	}{
		{name: "a run with a one-to-one parent and cascades", body: cascadeRunBody,
			want: "members  ok             deleted=30 +profiles=30 +members=0(cascade) +profile_photos=60(cascade) ~profile_views=30(updated) batches=5 duration=40ms stop=exhausted"},
		{name: "a per-row run", body: perRowRunBody,
			want: "members  ok             deleted=0 processed=163 batches=163 duration=900ms stop=exhausted"},
		{name: "a per-row run that found no key", body: perRowIdleBody,
			want: "members  ok             deleted=0 processed=0 batches=0 duration=3ms stop=exhausted"},
		{name: "a dry run with cascades, counted and not", body: cascadeDryRunBody, args: []string{"--dry-run"},
			want: "members  ok             dry-run [left eligible=30 estimate=31 +profiles=30 +members=0(cascade) +profile_photos=60(cascade) ~profile_views=30(updated) indexed]" +
				" [threads eligible=10 estimate=10 cascades-uncounted indexed]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, fakeSweep{name: "members", h: answer(200, tc.body)})
			code, stdout, _, err := runCron(t, t.Context(), f.env(), tc.args...)
			if code != exitOK {
				t.Fatalf("exit %d (%v)\n%s", code, err, stdout)
			}
			if got := lines(stdout)[0]; got != tc.want {
				t.Errorf("line\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
