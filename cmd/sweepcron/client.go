package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sweeprail/sweeprail/internal/classify"
	"github.com/sweeprail/sweeprail/internal/config"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// maxBody caps what is read of one answer. A sweep answer or the catalog is a few KiB; a body
// past this is not one, and reading it whole would only cost memory. A capped body fails to parse
// and is reported as unparseable.
const maxBody = 4 << 20

// catalogPath is the discovery route.
const catalogPath = wire.CatalogRoute

// client makes the signed requests of one configuration.
type client struct {
	base *url.URL
	key  []byte
	http *http.Client
	now  func() time.Time
}

func newClient(cfg config.Cron, now func() time.Time) (*client, error) {
	base, err := url.Parse(cfg.APIURL)
	if err != nil {
		// config.LoadCron has checked the URL; this is the belt to its braces.
		return nil, exitf(exitConfig, "configuration: API_URL: %w", err)
	}
	return &client{
		base: base,
		key:  []byte(cfg.SigningKey),
		http: &http.Client{
			// Timeout bounds the whole exchange, body included. A timeout before the headers
			// comes back from Do (unreachable); one during the body comes back from the read
			// (truncated-body), which is why the body is read here and not by a helper.
			Timeout: cfg.FetchTimeout,
			// A redirect is never followed: the signature covers one path on one host, and
			// following a POST redirect would turn it into a GET elsewhere. The 3xx is reported.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now: now,
	}, nil
}

// exchange is the raw outcome of one request, in the shape classify reads.
type exchange struct {
	in      classify.Input
	elapsed time.Duration
}

// do sends one signed request and reads its answer. ctx should not carry the run's signal: a
// route in flight is let finish (bounded by the fetch timeout), because cutting it would leave
// its result unknown while the server may well have deleted rows.
func (c *client) do(ctx context.Context, method, path string, body []byte) exchange {
	return c.send(ctx, method, c.base.JoinPath(path), body)
}

// send is do for a URL built by the caller, for a request with a query: SignRequest signs
// u.RawQuery exactly as it is sent.
func (c *client) send(ctx context.Context, method string, u *url.URL, body []byte) exchange {
	start := c.now()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return exchange{in: classify.Input{TransportErr: fmt.Errorf("build request: %w", err)}}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "sweepcron")
	req.Header.Set(traceparentHeader, traceparent(ctx))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	signing.SignRequest(req, body, c.key, c.now())
	resp, err := c.http.Do(req)
	if err != nil {
		return exchange{in: classify.Input{TransportErr: err}, elapsed: c.now().Sub(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return exchange{
		in:      classify.Input{StatusCode: resp.StatusCode, Body: b, BodyErr: err},
		elapsed: c.now().Sub(start),
	}
}

// sweepRef is one route of the catalog.
type sweepRef struct {
	Name  string `json:"name"`
	Route string `json:"route"`
}

// catalog is what the cron client uses of GET /internal/sweeps.
type catalog struct {
	Sweeps []sweepRef
	// WriteTimeout is the server's SERVER_WRITE_TIMEOUT.
	WriteTimeout time.Duration
}

// discoveryError is why discovery failed, with the exit status it maps to.
func discoveryError(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf("discovery: GET "+catalogPath+": "+format, args...)}
}

// discover reads the catalog. Unreachable maps to exit 2; an answer that is not a usable catalog
// to exit 1, since the API is up but nothing can be swept.
func (c *client) discover(ctx context.Context) (catalog, error) {
	ex := c.do(ctx, http.MethodGet, catalogPath, nil)
	in := ex.in
	switch {
	case in.TransportErr != nil:
		return catalog{}, discoveryError(exitUnreachable, "API unreachable: %w", in.TransportErr)
	case in.BodyErr != nil:
		return catalog{}, discoveryError(exitFailed, "HTTP %d, body broke after %d bytes: %w", in.StatusCode, len(in.Body), in.BodyErr)
	case in.StatusCode < 200 || in.StatusCode > 299:
		// classify knows how to summarise an error body; it says fail for any non-2xx
		// without a sweep answer, which the catalog never is.
		return catalog{}, discoveryError(exitFailed, "%s%s", classify.Classify(in).Detail, authHint(in.StatusCode))
	}
	return parseCatalog(in.Body)
}

// authHint points at the likely cause of a 401 or 503 from the signature middleware.
func authHint(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return " (does INTERNAL_SIGNING_KEY match the API's, and are the clocks in sync?)"
	case http.StatusServiceUnavailable:
		return " (is INTERNAL_SIGNING_KEY set on the API?)"
	}
	return ""
}

// parseCatalog reads and checks the discovery answer. Every check fails closed: a catalog the
// client cannot fully trust is refused rather than partly used, since a forgotten route is the
// very failure discovery exists to prevent.
func parseCatalog(body []byte) (catalog, error) {
	var w struct {
		Sweeps *[]sweepRef `json:"sweeps"`
		Bounds struct {
			ServerWriteTimeoutMs *int64 `json:"serverWriteTimeoutMs"`
		} `json:"bounds"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return catalog{}, discoveryError(exitFailed, "not a catalog: %w", err)
	}
	if w.Sweeps == nil {
		return catalog{}, discoveryError(exitFailed, `not a catalog: no "sweeps"`)
	}
	if len(*w.Sweeps) == 0 {
		return catalog{}, discoveryError(exitFailed, "the catalog lists no sweeps")
	}
	if w.Bounds.ServerWriteTimeoutMs == nil || *w.Bounds.ServerWriteTimeoutMs <= 0 {
		// Without the server's write timeout the fetch-timeout bound cannot be checked, and a
		// fetch timeout below it turns every long sweep into a false "unreachable".
		return catalog{}, discoveryError(exitFailed, "the catalog has no positive bounds.serverWriteTimeoutMs")
	}
	cat := catalog{WriteTimeout: time.Duration(*w.Bounds.ServerWriteTimeoutMs) * time.Millisecond}
	seen := map[string]bool{}
	for i, s := range *w.Sweeps {
		if s.Name == "" {
			return catalog{}, discoveryError(exitFailed, "sweep #%d has no name", i+1)
		}
		if seen[s.Name] {
			return catalog{}, discoveryError(exitFailed, "sweep %q is listed twice", s.Name)
		}
		seen[s.Name] = true
		if s.Route == "" {
			s.Route = "/internal/sweep-" + s.Name
		}
		if err := checkRoute(s.Route); err != nil {
			return catalog{}, discoveryError(exitFailed, "sweep %q: %w", s.Name, err)
		}
		cat.Sweeps = append(cat.Sweeps, s)
	}
	return cat, nil
}

// checkRoute accepts an absolute path without query, fragment or dot segments: the route is
// joined to API_URL, so it can never move the request to another host; it is signed as a plain
// path; and a dot segment would be cleaned by curl or a proxy into a path other than the signed one.
func checkRoute(route string) error {
	if !strings.HasPrefix(route, "/") || strings.ContainsAny(route, "?#% \t\r\n") {
		return fmt.Errorf("route %q is not an absolute path", route)
	}
	for seg := range strings.SplitSeq(route, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("route %q has a dot segment", route)
		}
	}
	return nil
}

// checkBound refuses a fetch timeout not strictly above the server's write timeout: the server
// cuts a handler at its write timeout, so a client that gives up first reports a live, still
// running sweep as unreachable and stops the whole run.
func checkBound(fetch, write time.Duration) error {
	if fetch > write {
		return nil
	}
	return exitf(exitConfig, "configuration: INTERNAL_FETCH_TIMEOUT=%s must be > the server's SERVER_WRITE_TIMEOUT=%s",
		formatDuration(fetch), formatDuration(write))
}

// formatDuration writes whole seconds as "120s", the way the variables are usually set, rather
// than time.Duration's "2m0s".
func formatDuration(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	case d%time.Millisecond == 0:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
	return d.String()
}

// requestBody is the JSON body of a sweep POST; both fields are left out when unset, so a plain
// run sends "{}".
type requestBody struct {
	DryRun    bool `json:"dryRun,omitempty"`
	BatchSize int  `json:"batchSize,omitempty"`
}

func (o options) body() []byte {
	// Marshalling a struct of a bool and an int cannot fail.
	b, _ := json.Marshal(requestBody{DryRun: o.dryRun, BatchSize: o.batchSize})
	return b
}
