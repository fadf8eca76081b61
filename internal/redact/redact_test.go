package redact

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// dsnCases are connection strings with a password in each form libpq and pgx accept, and what
// of them must never show: every piece of the password (an escaped space splits it in two).
var dsnCases = []struct {
	name   string
	dsn    string
	secret []string
	// keep is a part of the text that must survive, so masking is not "drop everything".
	keep string
}{
	{"keyword, spaces around '=' (row 10)", `host=127.0.0.1 port=abc password = S3cretPW dbname=app`, []string{"S3cretPW"}, "dbname=app"},
	{"keyword, quoted with a space", `host=127.0.0.1 port=abc password='a b S3cret' dbname=app`, []string{"a b S3cret", "S3cret"}, "dbname=app"},
	{"keyword, quoted with an escaped quote", `host=127.0.0.1 port=abc password='it\'s S3cret' user=app`, []string{"S3cret", `it\'s`}, "user=app"},
	{"keyword, escaped space (row 10)", `host=127.0.0.1 port=abc password=S3cret\ PWtail sslmode=disable`, []string{"S3cret", "PWtail"}, "sslmode=disable"},
	{"keyword, plain", `host=127.0.0.1 port=abc password=S3cretPW`, []string{"S3cretPW"}, "host=127.0.0.1"},
	{"keyword, upper case", `host=127.0.0.1 port=abc PASSWORD=S3cretPW`, []string{"S3cretPW"}, "host=127.0.0.1"},
	{"keyword, unterminated quote", `host=127.0.0.1 port=abc password='S3cret PWtail`, []string{"S3cret", "PWtail"}, "host=127.0.0.1"},
	{"keyword, sslpassword", `host=127.0.0.1 port=abc sslpassword=S3cretPW`, []string{"S3cretPW"}, "host=127.0.0.1"},
	{"URL", `postgres://app:S3cretPW@127.0.0.1:abc/app`, []string{"S3cretPW"}, "127.0.0.1"},
	{"URL, postgresql scheme", `postgresql://app:S3cretPW@127.0.0.1:abc/app`, []string{"S3cretPW"}, "127.0.0.1"},
	{"URL, percent-encoded", `postgres://app:S3cret%40PW@127.0.0.1:abc/app`, []string{"S3cret"}, "127.0.0.1"},
	{"URL, unescaped @ and / in the password", `postgres://app:S3c@ret/PW@127.0.0.1:abc/app?port=abc`, []string{"S3c", "ret/PW"}, "127.0.0.1"},
	{"URL, password in the query", `postgres://app@127.0.0.1:abc/app?password=S3cretPW&sslmode=disable`, []string{"S3cretPW"}, "sslmode=disable"},
	{"URL, sslpassword in the query", `postgres://app@127.0.0.1:abc/app?sslmode=disable&sslpassword=S3cretPW`, []string{"S3cretPW"}, "sslmode=disable"},
}

// TestText: every form of password is masked in the connection string, alone or quoted in a
// sentence, with no knowledge of the secret.
func TestText(t *testing.T) {
	for _, tc := range dsnCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, text := range []string{tc.dsn, "open `" + tc.dsn + "`: refused", "\"" + tc.dsn + "\""} {
				got := Text(text)
				for _, s := range tc.secret {
					if strings.Contains(got, s) {
						t.Errorf("Text(%q) = %q: %q shows", text, got, s)
					}
				}
				if !strings.Contains(got, tc.keep) {
					t.Errorf("Text(%q) = %q: lost %q", text, got, tc.keep)
				}
			}
		})
	}
	t.Run("no password: unchanged", func(t *testing.T) {
		for _, s := range []string{
			"failed to connect to `user=app database=app`: 127.0.0.1:1 (127.0.0.1): dial error: connection refused",
			"postgres://app@127.0.0.1:5432/app?sslmode=disable",
			"http://api:8080/internal/sweeps",
			`the passwords table has 3 rows; password_hash = 'x'`,
		} {
			if got := Text(s); got != s {
				t.Errorf("Text(%q) = %q, want it unchanged", s, got)
			}
		}
	})
}

// TestRedactorOnPgxErrors: the error pgx makes of a connection string it cannot
// parse quotes it, masked by pgx on a best-effort basis that leaves the spaced form whole and the
// tail of an escaped or quoted value; a Redactor that knows the connection string masks all of it.
func TestRedactorOnPgxErrors(t *testing.T) {
	for _, tc := range dsnCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pgconn.ParseConfig(tc.dsn)
			if err == nil {
				t.Fatalf("pgx parsed %q: the case no longer makes a parse error", tc.dsn)
			}
			leaked := false
			for _, s := range tc.secret {
				leaked = leaked || strings.Contains(err.Error(), s)
			}
			got := New(Passwords(tc.dsn)...).Error(fmt.Errorf("parse DATABASE_URL: %w", err)).Error()
			for _, s := range tc.secret {
				if strings.Contains(got, s) {
					t.Errorf("%q shows in %q", s, got)
				}
			}
			t.Logf("pgx alone leaks: %v; masked: %s", leaked, got)
		})
	}
}

func TestPasswords(t *testing.T) {
	cases := []struct{ dsn, want string }{
		{`host=h password = S3cretPW dbname=app`, "S3cretPW"},
		{`host=h password='a b S3cret' dbname=app`, "a b S3cret"},
		{`host=h password='it\'s S3cret'`, `it\'s S3cret|it's S3cret`},
		{`host=h password=S3cret\ PWtail sslmode=disable`, `S3cret\ PWtail|S3cret PWtail`},
		{`postgres://app:S3cret%40PW@h/app`, "S3cret%40PW|S3cret@PW"},
		// A URL parser reads the password as S3c (and the host as ret); masking, as S3c@ret/PW.
		{`postgres://app:S3c@ret/PW@h/app`, "S3c|S3c@ret/PW"},
		{`postgres://app@h/app?password=S3cret%20PW&sslpassword=Other`, "S3cret%20PW|S3cret PW|Other"},
		{`postgres://app@h/app`, ""},
		{`host=h dbname=app`, ""},
	}
	for _, tc := range cases {
		want := []string{}
		if tc.want != "" {
			want = strings.Split(tc.want, "|")
		}
		if got := Passwords(tc.dsn); !slices.Equal(append([]string{}, got...), want) {
			t.Errorf("Passwords(%q) = %q, want %q", tc.dsn, got, want)
		}
	}
}

// TestRedactor: a known secret is masked wherever it appears, not only in connection-string
// syntax (a server's "password authentication failed" never quotes it, but a wrapped error may).
func TestRedactor(t *testing.T) {
	r := New(append(Passwords(`host=h password=S3cret\ PWtail`), "signing-key-0123456789abcdef0123", "abc", "")...)
	got := r.String("auth S3cret PWtail, key signing-key-0123456789abcdef0123, abc stays, and password=S3cret\\ PWtail")
	for _, s := range []string{"S3cret", "PWtail", "signing-key"} {
		if strings.Contains(got, s) {
			t.Errorf("%q shows in %q", s, got)
		}
	}
	if !strings.Contains(got, "abc stays") {
		t.Errorf("a three-byte secret was masked verbatim: %q", got)
	}

	err := r.Error(fmt.Errorf("open: %w", fs.ErrNotExist))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("the masked error lost its chain")
	}
	if r.Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}

// TestHandler: what reaches the log is masked, in the message, attributes of every kind, groups
// and attributes bound with With.
func TestHandler(t *testing.T) {
	const dsn = `host=h port=abc password = S3cretPW`
	var buf bytes.Buffer
	r := New(Passwords(dsn)...)
	logger := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil))).With("dsn", dsn)
	_, parseErr := pgconn.ParseConfig(dsn)
	logger.WithGroup("db").Error("open "+dsn, "err", parseErr, "plain", "S3cretPW",
		slog.Group("nested", "url", "postgres://u:S3cretPW@h/db"), "n", 3, "any", []string{"S3cretPW"})
	out := buf.String()
	if strings.Contains(out, "S3cretPW") {
		t.Errorf("the secret reached the log:\n%s", out)
	}
	for _, want := range []string{`"n":3`, `"nested":{"url":"postgres://u:xxxxx@h/db"}`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}
