package statement

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// TestParams checks that every form of testdata/policy.yaml's passes uses exactly the
// placeholders it declares, $1 to $n, the cutoff first wherever it binds one, and that Bind
// and String follow the declared order.
func TestParams(t *testing.T) {
	t.Parallel()
	pol, err := policy.LoadFile(filepath.Join("testdata", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	placeholder := regexp.MustCompile(`\$([0-9]+)`)
	t.Run("every form uses what it declares", func(t *testing.T) {
		t.Parallel()
		for _, s := range pol.Specs {
			for _, p := range s.Passes {
				for _, k := range KindsOf(p) {
					for name, f := range forms(p, k) {
						if f.SQL == "" {
							continue
						}
						var used []int
						for _, m := range placeholder.FindAllStringSubmatch(f.SQL, -1) {
							var n int
							fmt.Sscan(m[1], &n)
							if !slices.Contains(used, n) {
								used = append(used, n)
							}
						}
						slices.Sort(used)
						want := make([]int, len(f.Params))
						for i := range want {
							want[i] = i + 1
						}
						if !slices.Equal(used, want) {
							t.Errorf("%s.%s (%s) %s: uses placeholders %v, declares %v (%s)", s.Name, p.Name, k, name, used, want, f.Params)
						}
						if i := slices.Index(f.Params, Cutoff); i > 0 {
							t.Errorf("%s.%s (%s) %s: the cutoff is $%d, want $1 (%s)", s.Name, p.Name, k, name, i+1, f.Params)
						}
					}
				}
			}
		}
	})
	t.Run("bind follows the declared order", func(t *testing.T) {
		t.Parallel()
		cutoff := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		a := Args{Cutoff: cutoff, Limit: 7, From: "from", Before: "before", FirstBlock: 3, EndBlock: 9, Keys: []string{"k"}}
		got := Params{Cutoff, FirstBlock, EndBlock, Left}.Bind(a)
		want := []any{cutoff, pgtype.TID{BlockNumber: 3, Valid: true}, pgtype.TID{BlockNumber: 9, Valid: true}, 7}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Bind = %v, want %v", got, want)
		}
		if got := (Params{Cutoff, From, Before}).Bind(a); got[1] != "from" || got[2] != "before" {
			t.Errorf("Bind of a range = %v", got)
		}
	})
	t.Run("string says the list", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			params Params
			want   string
		}{
			{nil, ""},
			{Params{Cutoff, Limit}, "$1 cutoff (timestamptz: the run's reference time minus the retention), $2 batch size (rows)"},
			{Params{Cutoff, FirstBlock, EndBlock, Left}, "$1 cutoff (timestamptz: the run's reference time minus the retention), $2 and $3 first and end block of the range (tid '(b,0)'), $4 rows max_rows leaves"},
			{Params{HeldKeys}, "$1 their keys"},
		} {
			if got := tt.params.String(); got != tt.want {
				t.Errorf("%v: %q, want %q", []Param(tt.params), got, tt.want)
			}
		}
	})
}

// forms are every form pass p renders for kind k, by name: its Set's, and for a pass with
// archive_to its archive's, its healing's and its foreign archive's.
func forms(p policy.Pass, k Kind) map[string]Form {
	out := map[string]Form{}
	batch := func(prefix string, b Batch) {
		out[prefix+".Range"], out[prefix+".Tail"], out[prefix+".Index"] = b.Range, b.Tail, b.Index
		out[prefix+".IndexAfter"], out[prefix+".Heap"] = b.IndexAfter, b.Heap
	}
	set := Build(p, k)
	batch("Unlocked", set.Unlocked)
	batch("Locked", set.Locked)
	for name, f := range map[string]Form{"Bound": set.Bound, "BoundAfter": set.BoundAfter, "Single": set.Single,
		"PerRow": set.PerRow, "Count": set.Count, "Probe": set.Probe, "Estimate": set.Estimate, "Total": set.Total} {
		out[name] = f
	}
	if p.ArchiveTo == "" {
		return out
	}
	a := BuildArchive(p, k, goldenColumns, "id", "bigint")
	batch("Archive.Unlocked", a.Unlocked)
	batch("Archive.Locked", a.Locked)
	out["Archive.Single"], out["Archive.Proof"] = a.Single, a.Proof
	h := BuildHeal(p, k, goldenColumns, "id", "bigint")
	batch("Heal.Unlocked", h.Unlocked)
	batch("Heal.Locked", h.Locked)
	out["Heal.Single"], out["Heal.Held"] = h.Single, h.Held
	return out
}
