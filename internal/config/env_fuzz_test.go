package config

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzLoadAPI (fuzz_test.go) covers the API's durations and SWEEP_RETENTION; these cover the
// rest of the environment both binaries parse: the cron client's, the API's whole numbers and
// secrets, and the retention syntax on its own.

// leaks reports whether secret shows in a message: it is in withSecret, the error for the real
// environment, and not in withoutSecret, the error for the same environment with the secret
// replaced by a stand-in of the same length (so every length check answers the same). Comparing
// the two tells a leak from a secret that happens to spell a word of the message.
func leaks(secret, withSecret, withoutSecret string) bool {
	return secret != "" && strings.Contains(withSecret, secret) && !strings.Contains(withoutSecret, secret)
}

func standIn(s string) string { return strings.Repeat("z", len(s)) }

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzLoadCron feeds LoadCron any API_URL, signing key and fetch timeout. It must not panic, must
// explain every refusal, must never show the key or a password in API_URL, and whatever it accepts
// must be usable: an absolute http(s) URL with a host, a key of 32 bytes or more, a fetch timeout
// above zero.
//
//	go test -run='^$' -fuzz=FuzzLoadCron -fuzztime=20s ./internal/config/
func FuzzLoadCron(f *testing.F) {
	for _, s := range [][3]string{
		{"http://api:8080", goodKey, "150s"},
		{"https://ops:hunter2@api.example.com/sweeprail/", goodKey, "3m"},
		{"ftp://ops:hunter2@api", "short", "0s"},
		{"ftp://api/", goodKey, "150s"},
		{"http://ops:hunter2@api:80 80/", goodKey, "-5s"},
		{"http:///internal", goodKey, "abc"},
		{"api:8080", strings.Repeat("k", 32), "9223372036854775807ns"},
		{"", "", ""},
		{"http://[::1]:8080", goodKey, "1ns"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, apiURL, key, fetch string) {
		env := map[string]string{"API_URL": apiURL, "INTERNAL_SIGNING_KEY": key, "INTERNAL_FETCH_TIMEOUT": fetch}
		cfg, err := LoadCron(env)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			if cfg != (Cron{}) {
				t.Fatalf("a configuration came back with the error: %+v", cfg)
			}
			noKey := map[string]string{"API_URL": apiURL, "INTERNAL_SIGNING_KEY": standIn(key), "INTERNAL_FETCH_TIMEOUT": fetch}
			if _, err2 := LoadCron(noKey); leaks(key, err.Error(), errText(err2)) {
				t.Fatalf("the error shows INTERNAL_SIGNING_KEY:\n%v", err)
			}
			if u, perr := url.Parse(apiURL); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok {
					u.User = url.UserPassword(u.User.Username(), standIn(pw))
					noPW := map[string]string{"API_URL": u.String(), "INTERNAL_SIGNING_KEY": key, "INTERNAL_FETCH_TIMEOUT": fetch}
					if _, err2 := LoadCron(noPW); leaks(pw, err.Error(), errText(err2)) {
						t.Fatalf("the error shows API_URL's password %q:\n%v", pw, err)
					}
				}
			}
			return
		}
		u, perr := url.Parse(cfg.APIURL)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			t.Fatalf("accepted API_URL=%q, not an absolute http(s) URL with a host", cfg.APIURL)
		}
		if len(cfg.SigningKey) < 32 {
			t.Fatalf("accepted a %d-byte signing key", len(cfg.SigningKey))
		}
		if want, perr := time.ParseDuration(fetch); perr != nil || cfg.FetchTimeout != want || want <= 0 {
			t.Fatalf("INTERNAL_FETCH_TIMEOUT=%q became %v", fetch, cfg.FetchTimeout)
		}
	})
}

// FuzzLoadAPINumbersAndSecrets feeds LoadAPI any BATCH_SIZE, MAX_BATCHES, DATABASE_URL and
// previous signing key. It must not panic; what it accepts must hold every bound (checkBounds)
// and the whole-number ranges; a refusal must never show the database URL (it may carry a
// password) or either key.
//
//	go test -run='^$' -fuzz=FuzzLoadAPINumbersAndSecrets -fuzztime=20s ./internal/config/
func FuzzLoadAPINumbersAndSecrets(f *testing.F) {
	for _, s := range [][4]string{
		{"1000", "1000", "postgres://sweeprail:hunter2@db/sweeprail", ""},
		{"0", "0", "postgres://localhost/sweeprail", "short"},
		{"0", "1000", "postgres://localhost/sweeprail", ""},
		{"50001", "1", "postgres://localhost/sweeprail", ""},
		{"50001", "-1", "x", strings.Repeat("p", 32)},
		{"1e3", "1.5", " ", "previous-key-that-is-long-enough-0123"},
		{"99999999999999999999", "abc", "postgres://u:p@h/d?sslmode=disable", "\x00"},
		{"", "", "", ""},
		{"+100", "0x10", "DATABASE_URL", "INTERNAL_SIGNING_KEY_PREVIOUS"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, batchSize, maxBatches, dbURL, previous string) {
		environ := func(db, prev string) map[string]string {
			return map[string]string{
				"DATABASE_URL": db, "INTERNAL_SIGNING_KEY": goodKey, "INTERNAL_SIGNING_KEY_PREVIOUS": prev,
				"BATCH_SIZE": batchSize, "MAX_BATCHES": maxBatches,
			}
		}
		cfg, err := LoadAPI(environ(dbURL, previous))
		if err != nil {
			msg := err.Error()
			if msg == "" {
				t.Fatal("empty error message")
			}
			if strings.Contains(msg, goodKey) {
				t.Fatalf("the error shows INTERNAL_SIGNING_KEY:\n%v", err)
			}
			if _, err2 := LoadAPI(environ(standIn(dbURL), previous)); leaks(dbURL, msg, errText(err2)) {
				t.Fatalf("the error shows DATABASE_URL:\n%v", err)
			}
			if _, err2 := LoadAPI(environ(dbURL, standIn(previous))); leaks(previous, msg, errText(err2)) {
				t.Fatalf("the error shows INTERNAL_SIGNING_KEY_PREVIOUS:\n%v", err)
			}
			return
		}
		checkBounds(t, cfg)
		if n, perr := strconv.Atoi(batchSize); perr != nil || n != cfg.BatchSize || n < 1 || n > 50000 {
			t.Fatalf("BATCH_SIZE=%q became %d", batchSize, cfg.BatchSize)
		}
		if n, perr := strconv.Atoi(maxBatches); perr != nil || n != cfg.MaxBatches || n < 1 {
			t.Fatalf("MAX_BATCHES=%q became %d", maxBatches, cfg.MaxBatches)
		}
		if cfg.SigningKeyPrevious != "" && len(cfg.SigningKeyPrevious) < 32 {
			t.Fatalf("accepted a %d-byte previous key", len(cfg.SigningKeyPrevious))
		}
	})
}

// FuzzParseDays feeds the retention syntax anything. It must not panic; a refusal must quote the
// value; "<n>d" must mean exactly n×24h, never a wrapped value of the other sign; anything else it
// accepts must be exactly what time.ParseDuration reads.
//
//	go test -run='^$' -fuzz=FuzzParseDays -fuzztime=20s ./internal/config/
func FuzzParseDays(f *testing.F) {
	for _, s := range []string{"30d", "0d", "-2d", "48h", "1h30m", "106751d", "106752d", "-106752d",
		"9223372036854775807d", "1.5d", "d", "30D", "1d12h", " 30d", "30", "", "+7d", "007d", "-0d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDays(s)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("ParseDays(%q): error %q does not quote the value", s, err)
			}
			return
		}
		if n, ok := strings.CutSuffix(s, "d"); ok {
			days, perr := strconv.ParseInt(n, 10, 64)
			if perr != nil {
				t.Fatalf("ParseDays(%q) = %v, but %q is no whole number of days", s, d, n)
			}
			if days > math.MaxInt64/int64(day) || days < math.MinInt64/int64(day) {
				t.Fatalf("ParseDays(%q) = %v: %d days do not fit a time.Duration, it wrapped", s, d, days)
			}
			if d != time.Duration(days)*day {
				t.Fatalf("ParseDays(%q) = %v, want %d×24h", s, d, days)
			}
			return
		}
		if want, perr := time.ParseDuration(s); perr != nil || d != want {
			t.Fatalf("ParseDays(%q) = %v, time.ParseDuration says %v, %v", s, d, want, perr)
		}
	})
}
