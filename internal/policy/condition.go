package policy

import (
	"fmt"
	"regexp"
	"strings"
)

// checkCondition checks the shape of a where condition, which is SQL inserted into our statements
// as "(<where>) AND t.<age> < $1 …". It cannot prove the condition harmless (the check against
// the schema compiles it), but it refuses whatever could make it more than one boolean expression
// inside those parentheses; each refusal's message says why. Quotes are followed as PostgreSQL's
// lexer follows them. It returns one message per kind of problem; none when the shape is sound.
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
	if strings.TrimSpace(where) == "" {
		return nil, nil, []string{"the condition is empty: remove where, or write a condition"}
	}
	s := &conditionScanner{where: where, depths: make([]int, len(where)), seen: map[string]bool{}}
	for s.i = 0; s.i < len(where); s.i++ {
		s.depths[s.i] = -1
		switch s.state {
		case inPlain:
			s.plain()
		case inEscaped:
			s.escaped()
		case inIdent:
			s.ident()
		default:
			s.code()
		}
	}
	switch s.state {
	case inPlain, inEscaped:
		s.add("a string literal is not closed: a ' is missing")
	case inIdent:
		s.add(`a quoted identifier is not closed: a " is missing`)
	}
	if s.depth > 0 && !s.stray { // after a stray ')', the count of '(' says nothing more
		s.add(fmt.Sprintf("%d '(' not closed: the parentheses must balance inside the condition", s.depth))
	}
	return s.depths, s.cutoffs, s.problems
}

// The lexer's states: outside quotes, inside '…', inside E'…', inside "…".
const (
	inCode = iota
	inPlain
	inEscaped
	inIdent
)

// conditionScanner is scanCondition's state as it walks where byte by byte.
type conditionScanner struct {
	where    string
	i        int // the byte being read
	state    int
	depth    int
	stray    bool // a ')' closed a parenthesis the condition did not open
	depths   []int
	cutoffs  []int
	problems []string
	seen     map[string]bool
}

// add records msg, once.
func (s *conditionScanner) add(msg string) {
	if !s.seen[msg] {
		s.seen[msg] = true
		s.problems = append(s.problems, msg)
	}
}

// next reports whether the byte after the current one is c.
func (s *conditionScanner) next(c byte) bool {
	return s.i+1 < len(s.where) && s.where[s.i+1] == c
}

// skip steps over the next byte, inside quotes.
func (s *conditionScanner) skip() {
	s.depths[s.i+1] = -1
	s.i++
}

// plain reads a byte inside '…': a doubled quote is a quote.
func (s *conditionScanner) plain() {
	switch c := s.where[s.i]; {
	case c == '\'' && s.next('\''):
		s.skip()
	case c == '\'':
		s.state = inCode
	case c == '\\':
		s.add(`a backslash in a plain '…' string: its meaning depends on standard_conforming_strings; write E'…' for escapes`)
	}
}

// escaped reads a byte inside E'…': a backslash escapes the next byte.
func (s *conditionScanner) escaped() {
	switch c := s.where[s.i]; {
	case c == '\\' && s.i+1 < len(s.where):
		s.skip()
	case c == '\'' && s.next('\''):
		s.skip()
	case c == '\'':
		s.state = inCode
	}
}

// ident reads a byte inside "…": a doubled quote is a quote.
func (s *conditionScanner) ident() {
	switch c := s.where[s.i]; {
	case c == '"' && s.next('"'):
		s.skip()
	case c == '"':
		s.state = inCode
	}
}

// code reads a byte outside quotes.
func (s *conditionScanner) code() {
	where, i := s.where, s.i
	switch c := where[i]; {
	case c == '\'':
		// E'…' only when the E starts a word: "type'x'" is the word type and a string.
		if i > 0 && (where[i-1] == 'e' || where[i-1] == 'E') && (i == 1 || !isWordByte(where[i-2])) {
			s.state = inEscaped
		} else {
			s.state = inPlain
		}
	case c == '"':
		s.state = inIdent
	case c == ';':
		s.add("';' is refused: a condition cannot end our statement and start another")
	case c == '-' && s.next('-'), c == '/' && s.next('*'):
		s.add("comments (-- and /*) are refused: one would swallow the rest of our statement, the age test included")
	case c == '$':
		s.add("'$' is refused outside quotes: dollar quoting could hide the end of the condition, and $1 and $2 are the cutoff and the batch size (write :cutoff for the cutoff); quote an identifier that holds a $")
	case c == ':' && strings.HasPrefix(where[i+1:], cutoffPlaceholder[1:]) && (i == 0 || where[i-1] != ':') &&
		(i+len(cutoffPlaceholder) == len(where) || !isWordByte(where[i+len(cutoffPlaceholder)])):
		s.cutoffs = append(s.cutoffs, i)
		for j := i; j < i+len(cutoffPlaceholder); j++ {
			s.depths[j] = s.depth
		}
		s.i += len(cutoffPlaceholder) - 1
	case c == '(':
		s.depth++
		s.depths[i] = s.depth
	case c == ')':
		s.depths[i] = s.depth
		s.depth--
		if s.depth < 0 {
			s.add("a ')' closes a parenthesis the condition did not open: the condition is wrapped in parentheses and ANDed with the age test, and escaping them (true) OR (true) would widen the delete to every row")
			s.depth, s.stray = 0, true
		}
	case c < 0x20 && c != '\t' && c != '\n' && c != '\r':
		s.add("a control character is refused")
	default:
		s.depths[i] = s.depth
	}
}

// isWordByte reports whether b can be part of an SQL word.
func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
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
