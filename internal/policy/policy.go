package policy

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"
)

// catalogYAML is the bundled policy: the sweeps of docs/DESIGN.md over the reference schema.
//
//go:embed catalog.yaml
var catalogYAML []byte

// DefaultFile is the bundled policy's name, as its messages cite it.
const DefaultFile = "catalog.yaml"

// The keys a policy may hold, per level. Anything else is refused, so a typo ("age_colum") is an
// error rather than a silently ignored line.
const (
	keysTop   = "sweeps"
	keysSweep = "name passes"
	keysPass  = "name table age_column age_unit retention min_retention expiry time_zone where keep_while_referenced_by delete_with cascades mode function key_column batch_size max_batches max_rows allow_unindexed allow_short_retention keep_detached boundary archive_to archive_schema"
	keysGuard = "table column references where without_foreign_key"
	keysChild = "table column references without_foreign_key"
)

// Policy is a policy file after Load: the sweeps it declares, ready for NewRunner, and the line
// of each field, so that the live-schema check's findings point at the line to change. Lines are
// keyed by sweep and pass names, which Load proved unique, so a copy of Specs with other
// retentions (WithRetention) keeps its lines.
type Policy struct {
	// File names the policy in messages: the path as given, or DefaultFile.
	File string
	// Specs are the sweeps in file order, statically valid.
	Specs []Spec
	lines map[fieldKey]int
}

// fieldKey locates one field: field "" is the sweep's or pass's own mapping; guards are
// "guard.<i>" and "guard.<i>.<key>", delete_with's children "delete_with.<i>" and
// "delete_with.<i>.<key>", cascades' tables "cascades.<i>".
type fieldKey struct{ sweep, pass, field string }

// Line returns the line of a field, falling back to its pass, then its sweep; 0 when unknown
// (specs built in Go carry no lines).
func (p *Policy) Line(sweep, pass, field string) int {
	if p == nil {
		return 0
	}
	for _, k := range []fieldKey{{sweep, pass, field}, {sweep, pass, ""}, {sweep, "", ""}} {
		if l, ok := p.lines[k]; ok {
			return l
		}
	}
	return 0
}

// Error is one problem of a policy, located so that the operator can find what to change:
// the file and line, the sweep and pass, and what is wrong, with what to do about it.
type Error struct {
	File  string
	Line  int
	Sweep string
	Pass  string
	Err   error
}

// Error formats the problem as `file:line: pass "p" of sweep "s": what is wrong`, leaving out
// what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	switch {
	case e.Pass != "" && e.Sweep != "":
		fmt.Fprintf(&b, "pass %q of sweep %q: ", e.Pass, e.Sweep)
	case e.Pass != "":
		fmt.Fprintf(&b, "pass %q: ", e.Pass)
	case e.Sweep != "":
		fmt.Fprintf(&b, "sweep %q: ", e.Sweep)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the problem itself.
func (e *Error) Unwrap() error { return e.Err }

// Default returns the bundled policy. It panics if the embedded file does not load: that is
// a build that must not ship, and a test loads the file so that it never does.
func Default() *Policy {
	return mustLoad(DefaultFile, catalogYAML)
}

func mustLoad(name string, data []byte) *Policy {
	p, err := Load(name, data)
	if err != nil {
		panic(fmt.Sprintf("policy: the bundled policy does not load (a programming error):\n%v", err))
	}
	return p
}

// LoadFile loads the policy file at path, or the bundled policy when path is empty (an
// unset SWEEP_POLICY_FILE).
func LoadFile(path string) (*Policy, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	return Load(path, data)
}

// Load parses the policy file data, named name in messages, and validates it without a
// database: strict YAML (unknown keys, wrong types and duplicate keys are refused), names unique
// and URL-safe, retentions at or above MinRetention (any grace from zero for an expiry column),
// modes consistent with their fields, and the shape of each where condition, a keep guard's
// included (see checkCondition). It reports every problem at once, each a *Error with its
// line; the error is an errors.Join of them.
func Load(name string, data []byte) (*Policy, error) {
	l := &loader{pol: &Policy{File: name, lines: map[fieldKey]int{}}}
	if root := l.parse(data); root != nil {
		l.top(root)
	}
	if len(l.errs) > 0 {
		return nil, errors.Join(l.errs...)
	}
	// The whole-spec checks, as a backstop: the loader ran validatePass on every pass already, so
	// this refuses only what it cannot see pass by pass.
	if err := Validate(l.pol.Specs); err != nil {
		return nil, &Error{File: name, Err: err}
	}
	l.pol.Specs = Normalize(l.pol.Specs)
	return l.pol, nil
}
