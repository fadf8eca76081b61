package policy

import (
	"fmt"
	"regexp"
	"strings"
)

// checkCondition checks the shape of a where condition, which is SQL inserted into our statements
// as "(<where>) AND t.<age> < $1 …". It cannot prove the condition harmless (CheckPolicy compiles
// it against the schema), but it refuses everything that could make it more than one boolean
// expression inside those parentheses:
//   - ';': it would end our statement and start another ("true; DROP TABLE x");
//   - comments (-- and /*): they would swallow the rest of our statement, cutoff included;
//   - a ')' closing a parenthesis it did not open: "true) OR (true" would escape our parentheses
//     and OR past the age test, widening the delete to every row;
//   - '$' (dollar quoting, and parameters: $1 is the cutoff, $2 the batch size): a condition names
//     the run's cutoff as :cutoff (cutoffPlaceholder), which the statements replace with $1;
//   - an unterminated string or quoted identifier, and a backslash in a plain '…' string, which
//     means something else when standard_conforming_strings is off (write E'…' for escapes).
//
// Quotes are followed as PostgreSQL's lexer follows them (a doubled quote inside a '…' string or
// a "…" identifier, a backslash escape inside E'…'), so these characters are allowed inside a
// string or quoted identifier. It returns one message per kind of problem; none when the shape is
// sound.
func checkCondition(where string) []string {
	_, _, problems := scanCondition(where)
	return problems
}

// cutoffPlaceholder names the run's cutoff inside a where or keep-guard condition: the same
// instant as the age test's, so that a rule can compare another column, or another table's, with
// it (t.closed_at < :cutoff). It is a timestamptz.
const cutoffPlaceholder = ":cutoff"

// CutoffParam is what cutoffPlaceholder becomes in a statement: the bound cutoff, typed, so that
// it means one instant whatever it is compared with (every statement binds $1 as a timestamptz).
const CutoffParam = "($1::timestamptz)"

// CutoffConst is what cutoffPlaceholder becomes where no parameter can stand (a view): a
// timestamptz that calls no function.
const CutoffConst = "(NULL::timestamptz)"

// WithCutoff returns where with each :cutoff outside quotes replaced by the bound cutoff. where
// must have passed checkCondition.
func WithCutoff(where string) string { return SubstituteCutoff(where, CutoffParam) }

// SubstituteCutoff returns where with each :cutoff outside quotes replaced by with.
func SubstituteCutoff(where, with string) string {
	_, at, _ := scanCondition(where)
	if len(at) == 0 {
		return where
	}
	var b strings.Builder
	last := 0
	for _, i := range at {
		b.WriteString(where[last:i])
		b.WriteString(with)
		last = i + len(cutoffPlaceholder)
	}
	b.WriteString(where[last:])
	return b.String()
}

// UsesCutoff says whether where names the run's cutoff (:cutoff outside quotes), so that a
// statement made of it alone binds the cutoff.
func UsesCutoff(where string) bool {
	_, at, _ := scanCondition(where)
	return len(at) > 0
}

// scanCondition lexes where as checkCondition describes, and returns for each byte its
// parenthesis depth, or -1 inside a string or quoted identifier, and where each :cutoff starts.
// A :cutoff is the placeholder only as a word of its own outside quotes: not the end of a cast
// (x::cutoff) nor the start of a longer word (:cutoffs).
func scanCondition(where string) (depths, cutoffs []int, problems []string) {
	seen := map[string]bool{}
	add := func(msg string) {
		if !seen[msg] {
			seen[msg] = true
			problems = append(problems, msg)
		}
	}
	if strings.TrimSpace(where) == "" {
		return nil, nil, []string{"the condition is empty: remove where, or write a condition"}
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
				add("'$' is refused outside quotes: dollar quoting could hide the end of the condition, and $1 and $2 are the cutoff and the batch size (write :cutoff for the cutoff); quote an identifier that holds a $")
			case c == ':' && strings.HasPrefix(where[i+1:], cutoffPlaceholder[1:]) && (i == 0 || where[i-1] != ':') &&
				(i+len(cutoffPlaceholder) == len(where) || !isWord(where[i+len(cutoffPlaceholder)])):
				cutoffs = append(cutoffs, i)
				for j := i; j < i+len(cutoffPlaceholder); j++ {
					depths[j] = depth
				}
				i += len(cutoffPlaceholder) - 1
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
	return depths, cutoffs, problems
}

var (
	conditionWordRE = regexp.MustCompile(`(?i)\b(and|or|between)\b`)
	// simpleConjunctRE matches a conjunct that can stand as written in an index predicate:
	// a column (alias-qualified or not) IS [NOT] NULL, compared with =, <> or != to a literal,
	// or [NOT] IN a list of literals. The alias is a pass's t or a keep guard's g.
	simpleConjunctRE = map[string]*regexp.Regexp{"t": simpleConjunct("t"), "g": simpleConjunct("g")}
)

func simpleConjunct(alias string) *regexp.Regexp {
	return regexp.MustCompile(`(?is)^(` + alias + `\.)?([a-z_][a-z0-9_]*|"(?:[^"]|"")+")\s*` +
		`(?:is\s+(?:not\s+)?null|(?:=|<>|!=)\s*` + literalRE + `|(?:not\s+)?in\s*\(\s*` + literalRE + `(?:\s*,\s*` + literalRE + `)*\s*\))$`)
}

const literalRE = `(?:'(?:[^'\\]|'')*'|-?[0-9]+(?:\.[0-9]+)?|true|false)`

// PartialPredicate returns the conjuncts of where, a condition over alias ("t" for a pass's,
// "g" for a keep guard's), that can stand in an index predicate of alias's table, alias prefixes
// dropped, and whether that is all of where. Only a top-level AND chain is split: a top-level OR
// or a BETWEEN (whose own AND would be misread) gives up, since a wrong predicate would make an
// index the query cannot use.
func PartialPredicate(where, alias string) (pred string, complete bool) {
	if strings.TrimSpace(where) == "" {
		return "", true
	}
	depths, _, problems := scanCondition(where)
	if len(problems) > 0 {
		return "", false
	}
	var pieces []string
	start := 0
	for _, m := range conditionWordRE.FindAllStringIndex(where, -1) {
		if depths[m[0]] != 0 {
			continue
		}
		if !strings.EqualFold(where[m[0]:m[1]], "and") {
			return "", false
		}
		pieces = append(pieces, where[start:m[0]])
		start = m[1]
	}
	pieces = append(pieces, where[start:])
	var kept []string
	for _, piece := range pieces {
		piece = strings.TrimSpace(piece)
		m := simpleConjunctRE[alias].FindStringSubmatchIndex(piece)
		if m == nil {
			continue
		}
		if m[2] >= 0 { // drop the alias: an index predicate names its table's columns bare
			piece = piece[m[3]:]
		}
		kept = append(kept, piece)
	}
	return strings.Join(kept, " AND "), len(kept) == len(pieces)
}
