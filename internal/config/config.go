// Package config reads the environment of both binaries (the API and the sweepcron client) and
// refuses, at boot, any configuration that would break the service's time bounds.
//
// Every problem is reported at once, each naming its variable and value, so an operator fixes a
// broken deployment in one round instead of one variable per restart. A malformed or
// present-but-empty value is an error, never a silent fallback to the default.
package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// Struct tags read by this package besides caarlos0/env's own:
//
//	empty:"unset"      a present but empty value means "not set" (optional strings); without it an
//	                   empty value is refused, since it is most often a template that expanded to nothing
//	secret:"true"      the value never appears in an error message, only its length
//	secret:"userinfo"  a URL whose password, if any, is masked in error messages
//	allowZero:"true"   the one duration that may be 0 (every other duration must be > 0)
const (
	tagEmpty     = "empty"
	tagSecret    = "secret"
	tagAllowZero = "allowZero"
)

// Bounds that other parts of the service rely on.
const (
	// minSigningKeyBytes is the shortest accepted signing key: 32 bytes, HMAC-SHA256's output
	// size, below which the key rather than the MAC becomes the weak point.
	minSigningKeyBytes = 32
	// minBatchSize and maxBatchSize bound BATCH_SIZE, the same range a request's batchSize obeys.
	minBatchSize = wire.MinRequestBatchSize
	maxBatchSize = wire.MaxRequestBatchSize
	// pgTimeoutResolution is PostgreSQL's unit for statement_timeout and lock_timeout: a shorter
	// value rounds to 0, which PostgreSQL reads as "no timeout at all".
	pgTimeoutResolution = time.Millisecond
	// pgTimeoutMax is the largest statement_timeout/lock_timeout PostgreSQL accepts (INT_MAX ms).
	pgTimeoutMax = math.MaxInt32 * time.Millisecond
	// minReplicaLag is the smallest MAX_REPLICA_LAG: a standby that keeps up shows tens of
	// milliseconds of replay lag under a drain (0.05s on loopback), so a smaller limit throttles
	// healthy standbys on every batch.
	minReplicaLag = 100 * time.Millisecond
	// minReplicaLagBytes is the smallest MAX_REPLICA_LAG_BYTES, 1 MiB: a batch of 20000 narrow
	// rows (the adaptive sizer's cap) writes about that much WAL, so a smaller limit would hold
	// runs back after every batch; and a value that small is more often megabytes meant ("64")
	// than bytes.
	minReplicaLagBytes = 1 << 20
	// signatureResolution is the resolution of a signature's timestamp (unix seconds): a shorter
	// replay window would refuse fresh requests at random.
	signatureResolution = time.Second
	// maxSignatureMaxAge caps the replay window. A captured request stays valid (to a replica
	// whose cache has not seen it) for this long; clocks kept by NTP are off by far less.
	maxSignatureMaxAge = 5 * time.Minute
	// minKeyDistinctBytes is the fewest distinct byte values a signing key may hold under
	// APP_ENV=production: 32 copies of one letter pass the length check and carry no secret.
	minKeyDistinctBytes = 16
	// maxDryRunsCeiling bounds MAX_CONCURRENT_DRY_RUNS: each dry run holds a pooled connection
	// for up to COUNT_TIMEOUT, so the cap is there to stay well below any pool size.
	maxDryRunsCeiling = 64
)

// Production reports whether appEnv (APP_ENV) names production, which turns on the strict rules:
// no seed-demo, and no signing key with fewer than 16 distinct bytes. The comparison ignores
// case and surrounding spaces, so "Production" is never the lenient mode by accident.
func Production(appEnv string) bool {
	return strings.EqualFold(strings.TrimSpace(appEnv), "production")
}

// API is the API binary's configuration.
type API struct {
	// DatabaseURL is the pgx connection string; it may carry a password, so it is never shown.
	DatabaseURL string `env:"DATABASE_URL,required,notEmpty" secret:"true"`
	ListenAddr  string `env:"LISTEN_ADDR" envDefault:":8080"`
	// SigningKey verifies request signatures; empty leaves every /internal/* route answering 503.
	SigningKey string `env:"INTERNAL_SIGNING_KEY" empty:"unset" secret:"true"`
	// SigningKeyPrevious is also accepted on verify, for key rotation.
	SigningKeyPrevious string `env:"INTERNAL_SIGNING_KEY_PREVIOUS" empty:"unset" secret:"true"`
	// SignatureMaxAge is the replay window, both directions.
	SignatureMaxAge time.Duration `env:"SIGNATURE_MAX_AGE" envDefault:"60s"`
	// SweepDeadline is one run's time budget, checked between batches.
	SweepDeadline time.Duration `env:"SWEEP_DEADLINE" envDefault:"90s"`
	// BatchStatementTimeout and BatchLockTimeout are set locally in each batch transaction.
	BatchStatementTimeout time.Duration `env:"BATCH_STATEMENT_TIMEOUT" envDefault:"5s"`
	BatchLockTimeout      time.Duration `env:"BATCH_LOCK_TIMEOUT" envDefault:"2s"`
	// CountTimeout bounds a dry run's exact count.
	CountTimeout time.Duration `env:"COUNT_TIMEOUT" envDefault:"10s"`
	// BatchSize is a pass's first batch, within minBatchSize..maxBatchSize.
	BatchSize int `env:"BATCH_SIZE" envDefault:"1000"`
	// BatchTarget is the duration adaptive sizing aims each batch at.
	BatchTarget time.Duration `env:"BATCH_TARGET" envDefault:"100ms"`
	// MaxBatches caps the batches of one pass in one run.
	MaxBatches int `env:"MAX_BATCHES" envDefault:"1000"`
	// BatchPause is slept between batches; 0 for none.
	BatchPause time.Duration `env:"BATCH_PAUSE" envDefault:"0s" allowZero:"true"`
	// SweepPolicyFile is the user's policy file; empty means the bundled catalog.
	SweepPolicyFile string `env:"SWEEP_POLICY_FILE" empty:"unset"`
	// ServerWriteTimeout is http.Server.WriteTimeout, which cuts a long handler.
	ServerWriteTimeout time.Duration `env:"SERVER_WRITE_TIMEOUT" envDefault:"120s"`
	// InternalFetchTimeout is the cron client's timeout; 0 when unset, checked against
	// ServerWriteTimeout when set.
	InternalFetchTimeout time.Duration `env:"INTERNAL_FETCH_TIMEOUT"`
	// ShutdownGrace is how long SIGTERM waits for the batch in flight and the answers.
	ShutdownGrace time.Duration `env:"SHUTDOWN_GRACE" envDefault:"15s"`
	// AppEnv labels the logs; "production" (see Production) also turns on the strict rules.
	AppEnv string `env:"APP_ENV" envDefault:"development"`
	// MaxDryRuns caps the dry runs counting at once; more answer 429 busy. Each holds a pooled
	// connection for up to COUNT_TIMEOUT.
	MaxDryRuns int `env:"MAX_CONCURRENT_DRY_RUNS" envDefault:"2"`
	// LogLevel is the lowest level the API logs; debug adds one line per batch.
	LogLevel LogLevel `env:"LOG_LEVEL" envDefault:"info"`
	// MaxReplicaLag holds a run back while a standby's replay lag is over it; empty or unset: off.
	MaxReplicaLag time.Duration `env:"MAX_REPLICA_LAG" empty:"unset"`
	// MaxReplicaLagBytes holds a run back while a standby, or a physical replication slot, is
	// more WAL bytes behind; empty or unset: off.
	MaxReplicaLagBytes int `env:"MAX_REPLICA_LAG_BYTES" empty:"unset"`
	// RunHistoryRetention is how long the run history keeps a run (a Go duration, or whole days
	// such as 90d); every run prunes what is older.
	RunHistoryRetention Days `env:"RUN_HISTORY_RETENTION" envDefault:"90d"`
	// Retention overrides a pass's retention, keyed "<sweep>.<pass>"; only the syntax is checked
	// here, the sweep package checks names and floors.
	Retention map[string]time.Duration `env:"SWEEP_RETENTION" empty:"unset"`
}

// Cron is the sweepcron binary's configuration.
type Cron struct {
	// APIURL is the API's base URL, absolute http or https.
	APIURL string `env:"API_URL,required,notEmpty" secret:"userinfo"`
	// SigningKey signs every request.
	SigningKey string `env:"INTERNAL_SIGNING_KEY,required,notEmpty" secret:"true"`
	// FetchTimeout bounds one request, answer included.
	FetchTimeout time.Duration `env:"INTERNAL_FETCH_TIMEOUT" envDefault:"150s"`
}

// LoadAPI reads the API's configuration from environ and checks its bounds. On error the
// configuration is the zero value and the error joins every problem found, one per line.
func LoadAPI(environ map[string]string) (API, error) {
	cfg, r := load[API](environ)
	r.checkAPI(&cfg)
	if err := r.err(); err != nil {
		return API{}, err
	}
	return cfg, nil
}

// LoadCron reads the cron client's configuration from environ and checks it. On error the
// configuration is the zero value and the error joins every problem found, one per line.
func LoadCron(environ map[string]string) (Cron, error) {
	cfg, r := load[Cron](environ)
	r.checkCron(&cfg)
	if err := r.err(); err != nil {
		return Cron{}, err
	}
	return cfg, nil
}

// report collects every problem of one load, so boot reports them all at once.
type report struct {
	typ  reflect.Type
	errs []error
	// raw is each variable's text as used: the environment's value, or the default.
	// Messages quote it as the operator wrote it (90s, not 1m30s).
	raw map[string]string
	// bad holds the variables that failed to load; checks between variables skip them, so one
	// typo yields one message, not a cascade of bound errors about a zero value.
	bad map[string]bool
}

func (r *report) addf(key, format string, args ...any) {
	r.bad[key] = true
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

func (r *report) err() error { return errors.Join(r.errs...) }

// ok reports whether every one of keys loaded, so a check that involves them means something.
func (r *report) ok(keys ...string) bool {
	for _, k := range keys {
		if r.bad[k] {
			return false
		}
	}
	return true
}

// set reports whether key holds a value (given or default) rather than being absent.
func (r *report) set(key string) bool { return r.raw[key] != "" }

// show renders KEY=value for a message. A secret shows only its length: an error ends up in logs,
// and a secret in logs is a leak.
func (r *report) show(key string) string {
	v := r.raw[key]
	f, _ := fieldByKey(r.typ, key)
	switch f.Tag.Get(tagSecret) {
	case "true":
		return fmt.Sprintf("%s (%d bytes, value not shown)", key, len(v))
	case "userinfo":
		v = redactURL(v)
	}
	// Quote what would otherwise be ambiguous in a log line: empty, spaces, control or non-ASCII.
	if v == "" || strings.ContainsFunc(v, func(c rune) bool { return c <= ' ' || c == '"' || c > '~' }) {
		return fmt.Sprintf("%s=%q", key, v)
	}
	return key + "=" + v
}

// load parses environ into a T with caarlos0/env and records every problem in the report,
// translated so each names its variable and value.
func load[T any](environ map[string]string) (T, *report) {
	// A nil map would make caarlos0/env fall back to os.Environ(): tests and callers that pass
	// nil mean "nothing set", never "the process environment".
	if environ == nil {
		environ = map[string]string{}
	}
	typ := reflect.TypeFor[T]()
	r := &report{typ: typ, raw: map[string]string{}, bad: map[string]bool{}}

	// caarlos0/env replaces a present-but-empty value with envDefault, and accepts it for a
	// variable without one: refuse it first, since VAR= is far more often a template that
	// expanded to nothing than a wish for the default.
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, opts := envTag(f)
		v, present := environ[key]
		if !present || v != "" || f.Tag.Get(tagEmpty) == "unset" || slices.Contains(opts, "notEmpty") {
			continue
		}
		if d, ok := f.Tag.Lookup("envDefault"); ok {
			r.addf(key, "%s is set but empty (unset it for the default %s)", key, d)
		} else {
			r.addf(key, "%s is set but empty: give it a value or unset it", key)
		}
	}

	cfg, err := env.ParseAsWithOptions[T](env.Options{
		Environment: environ,
		FuncMap: map[reflect.Type]env.ParserFunc{
			reflect.TypeFor[time.Duration](): func(s string) (any, error) { return parseDuration(s) },
			reflect.TypeFor[int]():           func(s string) (any, error) { return parseInt(s) },
			reflect.TypeFor[map[string]time.Duration](): func(s string) (any, error) {
				return parseRetention(s)
			},
		},
		OnSet: func(key string, value any, _ bool) {
			if s, ok := value.(string); ok {
				r.raw[key] = s
			}
		},
	})
	var agg env.AggregateError
	switch {
	case err == nil:
	case errors.As(err, &agg):
		for _, e := range agg.Errors {
			r.addEnvError(e)
		}
	default:
		r.errs = append(r.errs, err)
	}

	// Every duration must be > 0 (one may be 0, none negative): a zero timeout disables the bound
	// it stands for, and a negative one is never meant.
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, _ := envTag(f)
		if f.Type != reflect.TypeFor[time.Duration]() || !r.set(key) || !r.ok(key) {
			continue
		}
		d := time.Duration(reflect.ValueOf(cfg).Field(i).Int())
		switch {
		case f.Tag.Get(tagAllowZero) == "true" && d < 0:
			r.addf(key, "%s must be >= 0", r.show(key))
		case f.Tag.Get(tagAllowZero) != "true" && d <= 0:
			r.addf(key, "%s must be > 0", r.show(key))
		}
	}
	return cfg, r
}

// addEnvError translates one caarlos0/env error so it names the variable (env names the Go field).
func (r *report) addEnvError(e error) {
	var (
		pe    env.ParseError
		unset env.VarIsNotSetError
		empty env.EmptyVarError
	)
	switch {
	case errors.As(e, &pe):
		f, _ := r.typ.FieldByName(pe.Name)
		key, _ := envTag(f)
		r.addf(key, "%s: %v", r.show(key), pe.Err)
	case errors.As(e, &unset):
		r.addf(unset.Key, "%s is required", unset.Key)
	case errors.As(e, &empty):
		r.addf(empty.Key, "%s is set but empty; it is required", empty.Key)
	default:
		r.errs = append(r.errs, e)
	}
}

// checkAPI holds the API's checks between variables and its ranges.
func (r *report) checkAPI(c *API) {
	const (
		deadline  = "SWEEP_DEADLINE"
		statement = "BATCH_STATEMENT_TIMEOUT"
		lock      = "BATCH_LOCK_TIMEOUT"
		count     = "COUNT_TIMEOUT"
		write     = "SERVER_WRITE_TIMEOUT"
		fetch     = "INTERNAL_FETCH_TIMEOUT"
		grace     = "SHUTDOWN_GRACE"
		pause     = "BATCH_PAUSE"
		maxAge    = "SIGNATURE_MAX_AGE"
	)

	// The deadline is checked between batches, so a run can overrun it by one batch, itself
	// bounded by the statement timeout; the write timeout must leave room for both, or
	// http.Server cuts the answer of a run that is still within its rules.
	if r.ok(deadline, statement, write) && !(addSat(c.SweepDeadline, c.BatchStatementTimeout) < c.ServerWriteTimeout) {
		r.addf(write, "%s + %s must be < %s: a run may overrun its deadline by one batch",
			r.show(deadline), r.show(statement), r.show(write))
	}
	// The cron client must wait longer than the server may take, or it reports a run that is
	// still going as unreachable.
	if r.set(fetch) && r.ok(write, fetch) && !(c.ServerWriteTimeout < c.InternalFetchTimeout) {
		r.addf(fetch, "%s must be < %s: the cron client would give up before the server answers",
			r.show(write), r.show(fetch))
	}
	if r.ok(count, write) && !(c.CountTimeout < c.ServerWriteTimeout) {
		r.addf(count, "%s must be < %s: a dry run's count must end before its answer is cut",
			r.show(count), r.show(write))
	}
	// On SIGTERM the batch in flight finishes; the grace must outlast the longest batch.
	if r.ok(statement, grace) && !(c.BatchStatementTimeout < c.ShutdownGrace) {
		r.addf(grace, "%s must be < %s: shutdown must outlast the batch in flight",
			r.show(statement), r.show(grace))
	}
	// A lock wait is part of the statement; a longer lock timeout would never fire.
	if r.ok(lock, statement) && !(c.BatchLockTimeout <= c.BatchStatementTimeout) {
		r.addf(lock, "%s must be <= %s: the statement timeout would fire first",
			r.show(lock), r.show(statement))
	}
	// The pause is slept inside the run's budget; one as long as the budget leaves one batch per run.
	if r.ok(pause, deadline) && c.BatchPause > 0 && !(c.BatchPause < c.SweepDeadline) {
		r.addf(pause, "%s must be < %s: the pause would spend the whole budget",
			r.show(pause), r.show(deadline))
	}
	// These become PostgreSQL statement_timeout/lock_timeout in milliseconds, where 0 means
	// "no timeout": a sub-millisecond value would silently lift the bound.
	for _, t := range []struct {
		key string
		d   time.Duration
	}{{statement, c.BatchStatementTimeout}, {lock, c.BatchLockTimeout}, {count, c.CountTimeout}} {
		if r.ok(t.key) && t.d > 0 && (t.d < pgTimeoutResolution || t.d > pgTimeoutMax) {
			r.addf(t.key, "%s must be within %v..%v: PostgreSQL counts it in milliseconds and reads 0 as no timeout",
				r.show(t.key), pgTimeoutResolution, pgTimeoutMax)
		}
	}
	r.checkReplicaLag(c)
	r.checkRunHistory(c)
	if r.ok(maxAge) && c.SignatureMaxAge > 0 && c.SignatureMaxAge < signatureResolution {
		r.addf(maxAge, "%s must be >= %v: signature timestamps are whole seconds", r.show(maxAge), signatureResolution)
	}
	// A long window keeps a captured request replayable that long; it mends no clock worth having.
	if r.ok(maxAge) && c.SignatureMaxAge > maxSignatureMaxAge {
		r.addf(maxAge, "%s must be <= %v: a captured request stays valid for the whole window",
			r.show(maxAge), maxSignatureMaxAge)
	}
	if r.ok("MAX_CONCURRENT_DRY_RUNS") && (c.MaxDryRuns < 1 || c.MaxDryRuns > maxDryRunsCeiling) {
		r.addf("MAX_CONCURRENT_DRY_RUNS", "%s must be within 1..%d", r.show("MAX_CONCURRENT_DRY_RUNS"), maxDryRunsCeiling)
	}

	if r.ok("BATCH_SIZE") && (c.BatchSize < minBatchSize || c.BatchSize > maxBatchSize) {
		r.addf("BATCH_SIZE", "%s must be within %d..%d", r.show("BATCH_SIZE"), minBatchSize, maxBatchSize)
	}
	if r.ok("MAX_BATCHES") && c.MaxBatches < 1 {
		r.addf("MAX_BATCHES", "%s must be >= 1", r.show("MAX_BATCHES"))
	}

	r.checkKey("INTERNAL_SIGNING_KEY", c.SigningKey)
	r.checkKey("INTERNAL_SIGNING_KEY_PREVIOUS", c.SigningKeyPrevious)
	if Production(c.AppEnv) {
		r.checkKeyVariety("INTERNAL_SIGNING_KEY", c.SigningKey)
		r.checkKeyVariety("INTERNAL_SIGNING_KEY_PREVIOUS", c.SigningKeyPrevious)
	}
	// A previous key without a current one is a rotation half done: every route would answer 503
	// while the operator believes the previous key still works.
	if c.SigningKey == "" && c.SigningKeyPrevious != "" {
		r.addf("INTERNAL_SIGNING_KEY", "%s is set but INTERNAL_SIGNING_KEY is empty: set the current key too",
			r.show("INTERNAL_SIGNING_KEY_PREVIOUS"))
	}
}

// checkRunHistory keeps the run history for at least a day: what happened last night must still
// be there in the morning.
func (r *report) checkRunHistory(c *API) {
	const name = "RUN_HISTORY_RETENTION"
	if r.ok(name) && time.Duration(c.RunHistoryRetention) < 24*time.Hour {
		r.addf(name, "%s must be at least 1d: the history answers for what happened last night", r.show(name))
	}
}

// checkReplicaLag holds the replica throttle's bounds (docs/CRON.md, "Replica lag"). A negative
// or zero MAX_REPLICA_LAG is refused by the duration check every duration gets.
func (r *report) checkReplicaLag(c *API) {
	const (
		lag      = "MAX_REPLICA_LAG"
		bytes    = "MAX_REPLICA_LAG_BYTES"
		deadline = "SWEEP_DEADLINE"
	)
	if r.set(lag) && r.ok(lag) && c.MaxReplicaLag < minReplicaLag {
		r.addf(lag, "%s must be >= %v: a standby that keeps up shows about that much under a batch", r.show(lag), minReplicaLag)
	}
	// The throttle sees how old the WAL a standby replays is. With a limit as long as the budget,
	// it can only react to WAL older than the run: the run's own batches could put the standby a
	// whole budget further behind before the throttle sees the first of them.
	if r.set(lag) && r.ok(lag, deadline) && !(c.MaxReplicaLag < c.SweepDeadline) {
		r.addf(lag, "%s must be < %s: the throttle would see a run's first batch only after the run",
			r.show(lag), r.show(deadline))
	}
	if r.set(bytes) && r.ok(bytes) && c.MaxReplicaLagBytes < minReplicaLagBytes {
		r.addf(bytes, "%s must be >= %d (1 MiB; it counts bytes): one large batch writes about that much WAL",
			r.show(bytes), minReplicaLagBytes)
	}
}

// checkCron holds the cron client's checks. Its fetch timeout is checked against the server's
// write timeout at run time, from GET /internal/sweeps, since only the server knows it.
func (r *report) checkCron(c *Cron) {
	if r.ok("API_URL") {
		if err := checkBaseURL(c.APIURL); err != nil {
			r.addf("API_URL", "%s: %v", r.show("API_URL"), err)
		}
	}
	if r.ok("INTERNAL_SIGNING_KEY") {
		r.checkKey("INTERNAL_SIGNING_KEY", c.SigningKey)
	}
}

// checkKey refuses a set key shorter than minSigningKeyBytes. The key is raw UTF-8 bytes, so its
// length is in bytes. The message names the length, never the key: a secret in logs is a leak.
func (r *report) checkKey(key, value string) {
	if value != "" && len(value) < minSigningKeyBytes {
		r.addf(key, "%s is too short: it must be at least %d bytes", r.show(key), minSigningKeyBytes)
	}
}

// checkKeyVariety refuses, under APP_ENV=production, a set key of fewer than
// minKeyDistinctBytes distinct bytes: the length check alone takes 32 copies of one letter. The
// message names the count, never the key. A hex key has at most 16 distinct bytes and a random
// 64-digit one lacks a digit about one time in four, so the advice is base64.
func (r *report) checkKeyVariety(key, value string) {
	if value == "" || r.bad[key] {
		return
	}
	if n := distinctBytes(value); n < minKeyDistinctBytes {
		r.addf(key, "%s has %d distinct bytes: APP_ENV=production needs at least %d (generate one with openssl rand -base64 48)",
			r.show(key), n, minKeyDistinctBytes)
	}
}

// distinctBytes counts the distinct byte values of s.
func distinctBytes(s string) int {
	var seen [256]bool
	n := 0
	for i := 0; i < len(s); i++ {
		if !seen[s[i]] {
			seen[s[i]] = true
			n++
		}
	}
	return n
}

// checkBaseURL accepts an absolute http or https URL with a host.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("must be an absolute http or https URL")
	}
	if u.Host == "" || u.Hostname() == "" {
		return errors.New("must name a host")
	}
	return nil
}

// redactURL hides a URL's password, which may sit in its userinfo.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	// Unparsable: drop anything up to the last '@', where a password would be.
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "xxxxx" + s[i:]
	}
	return s
}

// envTag returns a field's variable name and its caarlos0/env options.
func envTag(f reflect.StructField) (string, []string) {
	parts := strings.Split(f.Tag.Get("env"), ",")
	return parts[0], parts[1:]
}

// fieldByKey finds the field of typ that reads key.
func fieldByKey(typ reflect.Type, key string) (reflect.StructField, bool) {
	for i := range typ.NumField() {
		if k, _ := envTag(typ.Field(i)); k == key {
			return typ.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// addSat adds two non-negative durations, saturating instead of wrapping: a wrapped sum is
// negative and would pass every "<" check.
func addSat(a, b time.Duration) time.Duration {
	if a > 0 && b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// parseDuration reads a Go duration such as 90s or 100ms.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("not a Go duration such as 90s or 100ms")
	}
	return d, nil
}

// parseInt reads a whole number in base 10.
func parseInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.New("not a whole number")
	}
	return n, nil
}
