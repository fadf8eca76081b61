// Package redact keeps secrets out of errors and logs: the passwords connection strings carry, in
// URL form (postgres://user:password@host/db?sslpassword=…) and in keyword form (password=…,
// password = …, password='quoted value', password=escaped\ value), wherever a message quotes
// them; and any secret the process holds, wherever it appears verbatim.
//
// pgx masks passwords in its own parse errors on a best-effort basis that misses the spaced and
// escaped keyword forms libpq accepts, so this package does not rely on it.
package redact

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// mask replaces a secret.
const mask = "xxxxx"

// minLiteral is the shortest secret masked verbatim. Masking every "abc" of a log to hide a
// three-letter password would garble it; the patterns still mask such a password wherever it
// appears in connection-string syntax.
const minLiteral = 4

var (
	// urlAuthority finds scheme://, then everything up to a space or a quote: the authority, path
	// and query, split in maskURL. A password may hold an unescaped '/', '?', '#' or '@', which a
	// real URL parser would take for the end of the userinfo.
	urlAuthority = regexp.MustCompile("(?i)\\b[a-z][a-z0-9+.-]*://[^\\s'\"<>]*")
	// queryPassword is a password parameter of a URL's query, up to the next parameter.
	queryPassword = regexp.MustCompile(`(?i)([?&](?:ssl)?password=)[^&#\s'"<>]*`)
	// keyword is a password in libpq's keyword=value form: spaces around '=', a value either
	// single-quoted (with \' and \\ escapes; unterminated, it runs to the end) or unquoted (with
	// backslash escapes, up to a space). The character before the keyword, if any, is not part
	// of a word, so neither "sslpassword" nor a URL's "&password" is matched twice.
	keyword = regexp.MustCompile(`(?i)(^|[^\w?&])((?:ssl|pg)?password\s*=\s*)('(?:[^'\\]|\\[\s\S])*'?|(?:[^\s\\]|\\[\s\S])*)`)
)

// Text masks every password s holds in connection-string syntax, URL or keyword form. It needs
// no knowledge of the secret, so it also masks one in a connection string that does not parse.
func Text(s string) string {
	s = urlAuthority.ReplaceAllStringFunc(s, maskURL)
	s = queryPassword.ReplaceAllString(s, "${1}"+mask)
	return keyword.ReplaceAllString(s, "${1}${2}"+mask)
}

// maskURL masks the password of one URL's userinfo, which it takes to end at the URL's last '@':
// a password with an unescaped '@' or '/' is masked whole rather than in part, at the price of
// also masking the host in the rare URL whose path or query holds an '@'.
func maskURL(u string) string {
	i := strings.Index(u, "://") + len("://")
	rest := u[i:]
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return u
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return u
	}
	return u[:i] + user + ":" + mask + rest[at:]
}

// Passwords returns the password values of a connection string, each as written and as libpq
// reads it (unquoted, unescaped, percent-decoded), since an error may quote either. It never
// fails: a part it cannot read yields nothing, and Text's patterns remain.
func Passwords(dsn string) []string {
	var out []string
	add := func(vs ...string) {
		for _, v := range vs {
			if v != "" && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && !strings.ContainsAny(scheme, " \t\n=") {
		// The userinfo as a URL parser reads it (up to the first '/', '?' or '#') and as maskURL
		// does (up to the last '@'): what the operator meant is one of the two.
		auth := rest
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			auth = rest[:j]
		}
		for _, userinfo := range []string{auth, rest} {
			if at := strings.LastIndexByte(userinfo, '@'); at >= 0 {
				if _, pw, ok := strings.Cut(userinfo[:at], ":"); ok {
					dec, _ := url.PathUnescape(pw)
					add(pw, dec)
				}
			}
		}
		if _, query, ok := strings.Cut(rest, "?"); ok {
			for kv := range strings.SplitSeq(query, "&") {
				k, v, _ := strings.Cut(kv, "=")
				if strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword") {
					dec, _ := url.QueryUnescape(v)
					add(v, dec)
				}
			}
		}
		return out
	}
	for _, kv := range keywords(dsn) {
		if kv.key == "password" || kv.key == "sslpassword" {
			add(kv.raw, kv.value)
		}
	}
	return out
}

// keywordValue is one key=value of a keyword connection string.
type keywordValue struct {
	key   string
	raw   string // as written, quotes excluded
	value string // unescaped
}

// keywords reads a keyword connection string as libpq does: keys and '=' separated by optional
// spaces; a value single-quoted, where \ escapes the next character, or unquoted up to a space,
// where \ escapes it too. It stops at what it cannot read.
func keywords(s string) []keywordValue {
	var out []keywordValue
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' }
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			return out
		}
		start := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[start:i]
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) || s[i] != '=' {
			return out
		}
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		quoted := i < len(s) && s[i] == '\''
		if quoted {
			i++
		}
		start = i
		var val strings.Builder
		for i < len(s) {
			c := s[i]
			if (quoted && c == '\'') || (!quoted && isSpace(c)) {
				break
			}
			if c == '\\' && i+1 < len(s) {
				i++
				c = s[i]
			}
			val.WriteByte(c)
			i++
		}
		out = append(out, keywordValue{key: key, raw: s[start:min(i, len(s))], value: val.String()})
		if quoted && i < len(s) {
			i++ // the closing quote
		}
	}
}

// Redactor masks a fixed set of secrets verbatim, and every password in connection-string syntax.
type Redactor struct {
	secrets []string // longest first, so that no shorter secret splits a longer one
}

// New returns a Redactor of secrets, each masked whole and in pieces: split at spaces, quotes and
// backslashes, where a best-effort masker (pgx's own) may have masked the first piece and left
// the rest. Pieces shorter than minLiteral are not masked verbatim.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	keep := func(s string) {
		if len(s) >= minLiteral && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	for _, s := range secrets {
		keep(s)
		for _, piece := range strings.FieldsFunc(s, func(c rune) bool {
			return c == ' ' || c == '\t' || c == '\n' || c == '\'' || c == '\\' || c == '"'
		}) {
			keep(piece)
		}
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
	return r
}

// String masks s.
func (r *Redactor) String(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, mask)
	}
	return Text(s)
}

// Error returns err with its message masked; nil stays nil. The original stays reachable with
// errors.Is and errors.As, for callers that read codes, not text.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{err: err, msg: r.String(err.Error())}
}

type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Handler returns a slog.Handler that masks every record's message and attributes before h
// sees them.
func (r *Redactor) Handler(h slog.Handler) slog.Handler { return &handler{r: r, h: h} }

type handler struct {
	r *Redactor
	h slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.r.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = h.r.attr(a)
	}
	return &handler{r: h.r, h: h.h.WithAttrs(masked)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, h: h.h.WithGroup(name)}
}

// attr masks one attribute. An error becomes its masked message; any other value keeps its type
// unless its text holds something to mask.
func (r *Redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		masked := make([]any, len(group))
		for i, g := range group {
			masked[i] = r.attr(g)
		}
		return slog.Group(a.Key, masked...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, r.String(err.Error()))
		}
		s := fmt.Sprint(v.Any())
		if m := r.String(s); m != s {
			return slog.String(a.Key, m)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
