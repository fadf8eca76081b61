package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
)

// strictQuery admits a request whose query string the standard parser reads whole and that names
// only the parameters in allowed, each at most once; anything else is 400 bad_request. r.URL.Query
// drops what it cannot parse, so "?sweep=a;limit=1000" would read as no parameters at all and
// answer the unfiltered history: a query must mean exactly what it says or be refused. It runs
// after the signature, so an unsigned caller learns nothing from it.
func strictQuery(logger *slog.Logger, route string, allowed ...string) func(http.Handler) http.Handler {
	takes := "takes no parameters"
	if len(allowed) > 0 {
		takes = "takes " + strings.Join(allowed, " and ")
	}
	ok := map[string]bool{}
	for _, k := range allowed {
		ok[k] = true
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := checkQuery(r.URL.RawQuery, ok); err != "" {
				writeError(w, r, logger, badRequest("%s: %s %s", err, route, takes))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// checkQuery says what is wrong with raw, or "".
func checkQuery(raw string, allowed map[string]bool) string {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return fmt.Sprintf("the query string %q does not parse (%v); separate parameters with &", clip([]byte(raw)), err)
	}
	for key, values := range q {
		switch {
		case !allowed[key]:
			return fmt.Sprintf("unknown parameter %q", clip([]byte(key)))
		case len(values) > 1:
			return fmt.Sprintf("parameter %q is given %d times", clip([]byte(key)), len(values))
		}
	}
	return ""
}
