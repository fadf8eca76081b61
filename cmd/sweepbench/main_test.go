package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestCommandLine covers what a mistyped command line gets: a non-zero exit (run's error) that
// names the run, the flag and the value refused, and -h the usage without an error.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=postgres://x/postgres"}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"bogus"}, []string{`unknown run "bogus"`}},
		{nil, []string{"no run named"}},
		{[]string{"paths", "-rows", "lots"}, []string{`invalid value "lots" for flag -rows`, "10000..100000000"}},
		{[]string{"paths", "-sparse-rows", "10"}, []string{`invalid value "10" for flag -sparse-rows`}},
		{[]string{"side-by-side", "-variant-env", "BATCH_TARGET"}, []string{"-variant-env", `"BATCH_TARGET" is not KEY=VALUE`}},
		{[]string{"scale", "-rounds", "2"}, []string{"flag provided but not defined: -rounds"}},
		{[]string{"paths", "crossover"}, []string{`unexpected argument "crossover"`}},
		{[]string{"frontier", "-window", "5s"}, []string{"-window 5s: want 10s..110s"}},
		{[]string{"paths", "-window", "30s"}, []string{"flag provided but not defined: -window"}},
		{[]string{"frontier", "-only", "C·1 SZF,C·9"}, []string{"-only", `"C·9" is no setting of the frontier's`, "C·1.5 SZF"}},
		{[]string{"paths", "-only", "C"}, []string{"flag provided but not defined: -only"}},
	} {
		var stderr bytes.Buffer
		err := run(t.Context(), tt.args, env, &bytes.Buffer{}, &stderr)
		if err == nil {
			t.Errorf("run(%q) succeeded", tt.args)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("run(%q) = %q, want it to say %q", tt.args, err, w)
			}
		}
	}
	if err := run(t.Context(), []string{"side-by-side"}, nil, &bytes.Buffer{}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), "-database-url") {
		t.Errorf("no database URL: %v", err)
	}
	for _, args := range [][]string{{"-h"}, {"paths", "-h"}} {
		var stderr bytes.Buffer
		if err := run(t.Context(), args, env, &bytes.Buffer{}, &stderr); err != nil {
			t.Errorf("run(%q) = %v, want the usage and no error", args, err)
		}
		if !strings.Contains(stderr.String(), "usage: sweepbench") {
			t.Errorf("run(%q) printed %q, want the usage", args, stderr.String())
		}
	}
	s, err := parseArgs([]string{"frontier", "-only", "C·1 SZF, W8"}, env, &bytes.Buffer{})
	if err != nil || s.only.String() != "C·1 SZF,W8" || !strings.Contains(s.invocation(), "-only 'C·1 SZF,W8'") {
		t.Errorf("frontier -only: %v, %q in %q; want the two keys, in its invocation", err, s.only, s.invocation())
	}
	var stderr bytes.Buffer
	_ = run(t.Context(), []string{"paths", "-h"}, env, &bytes.Buffer{}, &stderr)
	for _, flag := range []string{"-database-url", "-rows", "-sparse-rows", "-rounds", "-out"} {
		if !strings.Contains(stderr.String(), flag) {
			t.Errorf("paths -h does not list %s:\n%s", flag, stderr.String())
		}
	}
}
