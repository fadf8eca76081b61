package sweep

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// MinRetention is the floor below which a retention is refused: a window that short would delete
// live data, and is far more likely a typo ("5m" for "5d") than a wish.
const MinRetention = time.Hour

const day = 24 * time.Hour

// Catalog returns the bundled sweeps over the reference schema, with their default retentions:
// the specs of the embedded catalog.yaml (see DefaultPolicy), a fresh copy on every call.
func Catalog() []Spec {
	return DefaultPolicy().Specs
}

var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Validate checks specs for what would make a sweep unsafe or unservable: names that are not
// URL-safe or not unique, a retention below MinRetention, a missing table or age column, a per-row
// pass without a function. It reports every problem at once.
func Validate(specs []Spec) error {
	var errs []error
	seen := map[string]bool{}
	for _, s := range specs {
		if !nameRE.MatchString(s.Name) {
			errs = append(errs, fmt.Errorf("sweep %q: name must be lower-case letters, digits and single dashes (it is a URL path)", s.Name))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("sweep %q: name used twice", s.Name))
		}
		seen[s.Name] = true
		if len(s.Passes) == 0 {
			errs = append(errs, fmt.Errorf("sweep %q: no passes", s.Name))
		}
		passSeen := map[string]bool{}
		for _, p := range s.Passes {
			where := fmt.Sprintf("pass %q of sweep %q", p.Name, s.Name)
			if !nameRE.MatchString(p.Name) {
				errs = append(errs, fmt.Errorf("%s: name must be lower-case letters, digits and single dashes", where))
			}
			if passSeen[p.Name] {
				errs = append(errs, fmt.Errorf("%s: name used twice", where))
			}
			passSeen[p.Name] = true
			if p.Retention < MinRetention {
				errs = append(errs, fmt.Errorf("%s: retention %s is below the floor of %s: it would delete live data", where, p.Retention, MinRetention))
			}
			if p.Table == "" || p.AgeColumn == "" {
				errs = append(errs, fmt.Errorf("%s: table and age column are required", where))
			}
			switch p.Mode {
			case "", ModeBatched, ModeSingle:
				if p.Function != "" {
					errs = append(errs, fmt.Errorf("%s: function is only for mode %q", where, ModePerRow))
				}
			case ModePerRow:
				if p.Function == "" {
					errs = append(errs, fmt.Errorf("%s: mode %q needs a function", where, ModePerRow))
				}
			default:
				errs = append(errs, fmt.Errorf("%s: unknown mode %q (want batched, single or per-row)", where, p.Mode))
			}
			if p.BatchSize < 0 || p.MaxBatches < 0 {
				errs = append(errs, fmt.Errorf("%s: batch size and max batches must not be negative", where))
			}
		}
	}
	return errors.Join(errs...)
}

// WithRetention returns a copy of specs with the retentions of overrides, keyed "<sweep>.<pass>",
// and validates the result. An override naming no pass is an error, not ignored: a typo there
// would silently keep the default window.
func WithRetention(specs []Spec, overrides map[string]time.Duration) ([]Spec, error) {
	out := make([]Spec, len(specs))
	used := map[string]bool{}
	for i, s := range specs {
		out[i] = Spec{Name: s.Name, Passes: slices.Clone(s.Passes)}
		for j := range out[i].Passes {
			key := s.Name + "." + out[i].Passes[j].Name
			if d, ok := overrides[key]; ok {
				out[i].Passes[j].Retention = d
				used[key] = true
			}
		}
	}
	var errs []error
	for key := range overrides {
		if !used[key] {
			errs = append(errs, fmt.Errorf("retention override %q names no pass (want <sweep>.<pass>, one of: %s)", key, strings.Join(passKeys(specs), ", ")))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	if err := Validate(out); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func passKeys(specs []Spec) []string {
	var keys []string
	for _, s := range specs {
		for _, p := range s.Passes {
			keys = append(keys, s.Name+"."+p.Name)
		}
	}
	return keys
}
