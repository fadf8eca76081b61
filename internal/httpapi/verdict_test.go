package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestCatalogVerdicts checks that GET /internal/sweeps judges each sweep from its history: a
// drained table is bounded, a sweep that never ran is stale, and each pass carries its lag.
func TestCatalogVerdicts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.seedNotifications(30)
	if a := h.signed(http.MethodPost, "/internal/sweep-notifications", ""); a.status != http.StatusOK {
		t.Fatalf("sweep: %d %s", a.status, a.body)
	}
	var got wire.Catalog
	decode(t, h.signed(http.MethodGet, wire.CatalogRoute, ""), &got)
	verdicts := map[string]*wire.SweepVerdict{}
	for _, s := range got.Sweeps {
		verdicts[s.Name] = s.Retention
	}
	cases := []struct {
		name, sweep string
		want        wire.Verdict
	}{
		{"drained table", "notifications", wire.VerdictBounded},
		{"never run", "outbox", wire.VerdictStale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := verdicts[tc.sweep]
			if v == nil || v.Verdict != tc.want {
				t.Fatalf("%s: verdict %+v, want %s", tc.sweep, v, tc.want)
			}
		})
	}
	if v := verdicts["notifications"]; len(v.Passes) == 0 || v.LagSeconds == nil || *v.LagSeconds != 0 {
		t.Errorf("notifications: %+v, want its pass with no lag left", v)
	}
}
