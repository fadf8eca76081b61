package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/wire"
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

// TestRunJSONKeepsTheAnswer checks that --json hands on each answer as the API sent it: every
// field of a run's and a dry run's answer, set, comes back equal, and so does one this client
// does not know.
func TestRunJSONKeepsTheAnswer(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	epoch, lag := int64(1_700_000_000), 1.5
	run := wire.Result{Sweep: "s", RunID: "r1", DryRun: true, Skipped: true, Deleted: 30, Archived: 3, BatchCount: 5, DurationMs: 40,
		Processed: 7, ReferenceTime: &at, Truncated: true, StopReason: wire.StopLeaseHeld,
		Passes: []wire.PassResult{{Pass: "p", Deleted: 30, Processed: 7, Cutoff: at, CutoffEpoch: &epoch, AgeUnit: "seconds", DurationMs: 40,
			Archived: 3, Recovered: 1, BatchCount: 5, StopReason: wire.StopLeaseHeld, PartitionsDropped: 2, ThrottledMs: 9,
			ThrottledBy: map[string]int64{"wal-rate": 9}, Children: []wire.ChildRows{{Table: "c", Column: "p_id", Rows: 4}}, Cascades: []wire.CascadeRows{{Table: "k", Deleted: 5, Updated: 6}},
			Path: "index", LockRetries: 1, Lag: &wire.Lag{Seconds: &lag, MeasuredAt: at, Source: "read", Error: "e"},
			LostCommit:    &wire.LostCommit{Batch: 2, Rows: 3, Outcome: wire.BatchCommitted},
			SchemaChanged: &wire.SchemaChange{Changed: []string{"added: key"}, Refusal: "r"}}},
		Error: &wire.ErrorInfo{Code: "x", Message: "m", Pass: "p"}, PartitionsDropped: 2, ThrottledMs: 9, ThrottledBy: map[string]int64{"wal-rate": 9},
		HistoryError: &wire.ErrorInfo{Code: "y", Message: "n", Pass: "p"}, TookOverLease: "owner"}
	eligible := int64(30)
	dry := wire.DryRunResult{Sweep: "s", DryRun: true, ReferenceTime: at, Counted: wire.DryRunCounted,
		Passes: []wire.DryRunPass{{Pass: "p", Cutoff: at, CutoffEpoch: &epoch, AgeUnit: "seconds", Eligible: &eligible, Estimate: 31,
			CountTimedOut: true, Indexed: true, Children: []wire.ChildRows{{Table: "c", Column: "p_id", Rows: 4}},
			Cascades: []wire.CascadeRows{{Table: "k", Deleted: 5, Updated: 6}}, CascadesUncounted: true, Triggers: []string{"t"},
			Path: "index", Partitions: []wire.DryRunPartition{{Name: "p1", RowsEstimate: 8}}}}}
	for _, tc := range []struct {
		name   string
		answer any
		args   []string
	}{
		{"a run's answer", run, nil},
		{"a dry run's answer", dry, []string{"--dry-run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			unset(t, reflect.ValueOf(tc.answer), reflect.TypeOf(tc.answer).Name())
			raw, err := json.Marshal(tc.answer)
			if err != nil {
				t.Fatal(err)
			}
			body := strings.Replace(string(raw), "{", `{"fieldOfALaterAPI":{"n":1},`, 1)
			f := newFakeAPI(t, fakeSweep{name: "s", h: answer(200, body)})
			_, stdout, _, _ := runCron(t, t.Context(), f.env(), append([]string{"--json"}, tc.args...)...)
			var rep struct {
				Routes []struct {
					Answer map[string]any `json:"answer"`
				} `json:"routes"`
			}
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Routes) != 1 {
				t.Fatalf("report %s (%v)", stdout, err)
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(body), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rep.Routes[0].Answer, want) {
				t.Errorf("answer\n%v\nwant\n%v", rep.Routes[0].Answer, want)
			}
		})
	}
}

// unset fails the test for each field of v left at its zero value, so that a field added to the
// answer is added here too.
func unset(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			unset(t, v.Elem(), path)
		}
	case reflect.Slice:
		for i := range v.Len() {
			unset(t, v.Index(i), path)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			break
		}
		for i := range v.NumField() {
			if f := v.Field(i); f.IsZero() {
				t.Errorf("%s.%s is unset: set it, so that the round trip covers it", path, v.Type().Field(i).Name)
			} else {
				unset(t, f, path+"."+v.Type().Field(i).Name)
			}
		}
	}
}
