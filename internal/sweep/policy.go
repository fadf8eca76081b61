package sweep

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/sweeprail/sweeprail/internal/config"
)

// catalogYAML is the bundled policy: the sweeps of DESIGN.md over the reference schema.
//
//go:embed catalog.yaml
var catalogYAML []byte

// DefaultPolicyFile is the bundled policy's name, as its messages cite it.
const DefaultPolicyFile = "catalog.yaml"

// The bounds of a pass's batch_size: those of a request's batchSize (DESIGN.md).
const (
	minPassBatchSize = 1
	maxPassBatchSize = 50000
)

// The keys a policy may hold, per level. Anything else is refused, so a typo ("age_colum") is an
// error rather than a silently ignored line.
const (
	keysTop   = "sweeps"
	keysSweep = "name passes"
	keysPass  = "name table age_column retention where keep_while_referenced_by mode function key_column batch_size max_batches allow_unindexed"
	keysGuard = "table column references"
)

// Policy is a policy file after LoadPolicy: the sweeps it declares, ready for NewRunner, and the
// line of each field, so that CheckPolicy's findings against the live schema point at the line to
// change. Lines are keyed by sweep and pass names, which LoadPolicy proved unique, so a copy of
// Specs with other retentions (WithRetention) keeps its lines.
type Policy struct {
	// File names the policy in messages: the path as given, or DefaultPolicyFile.
	File string
	// Specs are the sweeps in file order, statically valid.
	Specs []Spec
	lines map[fieldKey]int
}

// fieldKey locates one field: field "" is the sweep's or pass's own mapping; guards are
// "guard.<i>" and "guard.<i>.<key>".
type fieldKey struct{ sweep, pass, field string }

// line returns the line of a field, falling back to its pass, then its sweep; 0 when unknown
// (specs built in Go carry no lines).
func (p *Policy) line(sweep, pass, field string) int {
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

// PolicyError is one problem of a policy, located so that the operator can find what to change:
// the file and line, the sweep and pass, and what is wrong, with what to do about it.
type PolicyError struct {
	File  string
	Line  int
	Sweep string
	Pass  string
	Err   error
}

// Error formats the problem as `file:line: pass "p" of sweep "s": what is wrong`, leaving out
// what is unknown.
func (e *PolicyError) Error() string {
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
func (e *PolicyError) Unwrap() error { return e.Err }

// DefaultPolicy returns the bundled policy. It panics if the embedded file does not load: that is
// a build that must not ship, and a test loads the file so that it never does.
func DefaultPolicy() *Policy {
	return mustLoadPolicy(DefaultPolicyFile, catalogYAML)
}

func mustLoadPolicy(name string, data []byte) *Policy {
	p, err := LoadPolicy(name, data)
	if err != nil {
		panic(fmt.Sprintf("sweep: the bundled policy does not load (a programming error):\n%v", err))
	}
	return p
}

// LoadPolicyFile loads the policy file at path, or the bundled policy when path is empty (an
// unset SWEEP_POLICY_FILE).
func LoadPolicyFile(path string) (*Policy, error) {
	if path == "" {
		return DefaultPolicy(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	return LoadPolicy(path, data)
}

// LoadPolicy parses the policy file data, named name in messages, and validates it without a
// database: strict YAML (unknown keys, wrong types and duplicate keys are refused), names unique
// and URL-safe, retentions at or above MinRetention, modes consistent with their fields, and the
// shape of each where condition (see checkCondition). It reports every problem at once, each a
// *PolicyError with its line; the error is an errors.Join of them.
func LoadPolicy(name string, data []byte) (*Policy, error) {
	l := &loader{pol: &Policy{File: name, lines: map[fieldKey]int{}}}
	if root := l.parse(data); root != nil {
		l.top(root)
	}
	if len(l.errs) > 0 {
		return nil, errors.Join(l.errs...)
	}
	// The engine's own gate, as a backstop: the checks above are meant to be a superset of it, so
	// this refuses only if they drift apart.
	if err := Validate(l.pol.Specs); err != nil {
		return nil, &PolicyError{File: name, Err: err}
	}
	return l.pol, nil
}

// loader walks the YAML tree by hand rather than decoding into structs: that is what gives every
// message its line, and what lets unknown and duplicate keys be refused (yaml.v3's Node does not
// refuse duplicates, and KnownFields would stop at the first problem).
type loader struct {
	pol  *Policy
	errs []error
}

func (l *loader) fail(line int, sweep, pass string, err error) {
	l.errs = append(l.errs, &PolicyError{File: l.pol.File, Line: line, Sweep: sweep, Pass: pass, Err: err})
}

func (l *loader) failf(line int, sweep, pass, format string, args ...any) {
	l.fail(line, sweep, pass, fmt.Errorf(format, args...))
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parse returns the root node of data's single YAML document, or nil after recording why not.
func (l *loader) parse(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			l.failf(0, "", "", "the policy is empty: want a top-level sweeps: list")
		} else {
			l.yamlError(err, data)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		l.yamlError(err, data)
		return nil
	default:
		// A second document would be silently ignored by a decoder that reads one: refuse it.
		l.failf(extra.Line, "", "", "a second YAML document (---) starts here: a policy is one document; merge its sweeps into one sweeps: list")
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		l.failf(0, "", "", "the policy is empty: want a top-level sweeps: list")
		return nil
	}
	return doc.Content[0]
}

// yamlParserProblems are the messages of yaml.v3's parser (as opposed to its scanner), whose
// "line N" counts from 0 and points at the start of the construct the problem is in.
const yamlParserProblems = "\x00did not find expected <stream-start>\x00did not find expected <document start>\x00found undefined tag handle" +
	"\x00did not find expected node content\x00did not find expected '-' indicator\x00did not find expected key" +
	"\x00did not find expected ',' or ']'\x00did not find expected ',' or '}'\x00found duplicate %YAML directive" +
	"\x00found incompatible YAML document\x00found duplicate %TAG directive\x00"

// yamlError records a syntax error with its line. yaml.v3 says "yaml: line N: msg", N counted
// from 1 for scanner errors, from 0 for parser errors, and left out when it is 0; a tab in the
// indentation is looked up, since its line is the one to fix.
func (l *loader) yamlError(err error, data []byte) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if strings.Contains(yamlParserProblems, "\x00"+msg+"\x00") {
		line++
	}
	line = max(line, 1)
	if strings.Contains(msg, "cannot start any token") || strings.Contains(msg, "tab character") {
		for i, text := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimLeft(text, " "), "\t") {
				l.failf(i+1, "", "", "malformed YAML: %s: a tab in the indentation; YAML indents with spaces only", msg)
				return
			}
		}
	}
	l.failf(line, "", "", "malformed YAML: %s", msg)
}

func (l *loader) top(root *yaml.Node) {
	if root.Kind != yaml.MappingNode {
		l.failf(root.Line, "", "", "the top level is %s: want a mapping with a sweeps: list", describe(root))
		return
	}
	f := l.fields(root, "", "", "the top level", keysTop)
	sweeps, ok := f["sweeps"]
	switch {
	case !ok:
		l.failf(root.Line, "", "", "no sweeps: key: want a top-level sweeps: list")
		return
	case sweeps.Kind != yaml.SequenceNode:
		l.failf(sweeps.Line, "", "", "sweeps is %s: want a list of sweeps (- name: …)", describe(sweeps))
		return
	case len(sweeps.Content) == 0:
		l.failf(sweeps.Line, "", "", "sweeps is empty: declare at least one sweep")
		return
	}
	seen := map[string]int{}
	for _, n := range sweeps.Content {
		l.sweep(n, seen)
	}
}

func (l *loader) sweep(n *yaml.Node, seen map[string]int) {
	if n.Kind != yaml.MappingNode {
		l.failf(n.Line, "", "", "a sweep is %s: want a mapping with name and passes", describe(n))
		return
	}
	// The name first, so that every later message can say which sweep it is about.
	f := l.fields(n, peekName(n), "", "a sweep", keysSweep)
	name, _ := l.str(f, "name", "", "", true, n.Line)
	first := false
	if name != "" {
		if !nameRE.MatchString(name) {
			l.failf(f["name"].Line, name, "", "the name must be lower-case letters, digits and single dashes, such as expired-sessions: it is the route POST /internal/sweep-<name>")
		}
		if at, dup := seen[name]; dup {
			l.failf(f["name"].Line, name, "", "the name is used twice (first at line %d): each sweep is its own route; rename one", at)
		} else {
			seen[name], first = f["name"].Line, true
			l.pol.lines[fieldKey{name, "", ""}] = n.Line
		}
	}
	spec := Spec{Name: name}
	passes, ok := f["passes"]
	switch {
	case !ok:
		l.failf(n.Line, name, "", "no passes: key: a sweep needs at least one pass")
	case passes.Kind != yaml.SequenceNode:
		l.failf(passes.Line, name, "", "passes is %s: want a list of passes (- name: …)", describe(passes))
	case len(passes.Content) == 0:
		l.failf(passes.Line, name, "", "passes is empty: a sweep needs at least one pass")
	default:
		passSeen := map[string]int{}
		for _, pn := range passes.Content {
			if p, ok := l.pass(pn, name, first, passSeen); ok {
				spec.Passes = append(spec.Passes, p)
			}
		}
	}
	l.pol.Specs = append(l.pol.Specs, spec)
}

// pass reads one pass of sweep; record says whether its lines may be recorded (not for a
// duplicate sweep, whose lines would overwrite the first's).
func (l *loader) pass(n *yaml.Node, sweep string, record bool, seen map[string]int) (Pass, bool) {
	if n.Kind != yaml.MappingNode {
		l.failf(n.Line, sweep, "", "a pass is %s: want a mapping with name, table, age_column and retention", describe(n))
		return Pass{}, false
	}
	before := len(l.errs)
	f := l.fields(n, sweep, peekName(n), "a pass", keysPass)
	var p Pass
	p.Name, _ = l.str(f, "name", sweep, "", true, n.Line)
	if p.Name != "" {
		if !nameRE.MatchString(p.Name) {
			l.failf(f["name"].Line, sweep, p.Name, "the name must be lower-case letters, digits and single dashes, such as expired: it labels metrics and answers")
		}
		if at, dup := seen[p.Name]; dup {
			l.failf(f["name"].Line, sweep, p.Name, "the name is used twice in this sweep (first at line %d); rename one", at)
			record = false
		} else {
			seen[p.Name] = f["name"].Line
		}
	}
	// fail and lines from here on name the pass.
	fail := func(field, format string, args ...any) {
		line := n.Line
		if v, ok := f[field]; ok {
			line = v.Line
		}
		l.failf(line, sweep, p.Name, format, args...)
	}
	if record {
		l.pol.lines[fieldKey{sweep, p.Name, ""}] = n.Line
		for k, v := range f {
			l.pol.lines[fieldKey{sweep, p.Name, k}] = v.Line
		}
	}

	var ok bool
	if p.Table, ok = l.str(f, "table", sweep, p.Name, true, n.Line); ok {
		if err := checkRelationName(p.Table); err != nil {
			fail("table", "table %q: %v", p.Table, err)
		}
	}
	if p.AgeColumn, ok = l.str(f, "age_column", sweep, p.Name, true, n.Line); ok {
		if err := checkColumnName(p.AgeColumn); err != nil {
			fail("age_column", "age_column %q: %v", p.AgeColumn, err)
		}
	}
	if v, ok := f["retention"]; !ok {
		fail("retention", "retention is required (such as 30d or 48h): a window by default would be a guess")
	} else if d, err := retention(v); err != nil {
		fail("retention", "%v", err)
	} else {
		p.Retention = d
	}
	if w, ok := l.str(f, "where", sweep, p.Name, false, n.Line); ok {
		p.Where = strings.TrimSpace(w)
		for _, problem := range checkCondition(p.Where) {
			fail("where", "where: %s", problem)
		}
	}
	if g, ok := f["keep_while_referenced_by"]; ok {
		p.Guards = l.guards(g, sweep, p.Name, record)
	}

	p.Mode = ModeBatched
	if m, ok := l.str(f, "mode", sweep, p.Name, false, n.Line); ok {
		switch Mode(m) {
		case ModeBatched, ModeSingle, ModePerRow:
			p.Mode = Mode(m)
		default:
			fail("mode", "unknown mode %q: want batched (the default), single or per-row", m)
		}
	}
	if p.Function, ok = l.str(f, "function", sweep, p.Name, false, n.Line); ok {
		if err := checkRelationName(p.Function); err != nil {
			fail("function", "function %q: %v", p.Function, err)
		}
	}
	if p.KeyColumn, ok = l.str(f, "key_column", sweep, p.Name, false, n.Line); ok {
		if err := checkColumnName(p.KeyColumn); err != nil {
			fail("key_column", "key_column %q: %v", p.KeyColumn, err)
		}
	}
	switch {
	case p.Mode == ModePerRow && p.Function == "":
		fail("mode", "mode per-row needs a function: the SQL function called once per eligible row with its key_column (default id)")
	case p.Mode != ModePerRow && p.Function != "":
		fail("function", "function is only for mode per-row (this pass is %s): set mode: per-row, or remove function", p.Mode)
	case p.Mode != ModePerRow && p.KeyColumn != "":
		fail("key_column", "key_column is only for mode per-row (this pass is %s): remove it", p.Mode)
	}

	if v, ok := l.integer(f, "batch_size", sweep, p.Name); ok {
		switch {
		case p.Mode != ModeBatched:
			fail("batch_size", "batch_size has no effect in mode %s (%s): remove it", p.Mode, modeBatching(p.Mode))
		case v < minPassBatchSize || v > maxPassBatchSize:
			fail("batch_size", "batch_size %d is out of range: want %d to %d, or leave it out for the server's BATCH_SIZE", v, minPassBatchSize, maxPassBatchSize)
		default:
			p.BatchSize = v
		}
	}
	if v, ok := l.integer(f, "max_batches", sweep, p.Name); ok {
		switch {
		case p.Mode == ModeSingle:
			fail("max_batches", "max_batches has no effect in mode single (%s): remove it", modeBatching(p.Mode))
		case v < 1:
			fail("max_batches", "max_batches %d must be at least 1, or leave it out for the server's MAX_BATCHES", v)
		default:
			p.MaxBatches = v
		}
	}
	if v, ok := f["allow_unindexed"]; ok {
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
			fail("allow_unindexed", "allow_unindexed is %s: want true or false", describe(v))
		} else if err := v.Decode(&p.AllowUnindexed); err != nil {
			fail("allow_unindexed", "allow_unindexed: %v", err)
		}
	}
	return p, len(l.errs) == before
}

func modeBatching(m Mode) string {
	if m == ModeSingle {
		return "one statement deletes every eligible row"
	}
	return "one row per call; max_batches caps the calls"
}

// guards reads keep_while_referenced_by: a list of {table, column, references}.
func (l *loader) guards(n *yaml.Node, sweep, pass string, record bool) []Guard {
	if n.Kind != yaml.SequenceNode {
		l.failf(n.Line, sweep, pass, "keep_while_referenced_by is %s: want a list of {table, column, references}", describe(n))
		return nil
	}
	var out []Guard
	for i, gn := range n.Content {
		if gn.Kind != yaml.MappingNode {
			l.failf(gn.Line, sweep, pass, "a keep guard is %s: want a mapping with table, column and optionally references", describe(gn))
			continue
		}
		f := l.fields(gn, sweep, pass, "a keep guard", keysGuard)
		key := fmt.Sprintf("guard.%d", i)
		if record {
			l.pol.lines[fieldKey{sweep, pass, key}] = gn.Line
			for k, v := range f {
				l.pol.lines[fieldKey{sweep, pass, key + "." + k}] = v.Line
			}
		}
		g := Guard{References: "id"}
		var ok bool
		if g.Table, ok = l.str(f, "table", sweep, pass, true, gn.Line); ok {
			if err := checkRelationName(g.Table); err != nil {
				l.failf(f["table"].Line, sweep, pass, "keep guard table %q: %v", g.Table, err)
			}
		}
		if g.Column, ok = l.str(f, "column", sweep, pass, true, gn.Line); ok {
			if err := checkColumnName(g.Column); err != nil {
				l.failf(f["column"].Line, sweep, pass, "keep guard column %q: %v", g.Column, err)
			}
		}
		if r, ok := l.str(f, "references", sweep, pass, false, gn.Line); ok {
			if err := checkColumnName(r); err != nil {
				l.failf(f["references"].Line, sweep, pass, "keep guard references %q: %v", r, err)
			}
			g.References = r
		}
		out = append(out, g)
	}
	return out
}

// peekName returns the string value of n's name key, to label the messages about n's other keys,
// which are read with it.
func peekName(n *yaml.Node) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Value == "name" && v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" {
			return v.Value
		}
	}
	return ""
}

// fields reads mapping n strictly: every key known, none given twice. It returns the value node of
// each key present, aliases resolved.
func (l *loader) fields(n *yaml.Node, sweep, pass, what, known string) map[string]*yaml.Node {
	keys := strings.Fields(known)
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			l.failf(k.Line, sweep, pass, "a key of %s is %s: want one of %s", what, describe(k), strings.Join(keys, ", "))
			continue
		}
		if !slices.Contains(keys, k.Value) {
			msg := fmt.Sprintf("unknown key %q in %s", k.Value, what)
			if k.Value == "<<" {
				msg = fmt.Sprintf("merge keys (<<) are not supported in %s: write the keys out", what)
			} else if s := closest(k.Value, keys); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			l.failf(k.Line, sweep, pass, "%s; the keys are: %s", msg, strings.Join(keys, ", "))
			continue
		}
		if prev, dup := out[k.Value]; dup {
			// Which of two values was meant is a guess we refuse to make.
			l.failf(k.Line, sweep, pass, "key %q is given twice in %s (first at line %d): keep one", k.Value, what, prev.Line)
			continue
		}
		// An alias stands for its anchored value, which is read (and checked) here as if written
		// out: a list of keep guards shared by passes, say.
		for v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		out[k.Value] = v
	}
	return out
}

// str reads the string field key of f. A missing required field is recorded against the line of
// its mapping; a value of another type (a number, a list, nothing) is refused, not converted.
func (l *loader) str(f map[string]*yaml.Node, key, sweep, pass string, required bool, line int) (string, bool) {
	v, ok := f[key]
	if !ok {
		if required {
			l.failf(line, sweep, pass, "%s is required", key)
		}
		return "", false
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		l.failf(v.Line, sweep, pass, "%s is %s: want a string (quote it if it looks like another type)", key, describe(v))
		return "", false
	}
	if strings.TrimSpace(v.Value) == "" {
		l.failf(v.Line, sweep, pass, "%s is an empty string: give a value or remove the key", key)
		return "", false
	}
	return v.Value, true
}

func (l *loader) integer(f map[string]*yaml.Node, key, sweep, pass string) (int, bool) {
	v, ok := f[key]
	if !ok {
		return 0, false
	}
	var n int
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		l.failf(v.Line, sweep, pass, "%s is %s: want a whole number", key, describe(v))
		return 0, false
	}
	if err := v.Decode(&n); err != nil {
		l.failf(v.Line, sweep, pass, "%s %s: %v", key, v.Value, err)
		return 0, false
	}
	return n, true
}

// retention reads a retention window: whole days ("30d") or a Go duration ("48h"), at or above
// MinRetention. A bare 0 is a YAML number, and is read as the zero window it means, to be refused
// for what it is rather than for its type.
func retention(v *yaml.Node) (time.Duration, error) {
	if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!str" && v.ShortTag() != "!!int" && v.ShortTag() != "!!float") {
		return 0, fmt.Errorf("retention is %s: want a window such as 30d or 48h", describe(v))
	}
	d, err := config.ParseDays(v.Value)
	if err != nil {
		return 0, fmt.Errorf("retention: %w", err)
	}
	floor := fmt.Sprintf("the floor of %s", formatDuration(MinRetention))
	switch {
	case d == 0:
		return 0, fmt.Errorf("retention %s is below %s: a zero window makes every row eligible and would delete live data", v.Value, floor)
	case d < 0:
		return 0, fmt.Errorf("retention %s is below %s: a negative window puts the cutoff in the future and would delete live data", v.Value, floor)
	case d < MinRetention:
		hint := "write a longer window"
		if n, ok := strings.CutSuffix(v.Value, "m"); ok {
			hint = fmt.Sprintf("did you mean %sd?", n)
		}
		return 0, fmt.Errorf("retention %s is below %s: a window that short would delete live data; %s", v.Value, floor, hint)
	}
	return d, nil
}

// formatDuration writes d as a policy would: whole days as "30d", whole hours as "48h".
func formatDuration(d time.Duration) string {
	switch {
	case d != 0 && d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	case d != 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}

// describe names a node's type for a message: "a number (5)", "a list", "empty".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias (*" + n.Value + ")"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "empty"
		case "!!int", "!!float":
			return fmt.Sprintf("a number (%s)", n.Value)
		case "!!bool":
			return fmt.Sprintf("a boolean (%s)", n.Value)
		case "!!str":
			return fmt.Sprintf("a string (%q)", n.Value)
		}
		return fmt.Sprintf("a %s (%s)", n.ShortTag(), n.Value)
	}
	return "not a value"
}

// closest returns the known key nearest to key, for "did you mean": same words ignoring case and
// underscores (ageColumn), or at most two edits away (age_colum).
func closest(key string, known []string) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	best, bestDist := "", 3
	for _, k := range known {
		if norm(k) == norm(key) {
			return k
		}
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
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
		return errors.New("the name holds a control character")
	}
	return nil
}

// checkCondition checks the shape of a where condition, which is SQL inserted into our statements
// as "(<where>) AND t.<age> < $1 …". It cannot prove the condition harmless (CheckPolicy compiles
// it against the schema), but it refuses everything that could make it more than one boolean
// expression inside those parentheses:
//   - ';': it would end our statement and start another ("true; DROP TABLE x");
//   - comments (-- and /*): they would swallow the rest of our statement, cutoff included;
//   - a ')' closing a parenthesis it did not open: "true) OR (true" would escape our parentheses
//     and OR past the age test, widening the delete to every row;
//   - '$' (dollar quoting, and parameters: $1 is the cutoff, $2 the batch size);
//   - an unterminated string or quoted identifier, and a backslash in a plain '…' string, which
//     means something else when standard_conforming_strings is off (write E'…' for escapes).
//
// Quotes are followed as PostgreSQL's lexer follows them (a doubled quote inside a '…' string or
// a "…" identifier, a backslash escape inside E'…'), so these characters are allowed inside a
// string or quoted identifier. It returns one message per kind of problem; none when the shape is
// sound.
func checkCondition(where string) []string {
	_, problems := scanCondition(where)
	return problems
}

// scanCondition lexes where as checkCondition describes, and returns for each byte its
// parenthesis depth, or -1 inside a string or quoted identifier.
func scanCondition(where string) (depths []int, problems []string) {
	seen := map[string]bool{}
	add := func(msg string) {
		if !seen[msg] {
			seen[msg] = true
			problems = append(problems, msg)
		}
	}
	if strings.TrimSpace(where) == "" {
		return nil, []string{"the condition is empty: remove where, or write a condition"}
	}
	const (
		code = iota
		plain
		escaped
		ident
	)
	state, depth, stray := code, 0, false
	depths = make([]int, len(where))
	isWord := func(b byte) bool {
		return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
	}
	for i := 0; i < len(where); i++ {
		c := where[i]
		depths[i] = -1
		switch state {
		case plain:
			switch {
			case c == '\'' && i+1 < len(where) && where[i+1] == '\'':
				depths[i+1] = -1
				i++
			case c == '\'':
				state = code
			case c == '\\':
				add(`a backslash in a plain '…' string: its meaning depends on standard_conforming_strings; write E'…' for escapes`)
			}
		case escaped:
			switch {
			case c == '\\' && i+1 < len(where):
				depths[i+1] = -1
				i++
			case c == '\'' && i+1 < len(where) && where[i+1] == '\'':
				depths[i+1] = -1
				i++
			case c == '\'':
				state = code
			}
		case ident:
			switch {
			case c == '"' && i+1 < len(where) && where[i+1] == '"':
				depths[i+1] = -1
				i++
			case c == '"':
				state = code
			}
		default:
			switch {
			case c == '\'':
				// E'…' only when the E starts a word: "type'x'" is the word type and a string.
				if i > 0 && (where[i-1] == 'e' || where[i-1] == 'E') && (i == 1 || !isWord(where[i-2])) {
					state = escaped
				} else {
					state = plain
				}
			case c == '"':
				state = ident
			case c == ';':
				add("';' is refused: a condition cannot end our statement and start another")
			case c == '-' && i+1 < len(where) && where[i+1] == '-', c == '/' && i+1 < len(where) && where[i+1] == '*':
				add("comments (-- and /*) are refused: one would swallow the rest of our statement, the age test included")
			case c == '$':
				add("'$' is refused outside quotes: dollar quoting could hide the end of the condition, and $1 and $2 are the cutoff and the batch size; quote an identifier that holds a $")
			case c == '(':
				depth++
				depths[i] = depth
			case c == ')':
				depths[i] = depth
				depth--
				if depth < 0 {
					add("a ')' closes a parenthesis the condition did not open: the condition is wrapped in parentheses and ANDed with the age test, and escaping them (true) OR (true) would widen the delete to every row")
					depth, stray = 0, true
				}
			case c < 0x20 && c != '\t' && c != '\n' && c != '\r':
				add("a control character is refused")
			default:
				depths[i] = depth
			}
		}
	}
	switch state {
	case plain, escaped:
		add("a string literal is not closed: a ' is missing")
	case ident:
		add(`a quoted identifier is not closed: a " is missing`)
	}
	if depth > 0 && !stray { // after a stray ')', the count of '(' says nothing more
		add(fmt.Sprintf("%d '(' not closed: the parentheses must balance inside the condition", depth))
	}
	return depths, problems
}
