package main

import (
	"log/slog"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// logRetentions writes, at boot, one line per pass with the retention it is served with, so that
// what a SWEEP_RETENTION override changed is on record next to what the policy says: an
// overridden pass's line is marked and names the policy's own retention.
func logRetentions(logger *slog.Logger, policySpecs, served []policy.Spec) {
	own := map[[2]string]policy.Pass{}
	for _, s := range policySpecs {
		for _, p := range s.Passes {
			own[[2]string{s.Name, p.Name}] = p
		}
	}
	for _, s := range served {
		for _, p := range s.Passes {
			o, ok := own[[2]string{s.Name, p.Name}]
			overridden := ok && o.Retention != p.Retention
			attrs := []any{"sweep", s.Name, "pass", p.Name, "table", p.Table, "age_column", p.AgeColumn,
				"retention", p.Retention.String(), "overridden", overridden}
			if p.AgeUnit != "" {
				attrs = append(attrs, "age_unit", p.AgeUnit)
			}
			if overridden {
				attrs = append(attrs, "policy_retention", o.Retention.String())
			}
			logger.Info("pass retention", attrs...)
		}
	}
}
