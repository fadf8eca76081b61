package main

import (
	"strings"
	"testing"
)

// TestHistoryIdleRuns: the row the runs that found nothing to do share says how many it counts.
func TestHistoryIdleRuns(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.runs = answer(200, `{"runs":[
{"runId":"6f1c0e7e-0000-4000-8000-000000000009","sweep":"notifications","startedAt":"2026-11-26T09:15:00Z","finishedAt":"2026-11-26T09:15:59Z",
 "stopReason":"exhausted","truncated":false,"skipped":false,"deleted":0,"archived":0,"partitionsDropped":0,"passes":[],"error":null,
 "requestId":"req-300","requests":300}]}`)
	code, stdout, stderr, err := runCron(t, t.Context(), f.env(), "history", "--sweep", "notifications")
	if code != exitOK {
		t.Fatalf("exit %d (%v)\n%s", code, err, stderr)
	}
	if got := lines(stdout); len(got) != 2 || !strings.Contains(got[1], "exhausted ×300") {
		t.Errorf("table:\n%s\nwant the row to say exhausted ×300", stdout)
	}
}
