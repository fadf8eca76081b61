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
	"reflect"
	"slices"
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
	// minWALRate is the smallest MAX_WAL_RATE, 1 MiB/s: a batch is sized to an eighth of a
	// second's budget, and below this even one batch of the default size writes more; a value
	// that small is more often megabytes meant ("16") than bytes.
	minWALRate = 1 << 20
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

// FlushAfterPage and MaxFlushAfter bound BATCH_FLUSH_AFTER as PostgreSQL bounds
// backend_flush_after: whole pages of 8 KiB, at most 256 of them.
const (
	FlushAfterPage = 8 << 10
	MaxFlushAfter  = 2 << 20
)

// The two values APP_ENV may take, in any case.
const (
	EnvDevelopment = "development"
	EnvProduction  = "production"
)

// Production reports whether appEnv (APP_ENV) names production, which turns on the strict rules:
// no seed-demo, and no signing key with fewer than 16 distinct bytes. The comparison ignores
// case and surrounding spaces, so "Production" is never the lenient mode by accident.
func Production(appEnv string) bool {
	return strings.EqualFold(strings.TrimSpace(appEnv), EnvProduction)
}

// CheckAppEnv refuses an APP_ENV that is neither development nor production (in any case, spaces
// around ignored). Anything else would boot with every production rule off: "prod" or "live"
// is meant as production, and reading it as development is the one mistake that must not pass.
func CheckAppEnv(appEnv string) error {
	if v := strings.TrimSpace(appEnv); strings.EqualFold(v, EnvDevelopment) || strings.EqualFold(v, EnvProduction) {
		return nil
	}
	return fmt.Errorf("APP_ENV=%q is neither %s nor %s (in any case): an unknown value would turn every production rule off",
		appEnv, EnvDevelopment, EnvProduction)
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
	// BatchTarget is the duration adaptive sizing aims each batch at; a self-flushing one's up
	// to its COMMIT (whose wait for the flush is the disk's, whatever the rows). The default is
	// well under the 100 ms a batch on a live table should stay below: batches scatter around the
	// aim (a checkpoint, a neighbour on the CPU), and it is the slowest one a foreground commit
	// meets.
	BatchTarget time.Duration `env:"BATCH_TARGET" envDefault:"40ms"`
	// BatchSyncCommit makes each batch wait at commit for its own WAL to be flushed, as the
	// application's commits do, instead of leaving that flush to whichever commit comes next:
	// beside live traffic, that next commit is the application's (docs/CRON.md).
	BatchSyncCommit bool `env:"BATCH_SYNC_COMMIT" envDefault:"false"`
	// BatchWALCompression sets wal_compression in each batch's transaction: a drain's WAL is
	// mostly the full-page images of the pages it is the first to change after a checkpoint, and
	// lz4 writes them in about 0.6 of the room; empty or unset keeps the server's.
	BatchWALCompression WALCompression `env:"BATCH_WAL_COMPRESSION" empty:"unset"`
	// BatchFlushAfter sets backend_flush_after in each batch's transaction: once its backend has
	// written that much of the pages a drain dirties, it asks the kernel to start writing them
	// out, rather than leaving gigabytes for one writeback burst that stalls the application's
	// commits; empty or unset keeps the server's (0, no hints, unless the server sets it).
	BatchFlushAfter Size `env:"BATCH_FLUSH_AFTER" empty:"unset"`
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
	// MaxWALRate holds a run's batches so that the server writes at most this much WAL a second
	// (bytes, or 16MiB); empty or unset: off.
	MaxWALRate Rate `env:"MAX_WAL_RATE" empty:"unset"`
	// MaxActiveSessions holds a run back while more other sessions of the database are active;
	// MaxActiveSessionsCritical stops it; empty or unset: off.
	MaxActiveSessions         int `env:"MAX_ACTIVE_SESSIONS" empty:"unset"`
	MaxActiveSessionsCritical int `env:"MAX_ACTIVE_SESSIONS_CRITICAL" empty:"unset"`
	// RunHistoryRetention is how long the run history keeps a run (a Go duration, or whole days
	// such as 90d); every run prunes what is older.
	RunHistoryRetention Days `env:"RUN_HISTORY_RETENTION" envDefault:"90d"`
	// ExpectedInterval is how often sweepcron calls each sweep, which the retention verdict
	// judges staleness and overdue rows by; empty or unset: inferred from the run history.
	ExpectedInterval time.Duration `env:"SWEEP_EXPECTED_INTERVAL" empty:"unset"`
	// StatusAddr, when set, serves the read-only status page (GET /status) on a listener of its
	// own; unset or empty: off. Meant for loopback, reached by a port-forward.
	StatusAddr string `env:"STATUS_ADDR" empty:"unset"`
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
			reflect.TypeFor[bool]():          func(s string) (any, error) { return parseBool(s) },
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
