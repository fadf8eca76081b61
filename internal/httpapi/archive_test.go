package httpapi_test

import (
	"slices"
	"testing"

	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/policy"
)

// TestMetricLabelsArchiving exports sweeprail_rows_archived_total at zero for the passes that
// archive, and for no other: a series that can never move would only be noise.
func TestMetricLabelsArchiving(t *testing.T) {
	t.Parallel()
	specs := []policy.Spec{{Name: "audit-log", Passes: []policy.Pass{
		{Name: "operational", ArchiveTo: "cold.audit_log"},
		{Name: "compliance"},
	}}}
	l := httpapi.MetricLabels(specs)
	if len(l.Sweeps) != 1 || !slices.Equal(l.Sweeps[0].Passes, []string{"operational", "compliance"}) ||
		!slices.Equal(l.Sweeps[0].Archiving, []string{"operational"}) {
		t.Fatalf("labels %+v; want both passes, operational archiving", l.Sweeps)
	}
}
