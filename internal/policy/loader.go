package policy

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// loader walks the YAML tree by hand rather than decoding into structs: that is what gives every
// message its line, and what lets unknown and duplicate keys be refused (yaml.v3's Node does not
// refuse duplicates, and KnownFields would stop at the first problem).
type loader struct {
	pol  *Policy
	errs []error
}

func (l *loader) fail(line int, sweep, pass string, err error) {
	l.errs = append(l.errs, &Error{File: l.pol.File, Line: line, Sweep: sweep, Pass: pass, Err: err})
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
	name, ok, refused := l.str(f, "name", "", "")
	if !ok && !refused {
		l.failf(n.Line, "", "", "name is required")
	}
	first := false
	if name != "" {
		if msg := checkSweepName(name); msg != "" {
			l.failf(f["name"].Line, name, "", "%s", msg)
		}
		if at, dup := seen[name]; dup {
			l.failf(f["name"].Line, name, "", "the name is used twice (first at line %d): each sweep is its own route; rename one", at)
		} else {
			seen[name], first = f["name"].Line, true
			l.pol.lines[fieldKey{name, "", ""}] = n.Line
		}
	}
	spec := Spec{Name: name}
	passes, hasPasses := f["passes"]
	switch {
	case !hasPasses:
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
// duplicate sweep, whose lines would overwrite the first's). The loader checks what only YAML can
// say (types, presence, duplicates); the rules on the values are validatePass's, given each
// field's line here.
func (l *loader) pass(n *yaml.Node, sweep string, record bool, seen map[string]int) (Pass, bool) {
	if n.Kind != yaml.MappingNode {
		l.failf(n.Line, sweep, "", "a pass is %s: want a mapping with name, table, age_column and retention", describe(n))
		return Pass{}, false
	}
	before := len(l.errs)
	r := &passReader{l: l, n: n, sweep: sweep, f: l.fields(n, sweep, peekName(n), "a pass", keysPass), bad: map[string]bool{}}
	var p Pass
	record = r.name(&p, record, seen)
	p.Table = r.str("table")
	p.AgeColumn = r.str("age_column")
	p.AgeUnit = r.str("age_unit")
	r.retentions(&p)
	p.Expiry = l.boolean(r.f, "expiry", sweep, p.Name)
	p.TimeZone = r.str("time_zone")
	p.Where = strings.TrimSpace(r.str("where"))
	if g, ok := r.f["keep_while_referenced_by"]; ok {
		p.Guards = l.guards(g, sweep, p.Name, record, r.bad)
	}
	if c, ok := r.f["delete_with"]; ok {
		p.DeleteWith = l.children(c, sweep, p.Name, record, r.bad)
	}
	if c, ok := r.f["cascades"]; ok {
		p.Cascades = l.tables(c, sweep, p.Name, record, r.bad)
	}
	p.Mode = ModeBatched
	if m := r.str("mode"); m != "" {
		p.Mode = Mode(m)
	}
	p.Function = r.str("function")
	p.KeyColumn = r.str("key_column")
	r.caps(&p)
	p.AllowUnindexed = l.boolean(r.f, "allow_unindexed", sweep, p.Name)
	p.AllowShortRetention = l.boolean(r.f, "allow_short_retention", sweep, p.Name)
	p.KeepDetached = l.boolean(r.f, "keep_detached", sweep, p.Name)
	p.ArchiveSchema = r.str("archive_schema")
	p.Boundary = r.str("boundary")
	p.ArchiveTo = r.str("archive_to")
	r.refuse(p, validatePass(p))
	return p, len(l.errs) == before
}

// passReader reads the fields of one pass's mapping n.
type passReader struct {
	l     *loader
	n     *yaml.Node
	sweep string
	f     map[string]*yaml.Node
	// bad holds the fields already refused here, whose value validatePass would only misread.
	bad map[string]bool
}

// str returns the string field key, "" when it is absent or refused.
func (r *passReader) str(key string) string {
	s, ok, refused := r.l.str(r.f, key, r.sweep, peekName(r.n))
	r.bad[key] = refused
	if !ok {
		return ""
	}
	return s
}

// line returns the line of field, or the pass's when the field is absent.
func (r *passReader) line(field string) int {
	if v, ok := r.f[field]; ok {
		return v.Line
	}
	return r.n.Line
}

// name reads the pass's name, refuses one used twice in the sweep, and records the lines of the
// pass and its fields when record allows; it returns record, false after a duplicate.
func (r *passReader) name(p *Pass, record bool, seen map[string]int) bool {
	p.Name = r.str("name")
	if _, ok := r.f["name"]; !ok {
		r.l.failf(r.n.Line, r.sweep, "", "name is required")
		r.bad["name"] = true
	}
	if at, dup := seen[p.Name]; dup && p.Name != "" {
		r.l.failf(r.f["name"].Line, r.sweep, p.Name, "the name is used twice in this sweep (first at line %d); rename one", at)
		record = false
	} else if p.Name != "" {
		seen[p.Name] = r.f["name"].Line
	}
	if record {
		r.l.pol.lines[fieldKey{r.sweep, p.Name, ""}] = r.n.Line
		for k, v := range r.f {
			r.l.pol.lines[fieldKey{r.sweep, p.Name, k}] = v.Line
		}
	}
	return record
}

// retentions reads retention, which is required, and min_retention.
func (r *passReader) retentions(p *Pass) {
	if v, ok := r.f["retention"]; !ok {
		r.l.failf(r.n.Line, r.sweep, p.Name, "retention is required (such as 30d or 48h): a window by default would be a guess")
		r.bad["retention"] = true
	} else if d, err := retention("retention", v); err != nil {
		r.l.failf(v.Line, r.sweep, p.Name, "%v", err)
		r.bad["retention"] = true
	} else {
		p.Retention = d
	}
	if v, ok := r.f["min_retention"]; ok {
		if d, err := retention("min_retention", v); err != nil {
			r.l.failf(v.Line, r.sweep, p.Name, "%v", err)
			r.bad["min_retention"] = true
		} else {
			p.MinRetention = d
		}
	}
}

// caps reads batch_size, max_batches and max_rows.
func (r *passReader) caps(p *Pass) {
	for _, key := range []string{"batch_size", "max_batches", "max_rows"} {
		v, ok, refused := r.l.integer(r.f, key, r.sweep, p.Name)
		r.bad[key] = refused
		switch {
		case !ok:
		case v == 0:
			// Zero is how a Pass says "the server's setting" (or no cap): validatePass would not
			// see it.
			check := map[string]func(Mode, int) string{"batch_size": checkBatchSize, "max_batches": checkMaxBatches, "max_rows": checkMaxRows}[key]
			if msg := check(cmp.Or(p.Mode, ModeBatched), 0); msg != "" {
				r.l.failf(r.line(key), r.sweep, p.Name, "%s", msg)
			}
			r.bad[key] = true
		case key == "batch_size":
			p.BatchSize = v
		case key == "max_batches":
			p.MaxBatches = v
		default:
			p.MaxRows = v
		}
	}
}

// refuse reports validatePass's problems with p, each at its field's line, but for the fields
// already refused while reading.
func (r *passReader) refuse(p Pass, found []problem) {
	for _, pr := range found {
		if r.bad[pr.field] {
			continue
		}
		lineOf := r.line(pr.field)
		if strings.HasPrefix(pr.field, "guard.") || strings.HasPrefix(pr.field, "delete_with.") || strings.HasPrefix(pr.field, "cascades.") {
			if lineOf = r.l.pol.Line(r.sweep, p.Name, pr.field); lineOf == 0 {
				lineOf = r.n.Line
			}
		}
		r.l.failf(lineOf, r.sweep, p.Name, "%s", pr.msg)
	}
}

// guards reads keep_while_referenced_by: a list of {table, column, references, where,
// without_foreign_key}. A guard field refused for its type is marked in bad as "guard.<i>.<key>".
func (l *loader) guards(n *yaml.Node, sweep, pass string, record bool, bad map[string]bool) []Guard {
	var out []Guard
	l.references(n, sweep, pass, record, bad, "keep_while_referenced_by", "guard", "a keep guard", keysGuard,
		func(e entry) {
			out = append(out, Guard{Table: e.str["table"], Columns: e.columns, References: e.refs, Where: strings.TrimSpace(e.str["where"]), WithoutForeignKey: e.withoutKey})
		})
	return out
}

// children reads delete_with: a list of {table, column, references, without_foreign_key},
// marked in bad as guards are.
func (l *loader) children(n *yaml.Node, sweep, pass string, record bool, bad map[string]bool) []Child {
	var out []Child
	l.references(n, sweep, pass, record, bad, "delete_with", "delete_with", "a delete_with child", keysChild,
		func(e entry) {
			out = append(out, Child{Table: e.str["table"], Columns: e.columns, References: e.refs, WithoutForeignKey: e.withoutKey})
		})
	return out
}

// tables reads cascades: a list of table names, each recorded as "cascades.<i>"; an entry that
// is no string is refused and marked in bad.
func (l *loader) tables(n *yaml.Node, sweep, pass string, record bool, bad map[string]bool) []string {
	if n.Kind != yaml.SequenceNode {
		l.failf(n.Line, sweep, pass, "cascades is %s: want a list of table names ([access_tokens, sessions])", describe(n))
		bad["cascades"] = true
		return nil
	}
	var out []string
	for i, en := range n.Content {
		at := fmt.Sprintf("cascades.%d", i)
		if record {
			l.pol.lines[fieldKey{sweep, pass, at}] = en.Line
		}
		if en.Kind != yaml.ScalarNode || en.ShortTag() != "!!str" || strings.TrimSpace(en.Value) == "" {
			l.failf(en.Line, sweep, pass, "a cascades entry is %s: want a table name", describe(en))
			bad[at] = true
			continue
		}
		out = append(out, en.Value)
	}
	return out
}

// entry is one keep guard or delete_with child as read: its string fields, its columns and the
// swept table's columns they hold (a string or a list each; refs nil when absent), and its flag.
type entry struct {
	str           map[string]string
	columns, refs []string
	withoutKey    bool
}

// references reads key, a list of mappings (of the keys known) of which table and column are
// required, that each name a table whose columns reference the pass's table: keep guards and
// delete_with's children. Each entry's lines are recorded as "<field>.<i>" and
// "<field>.<i>.<key>"; each entry read is handed to add.
func (l *loader) references(n *yaml.Node, sweep, pass string, record bool, bad map[string]bool, key, field, what, known string, add func(entry)) {
	keys := strings.Fields(known)
	if n.Kind != yaml.SequenceNode {
		l.failf(n.Line, sweep, pass, "%s is %s: want a list of {%s}", key, describe(n), strings.Join(keys, ", "))
		return
	}
	for i, en := range n.Content {
		at := fmt.Sprintf("%s.%d", field, i)
		if en.Kind != yaml.MappingNode {
			l.failf(en.Line, sweep, pass, "%s is %s: want a mapping with table, column and optionally %s", what, describe(en), strings.Join(keys[2:], " and "))
			continue
		}
		f := l.fields(en, sweep, pass, what, known)
		if record {
			l.pol.lines[fieldKey{sweep, pass, at}] = en.Line
			for k, v := range f {
				l.pol.lines[fieldKey{sweep, pass, at + "." + k}] = v.Line
			}
		}
		e := entry{str: map[string]string{}, withoutKey: l.boolean(f, "without_foreign_key", sweep, pass)}
		for _, k := range keys {
			var ok, refused bool
			switch k {
			case "without_foreign_key":
				continue
			case "column":
				e.columns, ok, refused = l.names(f, k, sweep, pass)
			case "references":
				e.refs, ok, refused = l.names(f, k, sweep, pass)
			default:
				var s string
				if s, ok, refused = l.str(f, k, sweep, pass); ok {
					e.str[k] = s
				}
			}
			bad[at+"."+k] = refused
			if (k == "table" || k == "column") && !ok && !refused {
				l.failf(en.Line, sweep, pass, "%s is required", k)
				bad[at+"."+k] = true
			}
		}
		add(e)
	}
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
