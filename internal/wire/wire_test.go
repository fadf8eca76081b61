package wire_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sweeprail/sweeprail/internal/wire"
)

func TestStopReasons(t *testing.T) {
	t.Parallel()
	t.Run("severity follows the documented order", func(t *testing.T) {
		order := []wire.StopReason{wire.StopExhausted, wire.StopBatchCap, wire.StopBudget, wire.StopCriticalLoad, wire.StopShutdown, wire.StopSchemaChanged, wire.StopBatchError}
		for i := 1; i < len(order); i++ {
			if order[i].Severity() <= order[i-1].Severity() {
				t.Errorf("%s is not more severe than %s", order[i], order[i-1])
			}
		}
		if wire.StopReason("nope").Severity() != -1 || wire.StopReason("nope").Known() {
			t.Error("an unknown reason has a severity or is known")
		}
	})
	t.Run("truncated exactly on budget, batch-cap, critical-load and shutdown", func(t *testing.T) {
		for _, s := range wire.StopReasons() {
			want := s == wire.StopBudget || s == wire.StopBatchCap || s == wire.StopShutdown || s == wire.StopCriticalLoad
			if s.Truncates() != want {
				t.Errorf("%s.Truncates() = %t", s, !want)
			}
		}
	})
	t.Run("outcomes are the run-ending reasons and skipped", func(t *testing.T) {
		out := wire.Outcomes()
		if !slices.Contains(out, wire.OutcomeSkipped) || slices.Contains(out, string(wire.StopLeaseHeld)) || len(out) != 8 {
			t.Errorf("outcomes %v", out)
		}
	})
}

// TestDependencyFree keeps wire, and so sweepcron, free of the engine's dependencies.
func TestDependencyFree(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"github.com/sweeprail/sweeprail/internal/wire", "github.com/sweeprail/sweeprail/cmd/sweepcron"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "jackc/pgx") || strings.HasSuffix(dep, "/internal/sweep") {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}
