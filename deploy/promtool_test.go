package deploy

import (
	"os/exec"
	"testing"
)

// TestAlertRules runs promtool over the alert rules and their unit tests. Without promtool the
// test skips on a developer's machine and fails under CI=true, whose .ci/run installs it: a rule
// file that nobody checks is worse than none.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if isCI() {
			t.Fatal("promtool is not on PATH; CI must install it (Debian package prometheus, see .ci/run)")
		}
		t.Skip("promtool is not on PATH (Debian: apt-get install prometheus)")
	}
	for _, args := range [][]string{
		{"check", "rules", alertsFile},
		{"test", "rules", alertsTest},
	} {
		t.Run(args[0], func(t *testing.T) {
			out, err := exec.Command(promtool, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("promtool %v: %v\n%s", args, err, out)
			}
		})
	}
}
