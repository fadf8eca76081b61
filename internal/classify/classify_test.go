package classify

import (
	"errors"
	"io"
	"strings"
	"testing"
)

const okAnswer = `{"sweep":"notifications","runId":"0192","dryRun":false,"skipped":false,"deleted":12000,
"batchCount":12,"durationMs":1234,"truncated":false,"stopReason":"exhausted",
"passes":[{"pass":"read","deleted":12000,"batchCount":12,"stopReason":"exhausted"}],"error":null}`

const batchErrorAnswer = `{"sweep":"outbox","runId":"0193","dryRun":false,"skipped":false,"deleted":10,
"batchCount":1,"durationMs":40,"truncated":false,"stopReason":"batch-error",
"passes":[{"pass":"","deleted":10,"batchCount":1,"stopReason":"batch-error"}],
"error":{"code":"23503","message":"violates foreign key","pass":""}}`

const truncatedAnswer = `{"sweep":"audit-log","runId":"0194","deleted":5,"batchCount":1000,"durationMs":90000,
"truncated":true,"stopReason":"batch-cap","passes":[{"pass":"operational","deleted":5,"batchCount":1000,"stopReason":"batch-cap"}],"error":null}`

const skippedAnswer = `{"sweep":"consents","runId":"0195","skipped":true,"stopReason":"lease-held","passes":[],"error":null}`

const dryRunAnswer = `{"sweep":"email-messages","dryRun":true,"passes":[
{"pass":"sent","eligible":42,"estimate":40,"countTimedOut":false,"indexed":true},
{"pass":"failed","eligible":null,"estimate":9000000,"countTimedOut":true,"indexed":false}]}`

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		in         Input
		want       Category
		wantAnswer bool
		detailHas  string
	}{
		// Before parsing.
		{name: "transport error", in: Input{TransportErr: errors.New("dial tcp: connection refused")}, want: Unreachable, detailHas: "connection refused"},
		{name: "transport error wins over a status", in: Input{TransportErr: errors.New("timeout"), StatusCode: 200, Body: []byte(okAnswer)}, want: Unreachable},
		{name: "body broke after headers", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"x",`), BodyErr: io.ErrUnexpectedEOF}, want: TruncatedBody, detailHas: "unexpected EOF"},
		{name: "body broke on a 500", in: Input{StatusCode: 500, Body: []byte(`{"sw`), BodyErr: io.ErrUnexpectedEOF}, want: TruncatedBody},
		{name: "body broke although what arrived parses", in: Input{StatusCode: 200, Body: []byte(okAnswer), BodyErr: errors.New("reset")}, want: TruncatedBody},

		// Non-2xx.
		{name: "401 with a JSON error", in: Input{StatusCode: 401, Body: []byte(`{"error":{"code":"bad_signature","message":"signature does not match"}}`)}, want: Fail, detailHas: "bad_signature: signature does not match"},
		{name: "503 with a string error", in: Input{StatusCode: 503, Body: []byte(`{"error":"signing_not_configured"}`)}, want: Fail, detailHas: "signing_not_configured"},
		{name: "404 empty body", in: Input{StatusCode: 404}, want: Fail, detailHas: "HTTP 404"},
		{name: "502 HTML from a proxy", in: Input{StatusCode: 502, Body: []byte("<html>\n<body>Bad Gateway</body></html>")}, want: Fail, detailHas: "<html> <body>Bad Gateway"},
		{name: "500 whose body is a batch-error answer", in: Input{StatusCode: 500, Body: []byte(batchErrorAnswer)}, want: BatchError, wantAnswer: true, detailHas: "23503"},
		{name: "500 whose body is an ok answer", in: Input{StatusCode: 500, Body: []byte(okAnswer)}, want: Fail, wantAnswer: true, detailHas: "no failed batch"},
		{name: "500 whose body is skipped", in: Input{StatusCode: 500, Body: []byte(skippedAnswer)}, want: Fail, wantAnswer: true},
		{name: "500 skipped with an error object is batch-error", in: Input{StatusCode: 500, Body: []byte(`{"sweep":"a","skipped":true,"stopReason":"lease-held","error":{"code":"XX000","message":"m","pass":"p"}}`)}, want: BatchError, wantAnswer: true},
		{name: "500 with a dry-run answer", in: Input{StatusCode: 500, Body: []byte(dryRunAnswer)}, want: Fail, wantAnswer: true, detailHas: "dry-run"},
		{name: "302 redirect", in: Input{StatusCode: 302}, want: Fail},
		{name: "status 0 is not success", in: Input{Body: []byte(okAnswer)}, want: Fail, wantAnswer: true},

		// 2xx, not a sweep answer.
		{name: "empty body", in: Input{StatusCode: 200}, want: Unparseable, detailHas: "empty"},
		{name: "not JSON", in: Input{StatusCode: 200, Body: []byte("OK")}, want: Unparseable, detailHas: "not JSON"},
		{name: "JSON array", in: Input{StatusCode: 200, Body: []byte(`[` + okAnswer + `]`)}, want: Unparseable, detailHas: "not a JSON object"},
		{name: "JSON null", in: Input{StatusCode: 200, Body: []byte(`null`)}, want: Unparseable},
		{name: "JSON string", in: Input{StatusCode: 200, Body: []byte(`"exhausted"`)}, want: Unparseable},
		{name: "object without sweep", in: Input{StatusCode: 200, Body: []byte(`{"status":"ok"}`)}, want: Unparseable, detailHas: `no "sweep"`},
		{name: "health answer", in: Input{StatusCode: 200, Body: []byte(`{"stopReason":"exhausted"}`)}, want: Unparseable},
		{name: "sweep without stopReason", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","deleted":1}`)}, want: Unparseable, detailHas: "stopReason"},
		{name: "empty sweep name", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"","stopReason":"exhausted"}`)}, want: Unparseable},
		{name: "unknown stopReason", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","stopReason":"done"}`)}, want: Unparseable, detailHas: `"done"`},
		{name: "unknown pass stopReason", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","stopReason":"exhausted","passes":[{"pass":"p","stopReason":"weird"}]}`)}, want: Unparseable},
		{name: "field of the wrong type", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","stopReason":"exhausted","deleted":"many"}`)}, want: Unparseable},
		{name: "skipped without lease-held", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","skipped":true,"stopReason":"exhausted"}`)}, want: Unparseable, detailHas: "inconsistent"},
		{name: "lease-held without skipped", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","skipped":false,"stopReason":"lease-held"}`)}, want: Unparseable, detailHas: "inconsistent"},
		{name: "dry run without passes", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","dryRun":true}`)}, want: Unparseable},
		{name: "dry run with passes of the wrong type", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","dryRun":true,"passes":{"pass":"p"}}`)}, want: Unparseable},

		// Parsed answers.
		{name: "ok", in: Input{StatusCode: 200, Body: []byte(okAnswer)}, want: OK, wantAnswer: true},
		{name: "ok on another 2xx", in: Input{StatusCode: 202, Body: []byte(okAnswer)}, want: OK, wantAnswer: true},
		{name: "ok without passes", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","stopReason":"exhausted"}`)}, want: OK, wantAnswer: true},
		{name: "unknown extra fields are tolerated", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","stopReason":"exhausted","newField":{"x":1}}`)}, want: OK, wantAnswer: true},
		{name: "truncated by batch-cap", in: Input{StatusCode: 200, Body: []byte(truncatedAnswer)}, want: Truncated, wantAnswer: true, detailHas: "batch-cap"},
		{name: "truncated by budget", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","truncated":true,"stopReason":"budget"}`)}, want: Truncated, wantAnswer: true},
		{name: "truncated by shutdown", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","truncated":true,"stopReason":"shutdown"}`)}, want: Truncated, wantAnswer: true},
		{name: "truncated flag alone", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","truncated":true,"stopReason":"exhausted"}`)}, want: Truncated, wantAnswer: true},
		{name: "truncating stop reason without the flag", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","truncated":false,"stopReason":"budget"}`)}, want: Truncated, wantAnswer: true},
		{name: "truncating pass under an exhausted top level", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","stopReason":"exhausted","passes":[{"pass":"p","stopReason":"budget"}]}`)}, want: Truncated, wantAnswer: true},
		{name: "skipped", in: Input{StatusCode: 200, Body: []byte(skippedAnswer)}, want: Skipped, wantAnswer: true},
		{name: "batch-error in a 200 is still batch-error", in: Input{StatusCode: 200, Body: []byte(batchErrorAnswer)}, want: BatchError, wantAnswer: true, detailHas: "23503 violates foreign key"},
		{name: "batch-error without error detail", in: Input{StatusCode: 500, Body: []byte(`{"sweep":"a","stopReason":"batch-error"}`)}, want: BatchError, wantAnswer: true, detailHas: "no error detail"},
		{name: "failed pass under an exhausted top level", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","stopReason":"exhausted","passes":[{"pass":"p","stopReason":"batch-error"}]}`)}, want: BatchError, wantAnswer: true},
		{name: "error object under an exhausted top level", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","stopReason":"exhausted","error":{"code":"57014","message":"canceling statement","pass":"p"}}`)}, want: BatchError, wantAnswer: true},
		{name: "dry run", in: Input{StatusCode: 200, Body: []byte(dryRunAnswer)}, want: OK, wantAnswer: true, detailHas: "pass failed: count timed out; pass failed: not index-backed"},

		// Priority: skipped > batch-error > schema-changed > history-error > truncated > ok.
		{name: "500 whose body is a schema-changed answer", in: Input{StatusCode: 500, Body: []byte(`{"sweep":"a","stopReason":"schema-changed","passes":[{"pass":"p","deleted":0,"batchCount":0,"stopReason":"schema-changed","schemaChanged":{"changed":["added: foreign key k on other.t: FOREIGN KEY (a) REFERENCES a(id) ON DELETE CASCADE"],"refusal":"name other.t in cascades"}}],"error":{"code":"schema-changed","message":"m","pass":"p"}}`)}, want: SchemaChanged, wantAnswer: true, detailHas: "pass p deleted nothing: the schema changed since its proof (added: foreign key k on other.t"},
		{name: "schema-changed in a 200 is still schema-changed", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","stopReason":"schema-changed","passes":[{"pass":"p","deleted":0,"batchCount":0,"stopReason":"schema-changed","schemaChanged":{"changed":["added: foreign key k on other.t: FOREIGN KEY (a) REFERENCES a(id) ON DELETE CASCADE"],"refusal":"name other.t in cascades"}}],"error":{"code":"schema-changed","message":"m","pass":"p"}}`)}, want: SchemaChanged, wantAnswer: true, detailHas: "refuses it now: name other.t in cascades"},
		{name: "a schema-changed pass under a budget top level", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","truncated":true,"stopReason":"budget","passes":[{"pass":"p","stopReason":"schema-changed"},{"pass":"q","stopReason":"budget"}]}`)}, want: SchemaChanged, wantAnswer: true, detailHas: "no detail"},
		{name: "batch-error outranks schema-changed", in: Input{StatusCode: 500, Body: []byte(`{"sweep":"a","stopReason":"batch-error","passes":[{"pass":"p","stopReason":"schema-changed"},{"pass":"q","stopReason":"batch-error"}],"error":{"code":"23503","message":"fk","pass":"q"}}`)}, want: BatchError, wantAnswer: true},
		{name: "skipped outranks truncated", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","skipped":true,"truncated":true,"stopReason":"lease-held"}`)}, want: Skipped, wantAnswer: true},
		{name: "skipped outranks an error object", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","skipped":true,"stopReason":"lease-held","error":{"code":"x","message":"y","pass":"z"}}`)}, want: Skipped, wantAnswer: true},
		{name: "a run its history could not record", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","stopReason":"exhausted","deleted":3,"historyError":{"code":"P0001","message":"read-only","pass":""}}`)}, want: HistoryError, wantAnswer: true, detailHas: "P0001 read-only"},
		{name: "history-error outranks truncated", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","truncated":true,"stopReason":"budget","historyError":{"code":"22P02","message":"m","pass":""}}`)}, want: HistoryError, wantAnswer: true},
		{name: "batch-error outranks history-error", in: Input{StatusCode: 500, Body: []byte(`{"sweep":"a","stopReason":"batch-error","error":{"code":"23503","message":"fk","pass":"q"},"historyError":{"code":"22P02","message":"m","pass":""}}`)}, want: BatchError, wantAnswer: true},
		{name: "batch-error outranks truncated", in: Input{StatusCode: 500, Body: []byte(`{"sweep":"a","truncated":true,"stopReason":"batch-error","passes":[{"pass":"p","stopReason":"budget"},{"pass":"q","stopReason":"batch-error"}],"error":{"code":"23503","message":"fk","pass":"q"}}`)}, want: BatchError, wantAnswer: true},
		{name: "batch-error outranks truncated in a 200", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","truncated":true,"stopReason":"batch-error","passes":[{"pass":"p","stopReason":"budget"},{"pass":"q","stopReason":"batch-error"}],"error":{"code":"23503","message":"fk","pass":"q"}}`)}, want: BatchError, wantAnswer: true},
		{name: "truncated outranks ok", in: Input{StatusCode: 200, Body: []byte(`{"sweep":"a","truncated":true,"stopReason":"budget","passes":[{"pass":"p","stopReason":"exhausted"},{"pass":"q","stopReason":"budget"}]}`)}, want: Truncated, wantAnswer: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.in)
			if got.Category != tc.want {
				t.Fatalf("Category = %q (detail %q), want %q", got.Category, got.Detail, tc.want)
			}
			if (got.Answer != nil) != tc.wantAnswer {
				t.Errorf("Answer = %+v, want present %t", got.Answer, tc.wantAnswer)
			}
			if !strings.Contains(got.Detail, tc.detailHas) {
				t.Errorf("Detail = %q, want it to contain %q", got.Detail, tc.detailHas)
			}
		})
	}
}

func TestClassifyParsesAnswer(t *testing.T) {
	t.Parallel()
	got := Classify(Input{StatusCode: 500, Body: []byte(batchErrorAnswer)})
	a := got.Answer
	if a == nil {
		t.Fatal("no answer")
	}
	if a.Sweep != "outbox" || a.RunID != "0193" || a.Deleted != 10 || a.BatchCount != 1 || a.DurationMs != 40 ||
		a.StopReason != StopBatchError || len(a.Passes) != 1 || a.Error == nil || a.Error.Code != "23503" {
		t.Errorf("answer = %+v", a)
	}
}

func TestClassifyParsesDryRun(t *testing.T) {
	t.Parallel()
	got := Classify(Input{StatusCode: 200, Body: []byte(dryRunAnswer)})
	a := got.Answer
	if a == nil || !a.IsDryRun() {
		t.Fatalf("answer = %+v, want a dry run", a)
	}
	if len(a.Passes) != 0 || len(a.DryRunPasses) != 2 {
		t.Fatalf("passes = %+v, dry-run passes = %+v", a.Passes, a.DryRunPasses)
	}
	sent, failed := a.DryRunPasses[0], a.DryRunPasses[1]
	if sent.Eligible == nil || *sent.Eligible != 42 || sent.Estimate != 40 || !sent.Indexed {
		t.Errorf("sent = %+v", sent)
	}
	if failed.Eligible != nil || !failed.CountTimedOut || failed.Indexed {
		t.Errorf("failed = %+v", failed)
	}
}

func TestCategoryFailed(t *testing.T) {
	t.Parallel()
	want := map[Category]bool{
		OK: false, Truncated: false, Skipped: false,
		BatchError: true, SchemaChanged: true, HistoryError: true, Unreachable: true, Fail: true, TruncatedBody: true, Unparseable: true,
		Category("something-new"): true,
	}
	for c, w := range want {
		if got := c.Failed(); got != w {
			t.Errorf("%q.Failed() = %t, want %t", c, got, w)
		}
	}
	if n := len(Categories()); n != 10 {
		t.Errorf("Categories() has %d entries, want 10", n)
	}
}

func TestSnippetBoundsLength(t *testing.T) {
	t.Parallel()
	got := Classify(Input{StatusCode: 502, Body: []byte(strings.Repeat("x", 10000))})
	if len([]rune(got.Detail)) > snippetMax+20 {
		t.Errorf("detail is %d runes long", len([]rune(got.Detail)))
	}
}
