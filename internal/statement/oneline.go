package statement

import (
	"strconv"
	"strings"
	"unicode"
)

// OneLine is s as a `--` comment may hold it: control characters (a newline would end the
// comment, and what follows would run) written as Go escapes, the rest as it is.
func OneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
