package policy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
)

// MinRetention is the floor below which a retention is refused: a window that short would delete
// live data, and is far more likely a typo ("5m" for "5d") than a wish.
const MinRetention = time.Hour

// MinShortRetention is the floor for a pass that says allow_short_retention: job queues keep
// finished jobs for a minute or so, and say so on purpose.
const MinShortRetention = time.Minute

const day = 24 * time.Hour

var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// problem is one broken rule: the policy field it is about ("" for the pass or sweep itself;
// "guard.<i>" and "guard.<i>.<key>" for keep guards), so that the loader and the schema check can
// put the field's line in front of it, and what is wrong, with what to do about it.
type problem struct {
	sweep, pass, field string
	msg                string
}

// checkSweepName says why a sweep name is refused, or "" when it is not.
func checkSweepName(name string) string {
	if nameRE.MatchString(name) {
		return ""
	}
	return "the name must be lower-case letters, digits and single dashes, such as expired-sessions: it is the route POST /internal/sweep-<name>"
}

// validateSpecs checks specs whole: each sweep's name and passes, names unique, and every pass by
// validatePass. Problems come in spec order.
func validateSpecs(specs []Spec) []problem {
	var out []problem
	seen := map[string]bool{}
	for _, s := range specs {
		if msg := checkSweepName(s.Name); msg != "" {
			out = append(out, problem{sweep: s.Name, field: "name", msg: msg})
		}
		if seen[s.Name] {
			out = append(out, problem{sweep: s.Name, field: "name", msg: "the name is used twice: each sweep is its own route; rename one"})
		}
		seen[s.Name] = true
		if len(s.Passes) == 0 {
			out = append(out, problem{sweep: s.Name, msg: "no passes: a sweep needs at least one pass"})
		}
		passSeen := map[string]bool{}
		for _, p := range s.Passes {
			if passSeen[p.Name] {
				out = append(out, problem{sweep: s.Name, pass: p.Name, field: "name", msg: "the name is used twice in this sweep; rename one"})
			}
			passSeen[p.Name] = true
			for _, pr := range validatePass(p) {
				pr.sweep, pr.pass = s.Name, p.Name
				out = append(out, pr)
			}
		}
	}
	return out
}

// Validate checks specs for what would make a sweep unsafe or unservable: names that are not
// URL-safe or not unique, a retention below MinRetention (or a negative grace after an expiry), a
// missing table or age column, fields that do not fit the pass's mode, a where condition (a keep
// guard's too) that is not one boolean expression, a time zone that is no zone name, a child
// listed twice. It reports every problem at once, each a *Error without a file.
func Validate(specs []Spec) error {
	var errs []error
	for _, pr := range validateSpecs(specs) {
		errs = append(errs, &Error{Sweep: pr.sweep, Pass: pr.pass, Err: errors.New(pr.msg)})
	}
	return errors.Join(errs...)
}

// Problems is Validate's findings for the policy, each an *Error located at its field's line:
// what the live-schema check repeats before it sends any of the policy to the server.
func (p *Policy) Problems() []error {
	var errs []error
	for _, pr := range validateSpecs(p.Specs) {
		errs = append(errs, &Error{File: p.File, Line: p.Line(pr.sweep, pr.pass, pr.field), Sweep: pr.sweep, Pass: pr.pass, Err: errors.New(pr.msg)})
	}
	return errs
}

// Normalize returns a copy of specs with the defaults spelled out: an empty mode is batched, an
// empty time zone UTC, a keep guard's or child's empty references id. Everything downstream (the statements, the catalog answer,
// the policy check) reads the normalized form, so the defaults live here alone.
func Normalize(specs []Spec) []Spec {
	out := make([]Spec, len(specs))
	for i, s := range specs {
		out[i] = Spec{Name: s.Name, Passes: slices.Clone(s.Passes)}
		for j := range out[i].Passes {
			p := &out[i].Passes[j]
			if p.Mode == "" {
				p.Mode = ModeBatched
			}
			if p.TimeZone == "" {
				p.TimeZone = TimeZoneUTC
			}
			if p.Mode == ModePartitions && p.Boundary == "" {
				p.Boundary = BoundaryDelete
			}
			p.Guards = slices.Clone(p.Guards)
			for k := range p.Guards {
				p.Guards[k].References = slices.Clone(Refs(p.Guards[k].References))
			}
			p.DeleteWith = slices.Clone(p.DeleteWith)
			for k := range p.DeleteWith {
				p.DeleteWith[k].References = slices.Clone(Refs(p.DeleteWith[k].References))
			}
		}
	}
	return out
}

// WithRetention returns a copy of specs with the retentions of overrides, keyed "<sweep>.<pass>",
// and validates the result. An override naming no pass is an error, not ignored: a typo there
// would silently keep the default window.
func WithRetention(specs []Spec, overrides map[string]time.Duration) ([]Spec, error) {
	out := Normalize(specs)
	used := map[string]bool{}
	for i, s := range out {
		for j := range s.Passes {
			key := s.Name + "." + s.Passes[j].Name
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

// FormatRetention writes a retention window as a policy would: "30d", "48h", "5m", "90s", "0".
func FormatRetention(d time.Duration) string { return formatDuration(d) }

func formatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// checkRelationName checks a table or function name: name or schema.name. Each part is quoted
// as written (pgx.Identifier), so it is case-sensitive and may not hold quotes of its own.
func checkRelationName(s string) error {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return errors.New("want name or schema.name")
	}
	for _, p := range parts {
		if err := checkIdentifier(p); err != nil {
			return err
		}
	}
	return nil
}

func checkColumnName(s string) error {
	if strings.Contains(s, ".") {
		return errors.New("name the column alone, without a table, schema or alias")
	}
	return checkIdentifier(s)
}

func checkIdentifier(s string) error {
	switch {
	case s == "" || strings.TrimSpace(s) != s:
		return errors.New("an empty name, or blanks around it: want name or schema.name")
	case strings.ContainsRune(s, '"'):
		return errors.New(`write the name without quotes: sweeprail quotes every identifier itself, exactly as written (so it is case-sensitive)`)
	case strings.ContainsFunc(s, unicode.IsControl):
		return errors.New("the name holds a control character (a newline, a tab, an escape), which a SQL comment or a log line cannot carry on one line: rename the object, or point the policy at one whose name is printable")
	}
	return nil
}
