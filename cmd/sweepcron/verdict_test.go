package main

import (
	"strings"
	"testing"
)

// catalogWithVerdicts is GET /internal/sweeps as an API with a run history answers it.
const catalogWithVerdicts = `{"sweeps":[
{"name":"notifications","route":"/internal/sweep-notifications","passes":[],
 "retention":{"verdict":"bounded","reason":"nothing overdue","lagSeconds":0,"measuredAt":"2026-11-24T09:15:01Z","intervalSeconds":3600,"lastRunAt":"2026-11-24T09:15:00Z","passes":[]}},
{"name":"audit-log","route":"/internal/sweep-audit-log","passes":[],
 "retention":{"verdict":"draining","reason":"overdue and shrinking: operational","lagSeconds":18000,"measuredAt":"2026-11-28T09:16:30Z","intervalSeconds":3600,"lastRunAt":"2026-11-28T09:15:00Z","catchUpAt":"2026-11-28T13:00:00Z","passes":[]}}
],"bounds":{"serverWriteTimeoutMs":120000}}`

// TestHistoryVerdicts checks the verdicts sweepcron history prints under the runs: the summary
// line over every sweep, then the lines of the sweeps asked for.
func TestHistoryVerdicts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"every sweep", nil, []string{
			"retention: 1 of 2 sweeps bounded; 1 draining",
			"SWEEP          VERDICT   LAG     CATCH-UP              WHY",
			"notifications  bounded   0s      -                     nothing overdue",
			"audit-log      draining  5h0m0s  2026-11-28T13:00:00Z  overdue and shrinking: operational",
		}},
		{"one sweep", []string{"--sweep", "audit-log"}, []string{
			"retention: 1 of 2 sweeps bounded; 1 draining",
			"SWEEP      VERDICT   LAG     CATCH-UP              WHY",
			"audit-log  draining  5h0m0s  2026-11-28T13:00:00Z  overdue and shrinking: operational",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t)
			f.runs = answer(200, historyBody)
			f.catalog = answer(200, catalogWithVerdicts)
			code, stdout, stderr, err := runCron(t, t.Context(), f.env(), append([]string{"history"}, tc.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d (%v)\n%s", code, err, stderr)
			}
			_, tail, ok := strings.Cut(stdout, "\n\n")
			if !ok || strings.TrimSpace(tail) != strings.Join(tc.want, "\n") {
				t.Errorf("verdicts:\n%s\nwant:\n%s", tail, strings.Join(tc.want, "\n"))
			}
		})
	}
}
