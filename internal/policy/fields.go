package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/sweeprail/sweeprail/internal/config"
	"go.yaml.in/yaml/v3"
)

// str reads the string field key of f: its value and whether it is there. A value of another
// type (a number, a list, nothing) or an empty string is refused, not converted: refused says so.
func (l *loader) str(f map[string]*yaml.Node, key, sweep, pass string) (s string, ok, refused bool) {
	v, ok := f[key]
	if !ok {
		return "", false, false
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		l.failf(v.Line, sweep, pass, "%s is %s: want a string (quote it if it looks like another type)", key, describe(v))
		return "", false, true
	}
	if strings.TrimSpace(v.Value) == "" {
		l.failf(v.Line, sweep, pass, "%s is an empty string: give a value or remove the key", key)
		return "", false, true
	}
	return v.Value, true, false
}

// names reads field key of f as column names: one string, or a list of them (the columns of a
// key of several). A value of another type, or an empty or blank name, is refused.
func (l *loader) names(f map[string]*yaml.Node, key, sweep, pass string) (out []string, ok, refused bool) {
	v, ok := f[key]
	if !ok {
		return nil, false, false
	}
	if v.Kind == yaml.ScalarNode {
		s, ok, refused := l.str(f, key, sweep, pass)
		if !ok {
			return nil, false, refused
		}
		return []string{s}, true, false
	}
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		what := describe(v)
		if v.Kind == yaml.SequenceNode {
			what = "an empty list"
		}
		l.failf(v.Line, sweep, pass, "%s is %s: want a column name, or a list of them for a key of several columns ([media_origin, media_id])", key, what)
		return nil, false, true
	}
	for _, en := range v.Content {
		if en.Kind != yaml.ScalarNode || en.ShortTag() != "!!str" || strings.TrimSpace(en.Value) == "" {
			l.failf(en.Line, sweep, pass, "an entry of %s is %s: want a column name", key, describe(en))
			return nil, false, true
		}
		out = append(out, en.Value)
	}
	return out, true, false
}

// boolean reads the true-or-false field key of f; absent is false. Anything but a YAML boolean
// (yes, "true", 1) is refused.
func (l *loader) boolean(f map[string]*yaml.Node, key, sweep, pass string) bool {
	v, ok := f[key]
	if !ok {
		return false
	}
	var b bool
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
		l.failf(v.Line, sweep, pass, "%s is %s: want true or false", key, describe(v))
	} else if err := v.Decode(&b); err != nil {
		l.failf(v.Line, sweep, pass, "%s: %v", key, err)
	}
	return b
}

// integer reads the whole-number field key of f, as str reads a string.
func (l *loader) integer(f map[string]*yaml.Node, key, sweep, pass string) (n int, ok, refused bool) {
	v, ok := f[key]
	if !ok {
		return 0, false, false
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		l.failf(v.Line, sweep, pass, "%s is %s: want a whole number", key, describe(v))
		return 0, false, true
	}
	if err := v.Decode(&n); err != nil {
		l.failf(v.Line, sweep, pass, "%s %s: %v", key, v.Value, err)
		return 0, false, true
	}
	return n, true, false
}

// retention reads the window of field key: whole days ("30d") or a Go duration ("48h"). A bare 0
// is a YAML number, and is read as the zero window it means, for validatePass to refuse for what
// it is rather than for its type.
func retention(key string, v *yaml.Node) (time.Duration, error) {
	if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!str" && v.ShortTag() != "!!int" && v.ShortTag() != "!!float") {
		return 0, fmt.Errorf("%s is %s: want a window such as 30d or 48h", key, describe(v))
	}
	d, err := config.ParseDays(v.Value)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return d, nil
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
