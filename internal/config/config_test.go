package config

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
)

// goodKey is a valid signing key: 40 bytes.
const goodKey = "k3y-that-is-long-enough-for-hmac-sha256!"

// apiEnv is the smallest valid API environment with overrides applied; a "" override is kept
// (it means "present but empty"), use drop to remove a variable.
func apiEnv(overrides map[string]string) map[string]string {
	e := map[string]string{"DATABASE_URL": "postgres://sweeprail@localhost/sweeprail"}
	maps.Copy(e, overrides)
	return e
}

// problems splits a joined error into its messages.
func problems(err error) []string {
	if err == nil {
		return nil
	}
	var j interface{ Unwrap() []error }
	if !errors.As(err, &j) {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range j.Unwrap() {
		out = append(out, e.Error())
	}
	return out
}

// wantProblems asserts err holds exactly len(want) problems and each want is a substring of one.
func wantProblems(t *testing.T, err error, want ...string) {
	t.Helper()
	got := problems(err)
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if strings.Contains(g, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem contains %q; got:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

func TestLoadAPIDefaults(t *testing.T) {
	got, err := LoadAPI(apiEnv(nil))
	if err != nil {
		t.Fatalf("LoadAPI: %v", err)
	}
	want := API{
		DatabaseURL:           "postgres://sweeprail@localhost/sweeprail",
		ListenAddr:            ":8080",
		SignatureMaxAge:       60 * time.Second,
		SweepDeadline:         90 * time.Second,
		BatchStatementTimeout: 5 * time.Second,
		BatchLockTimeout:      2 * time.Second,
		CountTimeout:          10 * time.Second,
		BatchSize:             1000,
		BatchTarget:           40 * time.Millisecond,
		MaxBatches:            1000,
		BatchPause:            0,
		ServerWriteTimeout:    120 * time.Second,
		InternalFetchTimeout:  0,
		ShutdownGrace:         15 * time.Second,
		AppEnv:                "development",
		RunHistoryRetention:   Days(90 * 24 * time.Hour),
		MaxDryRuns:            2,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadAPI defaults:\n got %+v\nwant %+v", got, want)
	}
}

func TestLoadAPIAccepts(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"every value given", map[string]string{
			"LISTEN_ADDR": "127.0.0.1:9000", "INTERNAL_SIGNING_KEY": goodKey,
			"INTERNAL_SIGNING_KEY_PREVIOUS": goodKey + "-old", "SIGNATURE_MAX_AGE": "30s",
			"SWEEP_DEADLINE": "60s", "BATCH_STATEMENT_TIMEOUT": "3s", "BATCH_LOCK_TIMEOUT": "1s",
			"COUNT_TIMEOUT": "20s", "BATCH_SIZE": "500", "BATCH_TARGET": "250ms", "MAX_BATCHES": "10", "BATCH_SYNC_COMMIT": "true",
			"BATCH_PAUSE": "50ms", "SWEEP_POLICY_FILE": "/etc/sweeprail/policy.yaml",
			"SERVER_WRITE_TIMEOUT": "90s", "INTERNAL_FETCH_TIMEOUT": "100s", "SHUTDOWN_GRACE": "30s",
			"APP_ENV": "production", "SWEEP_RETENTION": "notifications.read=60d",
			"MAX_REPLICA_LAG": "1s", "MAX_REPLICA_LAG_BYTES": "67108864", "STATUS_ADDR": "127.0.0.1:8081",
		}},
		// Empty means "not set" for the optional strings.
		{"optional strings empty", map[string]string{
			"INTERNAL_SIGNING_KEY": "", "INTERNAL_SIGNING_KEY_PREVIOUS": "", "SWEEP_POLICY_FILE": "", "SWEEP_RETENTION": "",
			"STATUS_ADDR": "",
		}},
		{"status on any free port", map[string]string{"STATUS_ADDR": "127.0.0.1:0", "LISTEN_ADDR": "127.0.0.1:0"}},
		{"status on every interface", map[string]string{"STATUS_ADDR": ":8081"}},
		// Each bound just satisfied.
		{"deadline + statement just below write timeout", map[string]string{"SWEEP_DEADLINE": "114999ms"}},
		{"write timeout just below fetch timeout", map[string]string{"INTERNAL_FETCH_TIMEOUT": "120001ms"}},
		{"count timeout just below write timeout", map[string]string{"COUNT_TIMEOUT": "119999ms"}},
		{"statement timeout just below grace", map[string]string{"BATCH_STATEMENT_TIMEOUT": "14999ms"}},
		{"lock timeout equal to statement timeout", map[string]string{"BATCH_LOCK_TIMEOUT": "5s"}},
		{"pause just below deadline", map[string]string{"BATCH_PAUSE": "89s"}},
		{"batch size 1", map[string]string{"BATCH_SIZE": "1"}},
		{"synchronous batch commits off", map[string]string{"BATCH_SYNC_COMMIT": "false"}},
		{"batch size 50000", map[string]string{"BATCH_SIZE": "50000"}},
		{"max batches 1", map[string]string{"MAX_BATCHES": "1"}},
		{"statement timeout 1ms", map[string]string{"BATCH_STATEMENT_TIMEOUT": "1ms", "BATCH_LOCK_TIMEOUT": "1ms"}},
		{"signature max age 1s", map[string]string{"SIGNATURE_MAX_AGE": "1s"}},
		{"signature max age 5m", map[string]string{"SIGNATURE_MAX_AGE": "5m"}},
		{"dry runs 1", map[string]string{"MAX_CONCURRENT_DRY_RUNS": "1"}},
		{"dry runs 64", map[string]string{"MAX_CONCURRENT_DRY_RUNS": "64"}},
		// Outside production, a key is only checked for its length.
		{"key of one repeated byte outside production", map[string]string{"INTERNAL_SIGNING_KEY": strings.Repeat("a", 32)}},
		{"production key of exactly 16 distinct bytes", map[string]string{
			"APP_ENV": "production", "INTERNAL_SIGNING_KEY": strings.Repeat("0123456789abcdef", 2)}},
		{"APP_ENV in any case", map[string]string{"APP_ENV": "DEVELOPMENT"}},
		{"APP_ENV production in another case, spaced", map[string]string{"APP_ENV": " Production ", "INTERNAL_SIGNING_KEY": goodKey}},
		{"key of exactly 32 bytes", map[string]string{"INTERNAL_SIGNING_KEY": strings.Repeat("k", 32)}},
		{"replica lag limits empty: off", map[string]string{"MAX_REPLICA_LAG": "", "MAX_REPLICA_LAG_BYTES": ""}},
		{"replica lag at its floor", map[string]string{"MAX_REPLICA_LAG": "100ms"}},
		{"replica lag just below the deadline", map[string]string{"MAX_REPLICA_LAG": "89999ms"}},
		{"replica lag bytes at 1 MiB", map[string]string{"MAX_REPLICA_LAG_BYTES": "1048576"}},
		{"WAL rate in MiB", map[string]string{"MAX_WAL_RATE": "16MiB"}},
		{"WAL rate in bytes per second", map[string]string{"MAX_WAL_RATE": "1048576/s"}},
		{"WAL rate and sessions empty: off", map[string]string{"MAX_WAL_RATE": "", "MAX_ACTIVE_SESSIONS": "", "MAX_ACTIVE_SESSIONS_CRITICAL": ""}},
		{"active sessions with a critical level above", map[string]string{"MAX_ACTIVE_SESSIONS": "25", "MAX_ACTIVE_SESSIONS_CRITICAL": "26"}},
		{"critical level alone", map[string]string{"MAX_ACTIVE_SESSIONS_CRITICAL": "1"}},
		{"run history in days", map[string]string{"RUN_HISTORY_RETENTION": "400d"}},
		{"expected interval of an hour", map[string]string{"SWEEP_EXPECTED_INTERVAL": "1h"}},
		// 16 two-byte runes: the length is counted in bytes, not characters.
		{"key of 32 UTF-8 bytes", map[string]string{"INTERNAL_SIGNING_KEY": strings.Repeat("é", 16)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := LoadAPI(apiEnv(tt.env)); err != nil {
				t.Fatalf("LoadAPI refused a valid configuration:\n%v", err)
			}
		})
	}
}

func TestLoadAPIBounds(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"deadline + statement above write timeout", map[string]string{"SWEEP_DEADLINE": "120s"},
			[]string{"SWEEP_DEADLINE=120s + BATCH_STATEMENT_TIMEOUT=5s must be < SERVER_WRITE_TIMEOUT=120s"}},
		{"deadline + statement equal to write timeout", map[string]string{"SWEEP_DEADLINE": "115s"},
			[]string{"SWEEP_DEADLINE=115s + BATCH_STATEMENT_TIMEOUT=5s must be < SERVER_WRITE_TIMEOUT=120s"}},
		{"write timeout lowered below deadline + statement", map[string]string{"SERVER_WRITE_TIMEOUT": "60s"},
			[]string{"SWEEP_DEADLINE=90s + BATCH_STATEMENT_TIMEOUT=5s must be < SERVER_WRITE_TIMEOUT=60s"}},
		// A wrapped sum would be negative and pass "<".
		{"deadline + statement overflowing", map[string]string{"SWEEP_DEADLINE": "2562047h47m16s"},
			[]string{"SWEEP_DEADLINE=2562047h47m16s + BATCH_STATEMENT_TIMEOUT=5s must be < SERVER_WRITE_TIMEOUT=120s"}},
		{"fetch timeout below write timeout", map[string]string{"INTERNAL_FETCH_TIMEOUT": "100s"},
			[]string{"SERVER_WRITE_TIMEOUT=120s must be < INTERNAL_FETCH_TIMEOUT=100s"}},
		{"fetch timeout equal to write timeout", map[string]string{"INTERNAL_FETCH_TIMEOUT": "120s"},
			[]string{"SERVER_WRITE_TIMEOUT=120s must be < INTERNAL_FETCH_TIMEOUT=120s"}},
		{"count timeout above write timeout", map[string]string{"COUNT_TIMEOUT": "130s"},
			[]string{"COUNT_TIMEOUT=130s must be < SERVER_WRITE_TIMEOUT=120s"}},
		{"count timeout equal to write timeout", map[string]string{"COUNT_TIMEOUT": "2m"},
			[]string{"COUNT_TIMEOUT=2m must be < SERVER_WRITE_TIMEOUT=120s"}},
		{"statement timeout above grace", map[string]string{"BATCH_STATEMENT_TIMEOUT": "20s"},
			[]string{"BATCH_STATEMENT_TIMEOUT=20s must be < SHUTDOWN_GRACE=15s"}},
		{"statement timeout equal to grace", map[string]string{"BATCH_STATEMENT_TIMEOUT": "15s"},
			[]string{"BATCH_STATEMENT_TIMEOUT=15s must be < SHUTDOWN_GRACE=15s"}},
		{"lock timeout above statement timeout", map[string]string{"BATCH_LOCK_TIMEOUT": "6s"},
			[]string{"BATCH_LOCK_TIMEOUT=6s must be <= BATCH_STATEMENT_TIMEOUT=5s"}},
		{"pause above deadline", map[string]string{"BATCH_PAUSE": "100s"},
			[]string{"BATCH_PAUSE=100s must be < SWEEP_DEADLINE=90s"}},
		{"pause equal to deadline", map[string]string{"BATCH_PAUSE": "90s"},
			[]string{"BATCH_PAUSE=90s must be < SWEEP_DEADLINE=90s"}},
		{"statement timeout below a millisecond", map[string]string{"BATCH_STATEMENT_TIMEOUT": "999us", "BATCH_LOCK_TIMEOUT": "999us"},
			[]string{"BATCH_STATEMENT_TIMEOUT=999us must be within 1ms..", "BATCH_LOCK_TIMEOUT=999us must be within 1ms.."}},
		{"lock timeout below a millisecond", map[string]string{"BATCH_LOCK_TIMEOUT": "500us"},
			[]string{"BATCH_LOCK_TIMEOUT=500us must be within 1ms.."}},
		{"count timeout below a millisecond", map[string]string{"COUNT_TIMEOUT": "1ns"},
			[]string{"COUNT_TIMEOUT=1ns must be within 1ms.."}},
		{"statement timeout above PostgreSQL's maximum", map[string]string{
			"BATCH_STATEMENT_TIMEOUT": "597h", "SHUTDOWN_GRACE": "1000h", "SERVER_WRITE_TIMEOUT": "1000h"},
			[]string{"BATCH_STATEMENT_TIMEOUT=597h must be within 1ms..596h31m23.647s"}},
		{"signature max age below a second", map[string]string{"SIGNATURE_MAX_AGE": "999ms"},
			[]string{"SIGNATURE_MAX_AGE=999ms must be >= 1s"}},
		// A ten-year window would accept a five-year-old signature.
		{"signature max age ten years", map[string]string{"SIGNATURE_MAX_AGE": "87600h"},
			[]string{"SIGNATURE_MAX_AGE=87600h must be <= 5m0s"}},
		{"signature max age just above 5m", map[string]string{"SIGNATURE_MAX_AGE": "5m1s"},
			[]string{"SIGNATURE_MAX_AGE=5m1s must be <= 5m0s"}},
		{"dry runs 0", map[string]string{"MAX_CONCURRENT_DRY_RUNS": "0"}, []string{"MAX_CONCURRENT_DRY_RUNS=0 must be within 1..64"}},
		{"dry runs 65", map[string]string{"MAX_CONCURRENT_DRY_RUNS": "65"}, []string{"MAX_CONCURRENT_DRY_RUNS=65 must be within 1..64"}},
		{"batch size 0", map[string]string{"BATCH_SIZE": "0"}, []string{"BATCH_SIZE=0 must be within 1..50000"}},
		{"synchronous batch commits as on", map[string]string{"BATCH_SYNC_COMMIT": "on"}, []string{"BATCH_SYNC_COMMIT=on: want true or false"}},
		{"synchronous batch commits empty", map[string]string{"BATCH_SYNC_COMMIT": ""},
			[]string{"BATCH_SYNC_COMMIT is set but empty (unset it for the default false)"}},
		{"batch size 50001", map[string]string{"BATCH_SIZE": "50001"}, []string{"BATCH_SIZE=50001 must be within 1..50000"}},
		{"batch size negative", map[string]string{"BATCH_SIZE": "-5"}, []string{"BATCH_SIZE=-5 must be within 1..50000"}},
		{"max batches 0", map[string]string{"MAX_BATCHES": "0"}, []string{"MAX_BATCHES=0 must be >= 1"}},
		{"max batches negative", map[string]string{"MAX_BATCHES": "-1"}, []string{"MAX_BATCHES=-1 must be >= 1"}},
		{"replica lag below its floor", map[string]string{"MAX_REPLICA_LAG": "99ms"},
			[]string{"MAX_REPLICA_LAG=99ms must be >= 100ms"}},
		{"replica lag equal to the deadline", map[string]string{"MAX_REPLICA_LAG": "90s"},
			[]string{"MAX_REPLICA_LAG=90s must be < SWEEP_DEADLINE=90s"}},
		{"deadline lowered to the replica lag", map[string]string{"MAX_REPLICA_LAG": "10s", "SWEEP_DEADLINE": "10s"},
			[]string{"MAX_REPLICA_LAG=10s must be < SWEEP_DEADLINE=10s"}},
		{"replica lag bytes negative", map[string]string{"MAX_REPLICA_LAG_BYTES": "-1"},
			[]string{"MAX_REPLICA_LAG_BYTES=-1 must be >= 1048576"}},
		{"expected interval under a minute", map[string]string{"SWEEP_EXPECTED_INTERVAL": "30s"},
			[]string{"SWEEP_EXPECTED_INTERVAL=30s must be at least 1m"}},
		{"expected interval past the history", map[string]string{"SWEEP_EXPECTED_INTERVAL": "744h", "RUN_HISTORY_RETENTION": "90d"},
			[]string{"SWEEP_EXPECTED_INTERVAL=744h times 3 must be within RUN_HISTORY_RETENTION=90d"}},
		{"expected interval malformed", map[string]string{"SWEEP_EXPECTED_INTERVAL": "hourly"},
			[]string{"SWEEP_EXPECTED_INTERVAL"}},
		{"run history kept less than a day", map[string]string{"RUN_HISTORY_RETENTION": "12h"},
			[]string{"RUN_HISTORY_RETENTION=12h must be at least 1d"}},
		{"run history retention malformed", map[string]string{"RUN_HISTORY_RETENTION": "ninety days"},
			[]string{"RUN_HISTORY_RETENTION"}},
		{"replica lag bytes zero", map[string]string{"MAX_REPLICA_LAG_BYTES": "0"},
			[]string{"MAX_REPLICA_LAG_BYTES=0 must be >= 1048576"}},
		{"replica lag bytes in megabytes by mistake", map[string]string{"MAX_REPLICA_LAG_BYTES": "64"},
			[]string{"MAX_REPLICA_LAG_BYTES=64 must be >= 1048576 (1 MiB; it counts bytes)"}},
		{"WAL rate in megabytes by mistake", map[string]string{"MAX_WAL_RATE": "16"},
			[]string{"MAX_WAL_RATE=16 must be >= 1MiB (it counts bytes per second)"}},
		{"WAL rate in decimal megabytes", map[string]string{"MAX_WAL_RATE": "16MB"},
			[]string{"MAX_WAL_RATE=16MB: invalid byte rate \"16MB\": want whole bytes per second, or with KiB, MiB or GiB"}},
		{"WAL rate negative", map[string]string{"MAX_WAL_RATE": "-1MiB"}, []string{"MAX_WAL_RATE=-1MiB: invalid byte rate"}},
		{"WAL rate overflowing", map[string]string{"MAX_WAL_RATE": "9000000000GiB"}, []string{"MAX_WAL_RATE=9000000000GiB: invalid byte rate"}},
		{"active sessions zero", map[string]string{"MAX_ACTIVE_SESSIONS": "0"}, []string{"MAX_ACTIVE_SESSIONS=0 must be >= 1"}},
		{"active sessions malformed", map[string]string{"MAX_ACTIVE_SESSIONS": "many"}, []string{"MAX_ACTIVE_SESSIONS=many"}},
		{"critical level negative", map[string]string{"MAX_ACTIVE_SESSIONS_CRITICAL": "-3"}, []string{"MAX_ACTIVE_SESSIONS_CRITICAL=-3 must be >= 1"}},
		{"critical level at the waiting level", map[string]string{"MAX_ACTIVE_SESSIONS": "25", "MAX_ACTIVE_SESSIONS_CRITICAL": "25"},
			[]string{"MAX_ACTIVE_SESSIONS_CRITICAL=25 must be > MAX_ACTIVE_SESSIONS=25"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadAPI(apiEnv(tt.env))
			if err == nil {
				t.Fatal("LoadAPI accepted the configuration")
			}
			if !reflect.DeepEqual(cfg, API{}) {
				t.Errorf("LoadAPI returned a configuration with its error: %+v", cfg)
			}
			wantProblems(t, err, tt.want...)
		})
	}
}

// positiveDurations lists the API's durations that must be > 0.
func positiveDurations() []string {
	return []string{
		"SIGNATURE_MAX_AGE", "SWEEP_DEADLINE", "BATCH_STATEMENT_TIMEOUT", "BATCH_LOCK_TIMEOUT",
		"COUNT_TIMEOUT", "BATCH_TARGET", "SERVER_WRITE_TIMEOUT", "INTERNAL_FETCH_TIMEOUT", "SHUTDOWN_GRACE",
	}
}

func TestLoadAPIMalformed(t *testing.T) {
	type tc struct {
		name string
		env  map[string]string
		want string
	}
	var tests []tc
	for _, v := range positiveDurations() {
		tests = append(tests,
			tc{v + " abc", map[string]string{v: "abc"}, v + "=abc: not a Go duration"},
			tc{v + " without unit", map[string]string{v: "90"}, v + "=90: not a Go duration"},
			tc{v + " with spaces", map[string]string{v: " 90s"}, v + `=" 90s": not a Go duration`},
			tc{v + " empty", map[string]string{v: ""}, v + " is set but empty"},
			tc{v + " negative", map[string]string{v: "-1s"}, v + "=-1s must be > 0"},
			tc{v + " zero", map[string]string{v: "0"}, v + "=0 must be > 0"},
			tc{v + " zero with unit", map[string]string{v: "0s"}, v + "=0s must be > 0"},
		)
	}
	tests = append(tests,
		tc{"BATCH_PAUSE abc", map[string]string{"BATCH_PAUSE": "abc"}, "BATCH_PAUSE=abc: not a Go duration"},
		tc{"BATCH_PAUSE empty", map[string]string{"BATCH_PAUSE": ""}, "BATCH_PAUSE is set but empty (unset it for the default 0s)"},
		tc{"BATCH_PAUSE negative", map[string]string{"BATCH_PAUSE": "-1ms"}, "BATCH_PAUSE=-1ms must be >= 0"},
		tc{"BATCH_SIZE abc", map[string]string{"BATCH_SIZE": "abc"}, "BATCH_SIZE=abc: not a whole number"},
		tc{"BATCH_SIZE 1.5", map[string]string{"BATCH_SIZE": "1.5"}, "BATCH_SIZE=1.5: not a whole number"},
		tc{"BATCH_SIZE 1e3", map[string]string{"BATCH_SIZE": "1e3"}, "BATCH_SIZE=1e3: not a whole number"},
		tc{"BATCH_SIZE empty", map[string]string{"BATCH_SIZE": ""}, "BATCH_SIZE is set but empty (unset it for the default 1000)"},
		tc{"MAX_BATCHES abc", map[string]string{"MAX_BATCHES": "abc"}, "MAX_BATCHES=abc: not a whole number"},
		tc{"MAX_BATCHES 1.5", map[string]string{"MAX_BATCHES": "1.5"}, "MAX_BATCHES=1.5: not a whole number"},
		tc{"MAX_BATCHES empty", map[string]string{"MAX_BATCHES": ""}, "MAX_BATCHES is set but empty"},
		tc{"MAX_REPLICA_LAG abc", map[string]string{"MAX_REPLICA_LAG": "abc"}, "MAX_REPLICA_LAG=abc: not a Go duration"},
		tc{"MAX_REPLICA_LAG without unit", map[string]string{"MAX_REPLICA_LAG": "1"}, "MAX_REPLICA_LAG=1: not a Go duration"},
		tc{"MAX_REPLICA_LAG negative", map[string]string{"MAX_REPLICA_LAG": "-1s"}, "MAX_REPLICA_LAG=-1s must be > 0"},
		tc{"MAX_REPLICA_LAG zero", map[string]string{"MAX_REPLICA_LAG": "0s"}, "MAX_REPLICA_LAG=0s must be > 0"},
		tc{"MAX_REPLICA_LAG_BYTES abc", map[string]string{"MAX_REPLICA_LAG_BYTES": "abc"}, "MAX_REPLICA_LAG_BYTES=abc: not a whole number"},
		tc{"MAX_REPLICA_LAG_BYTES with a unit", map[string]string{"MAX_REPLICA_LAG_BYTES": "64MB"}, "MAX_REPLICA_LAG_BYTES=64MB: not a whole number"},
		tc{"MAX_CONCURRENT_DRY_RUNS abc", map[string]string{"MAX_CONCURRENT_DRY_RUNS": "abc"}, "MAX_CONCURRENT_DRY_RUNS=abc: not a whole number"},
		tc{"STATUS_ADDR without a port", map[string]string{"STATUS_ADDR": "127.0.0.1"}, "STATUS_ADDR=127.0.0.1: want host:port"},
		tc{"STATUS_ADDR with a bad port", map[string]string{"STATUS_ADDR": "127.0.0.1:http"}, `STATUS_ADDR=127.0.0.1:http: port "http" is not a number`},
		tc{"STATUS_ADDR past the last port", map[string]string{"STATUS_ADDR": "127.0.0.1:70000"}, `port "70000" is not a number within 0..65535`},
		tc{"STATUS_ADDR is LISTEN_ADDR", map[string]string{"STATUS_ADDR": "127.0.0.1:8080", "LISTEN_ADDR": "127.0.0.1:8080"},
			"STATUS_ADDR=127.0.0.1:8080 is LISTEN_ADDR=127.0.0.1:8080: the status page needs a listener of its own"},
		tc{"LISTEN_ADDR empty", map[string]string{"LISTEN_ADDR": ""}, "LISTEN_ADDR is set but empty (unset it for the default :8080)"},
		tc{"APP_ENV empty", map[string]string{"APP_ENV": ""}, "APP_ENV is set but empty"},
		tc{"APP_ENV prod", map[string]string{"APP_ENV": "prod"}, `APP_ENV="prod" is neither development nor production (in any case)`},
		tc{"APP_ENV staging", map[string]string{"APP_ENV": "staging"}, `APP_ENV="staging" is neither development nor production`},
		tc{"APP_ENV production with a typo", map[string]string{"APP_ENV": "productoin"}, `APP_ENV="productoin" is neither`},
		tc{"DATABASE_URL empty", map[string]string{"DATABASE_URL": ""}, "DATABASE_URL is set but empty; it is required"},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadAPI(apiEnv(tt.env))
			if err == nil {
				t.Fatal("LoadAPI accepted the configuration")
			}
			// One bad variable is one message: the checks between variables skip it.
			wantProblems(t, err, tt.want)
		})
	}

	t.Run("DATABASE_URL missing", func(t *testing.T) {
		_, err := LoadAPI(map[string]string{})
		wantProblems(t, err, "DATABASE_URL is required")
	})
}

func TestLoadAPIReplicaLag(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		lag   time.Duration
		bytes int
	}{
		{"unset: off", nil, 0, 0},
		{"empty: off", map[string]string{"MAX_REPLICA_LAG": "", "MAX_REPLICA_LAG_BYTES": ""}, 0, 0},
		{"both set", map[string]string{"MAX_REPLICA_LAG": "1500ms", "MAX_REPLICA_LAG_BYTES": "67108864"}, 1500 * time.Millisecond, 64 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadAPI(apiEnv(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MaxReplicaLag != tt.lag || cfg.MaxReplicaLagBytes != tt.bytes {
				t.Errorf("MaxReplicaLag %v, MaxReplicaLagBytes %d; want %v, %d", cfg.MaxReplicaLag, cfg.MaxReplicaLagBytes, tt.lag, tt.bytes)
			}
		})
	}
}

func TestLoadAPIReportsEveryProblem(t *testing.T) {
	_, err := LoadAPI(map[string]string{
		"SWEEP_DEADLINE":       "",
		"BATCH_SIZE":           "abc",
		"COUNT_TIMEOUT":        "-1s",
		"SERVER_WRITE_TIMEOUT": "60s",
		"INTERNAL_SIGNING_KEY": "short",
		"SWEEP_RETENTION":      "notifications.read=0d",
	})
	wantProblems(t, err,
		"DATABASE_URL is required",
		"SWEEP_DEADLINE is set but empty",
		"BATCH_SIZE=abc: not a whole number",
		"COUNT_TIMEOUT=-1s must be > 0",
		"INTERNAL_SIGNING_KEY (5 bytes, value not shown) is too short",
		`SWEEP_RETENTION=notifications.read=0d: entry "notifications.read=0d": must be > 0`,
	)
}

func TestLoadAPINilEnvironIsEmpty(t *testing.T) {
	// caarlos0/env reads the process environment when handed a nil map; LoadAPI must not.
	t.Setenv("DATABASE_URL", "postgres://from-the-process")
	_, err := LoadAPI(nil)
	wantProblems(t, err, "DATABASE_URL is required")
}

func TestLoadAPISigningKeys(t *testing.T) {
	short := "s3cr3t-but-only-thirty-one-byte" // 31 bytes
	shortUTF8 := strings.Repeat("é", 15) + "x" // 31 bytes, 16 characters
	tests := []struct {
		name   string
		env    map[string]string
		secret string
		want   []string
	}{
		{"current key 31 bytes", map[string]string{"INTERNAL_SIGNING_KEY": short}, short,
			[]string{"INTERNAL_SIGNING_KEY (31 bytes, value not shown) is too short: it must be at least 32 bytes"}},
		{"current key 31 UTF-8 bytes", map[string]string{"INTERNAL_SIGNING_KEY": shortUTF8}, shortUTF8,
			[]string{"INTERNAL_SIGNING_KEY (31 bytes, value not shown) is too short"}},
		{"previous key short", map[string]string{"INTERNAL_SIGNING_KEY": goodKey, "INTERNAL_SIGNING_KEY_PREVIOUS": short}, short,
			[]string{"INTERNAL_SIGNING_KEY_PREVIOUS (31 bytes, value not shown) is too short"}},
		{"previous key without current", map[string]string{"INTERNAL_SIGNING_KEY_PREVIOUS": goodKey}, goodKey,
			[]string{"INTERNAL_SIGNING_KEY_PREVIOUS (40 bytes, value not shown) is set but INTERNAL_SIGNING_KEY is empty"}},
		{"both short", map[string]string{"INTERNAL_SIGNING_KEY": short, "INTERNAL_SIGNING_KEY_PREVIOUS": "x"}, short,
			[]string{"INTERNAL_SIGNING_KEY (31 bytes", "INTERNAL_SIGNING_KEY_PREVIOUS (1 bytes"}},
		// 32 copies of one letter once booted in production.
		{"production key of one repeated byte", map[string]string{"APP_ENV": "production", "INTERNAL_SIGNING_KEY": strings.Repeat("a", 32)},
			strings.Repeat("a", 32),
			[]string{"INTERNAL_SIGNING_KEY (32 bytes, value not shown) has 1 distinct bytes: APP_ENV=production needs at least 16"}},
		{"production key of 15 distinct bytes", map[string]string{"APP_ENV": "Production ", "INTERNAL_SIGNING_KEY": strings.Repeat("0123456789abcde", 3)},
			strings.Repeat("0123456789abcde", 3),
			[]string{"INTERNAL_SIGNING_KEY (45 bytes, value not shown) has 15 distinct bytes"}},
		{"production previous key of few distinct bytes", map[string]string{"APP_ENV": "production",
			"INTERNAL_SIGNING_KEY": goodKey, "INTERNAL_SIGNING_KEY_PREVIOUS": strings.Repeat("ab", 20)},
			strings.Repeat("ab", 20),
			[]string{"INTERNAL_SIGNING_KEY_PREVIOUS (40 bytes, value not shown) has 2 distinct bytes"}},
		// A short key is one problem, not two.
		{"production key short and uniform", map[string]string{"APP_ENV": "production", "INTERNAL_SIGNING_KEY": "aaaa"}, "aaaa",
			[]string{"INTERNAL_SIGNING_KEY (4 bytes, value not shown) is too short"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadAPI(apiEnv(tt.env))
			wantProblems(t, err, tt.want...)
			if strings.Contains(err.Error(), tt.secret) {
				t.Errorf("the error shows the key:\n%v", err)
			}
		})
	}
}

func TestLoadAPIRetention(t *testing.T) {
	good := []struct {
		name string
		in   string
		want map[string]time.Duration
	}{
		{"two entries", "notifications.read=30d,email-messages.sent=14d",
			map[string]time.Duration{"notifications.read": 720 * time.Hour, "email-messages.sent": 336 * time.Hour}},
		{"Go durations", "idempotency-records.completed=48h,refresh-tokens.expired=90m",
			map[string]time.Duration{"idempotency-records.completed": 48 * time.Hour, "refresh-tokens.expired": 90 * time.Minute}},
		{"spaces around entries", " audit-log.compliance = 365d , outbox.dispatched=7d ",
			map[string]time.Duration{"audit-log.compliance": 365 * 24 * time.Hour, "outbox.dispatched": 7 * 24 * time.Hour}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadAPI(apiEnv(map[string]string{"SWEEP_RETENTION": tt.in}))
			if err != nil {
				t.Fatalf("LoadAPI: %v", err)
			}
			if !maps.Equal(cfg.Retention, tt.want) {
				t.Errorf("Retention = %v, want %v", cfg.Retention, tt.want)
			}
		})
	}

	bad := []struct {
		name, in, want string
	}{
		{"no equals sign", "notifications.read", `entry "notifications.read": want <sweep>.<pass>=<duration>`},
		{"colon instead of equals", "notifications.read:30d", `entry "notifications.read:30d": want <sweep>.<pass>=<duration>`},
		{"empty key", "=30d", `entry "=30d": want <sweep>.<pass>=<duration>`},
		{"space in key", "notifications read=30d", `entry "notifications read=30d": want`},
		{"empty value", "notifications.read=", `entry "notifications.read=": invalid duration ""`},
		{"malformed value", "notifications.read=abc", `entry "notifications.read=abc": invalid duration "abc"`},
		{"fractional days", "notifications.read=1.5d", `invalid duration "1.5d"`},
		{"zero days", "notifications.read=0d", `entry "notifications.read=0d": must be > 0`},
		{"zero duration", "notifications.read=0s", `entry "notifications.read=0s": must be > 0`},
		{"negative days", "notifications.read=-30d", `entry "notifications.read=-30d": must be > 0`},
		{"negative duration", "notifications.read=-1h", `entry "notifications.read=-1h": must be > 0`},
		{"duplicate key", "notifications.read=30d,notifications.read=60d", `entry "notifications.read=60d": duplicate key "notifications.read"`},
		{"trailing comma", "notifications.read=30d,", "empty entry"},
		{"only commas", ",", "empty entry"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadAPI(apiEnv(map[string]string{"SWEEP_RETENTION": tt.in}))
			wantProblems(t, err, tt.want)
			if !strings.HasPrefix(err.Error(), "SWEEP_RETENTION=") {
				t.Errorf("the error does not name SWEEP_RETENTION and its value: %v", err)
			}
		})
	}

	t.Run("every bad entry named", func(t *testing.T) {
		_, err := LoadAPI(apiEnv(map[string]string{"SWEEP_RETENTION": "a.b=abc,c.d=30d,e.f=0d"}))
		wantProblems(t, err, `entry "a.b=abc"`)
		if !strings.Contains(err.Error(), `entry "e.f=0d"`) {
			t.Errorf("the second bad entry is not named:\n%v", err)
		}
	})
}

func TestLoadCron(t *testing.T) {
	good := map[string]string{"API_URL": "http://api:8080", "INTERNAL_SIGNING_KEY": goodKey}
	with := func(overrides map[string]string, drop ...string) map[string]string {
		e := maps.Clone(good)
		maps.Copy(e, overrides)
		for _, k := range drop {
			delete(e, k)
		}
		return e
	}

	t.Run("defaults", func(t *testing.T) {
		got, err := LoadCron(good)
		if err != nil {
			t.Fatalf("LoadCron: %v", err)
		}
		want := Cron{APIURL: "http://api:8080", SigningKey: goodKey, FetchTimeout: 150 * time.Second}
		if got != want {
			t.Errorf("LoadCron = %+v, want %+v", got, want)
		}
	})

	accepts := []struct {
		name string
		env  map[string]string
	}{
		{"https with a path prefix", with(map[string]string{"API_URL": "https://example.com/sweeprail/"})},
		{"fetch timeout given", with(map[string]string{"INTERNAL_FETCH_TIMEOUT": "3m"})},
		{"key of 32 bytes", with(map[string]string{"INTERNAL_SIGNING_KEY": strings.Repeat("k", 32)})},
	}
	for _, tt := range accepts {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := LoadCron(tt.env); err != nil {
				t.Fatalf("LoadCron refused a valid configuration:\n%v", err)
			}
		})
	}

	refuses := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"API_URL missing", with(nil, "API_URL"), []string{"API_URL is required"}},
		{"API_URL empty", with(map[string]string{"API_URL": ""}), []string{"API_URL is set but empty"}},
		{"API_URL relative", with(map[string]string{"API_URL": "/internal"}), []string{"API_URL=/internal: must be an absolute http or https URL"}},
		{"API_URL without scheme", with(map[string]string{"API_URL": "api:8080"}), []string{"API_URL=api:8080: must be an absolute http or https URL"}},
		{"API_URL ftp", with(map[string]string{"API_URL": "ftp://api"}), []string{"API_URL=ftp://api: must be an absolute http or https URL"}},
		{"API_URL without host", with(map[string]string{"API_URL": "http:///internal"}), []string{"API_URL=http:///internal: must name a host"}},
		{"API_URL unparsable", with(map[string]string{"API_URL": "http://api:80 80"}), []string{`API_URL="http://api:80 80": not a URL`}},
		{"INTERNAL_SIGNING_KEY missing", with(nil, "INTERNAL_SIGNING_KEY"), []string{"INTERNAL_SIGNING_KEY is required"}},
		{"INTERNAL_SIGNING_KEY empty", with(map[string]string{"INTERNAL_SIGNING_KEY": ""}), []string{"INTERNAL_SIGNING_KEY is set but empty; it is required"}},
		{"INTERNAL_SIGNING_KEY short", with(map[string]string{"INTERNAL_SIGNING_KEY": "0123456789"}),
			[]string{"INTERNAL_SIGNING_KEY (10 bytes, value not shown) is too short"}},
		{"INTERNAL_FETCH_TIMEOUT abc", with(map[string]string{"INTERNAL_FETCH_TIMEOUT": "abc"}), []string{"INTERNAL_FETCH_TIMEOUT=abc: not a Go duration"}},
		{"INTERNAL_FETCH_TIMEOUT empty", with(map[string]string{"INTERNAL_FETCH_TIMEOUT": ""}), []string{"INTERNAL_FETCH_TIMEOUT is set but empty (unset it for the default 150s)"}},
		{"INTERNAL_FETCH_TIMEOUT zero", with(map[string]string{"INTERNAL_FETCH_TIMEOUT": "0s"}), []string{"INTERNAL_FETCH_TIMEOUT=0s must be > 0"}},
		{"INTERNAL_FETCH_TIMEOUT negative", with(map[string]string{"INTERNAL_FETCH_TIMEOUT": "-5s"}), []string{"INTERNAL_FETCH_TIMEOUT=-5s must be > 0"}},
		{"everything wrong", map[string]string{"INTERNAL_FETCH_TIMEOUT": "0"},
			[]string{"API_URL is required", "INTERNAL_SIGNING_KEY is required", "INTERNAL_FETCH_TIMEOUT=0 must be > 0"}},
	}
	for _, tt := range refuses {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadCron(tt.env)
			if cfg != (Cron{}) {
				t.Errorf("LoadCron returned a configuration with its error: %+v", cfg)
			}
			wantProblems(t, err, tt.want...)
			if strings.Contains(err.Error(), "0123456789") {
				t.Errorf("the error shows the key:\n%v", err)
			}
		})
	}

	t.Run("API_URL password not shown", func(t *testing.T) {
		for _, u := range []string{"ftp://ops:hunter2@api", "http://ops:hunter2@api:80 80/"} {
			_, err := LoadCron(with(map[string]string{"API_URL": u}))
			if err == nil || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("API_URL=%s: error %v shows the password or is missing", u, err)
			}
		}
	})
}

func TestParseDays(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "30d", want: 720 * time.Hour},
		{in: "1d", want: 24 * time.Hour},
		{in: "0d", want: 0},
		{in: "-2d", want: -48 * time.Hour},
		{in: "48h", want: 48 * time.Hour},
		{in: "90s", want: 90 * time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "106751d", want: 106751 * 24 * time.Hour},
		{in: "106752d", wantErr: true}, // past time.Duration's range
		{in: "1.5d", wantErr: true},
		{in: "d", wantErr: true},
		{in: "30D", wantErr: true},
		{in: "1d12h", wantErr: true},
		{in: " 30d", wantErr: true},
		{in: "30", wantErr: true},
		{in: "", wantErr: true},
		{in: "abc", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDays(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseDays(%q) = %v, %v; want error %v", tt.in, got, err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tt.in) {
				t.Errorf("ParseDays(%q) error %q does not name the value", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseDays(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestEnviron(t *testing.T) {
	got := Environ([]string{
		"A=1",
		"B=x=y",    // only the first '=' splits
		"EMPTY=",   // present and empty
		"NOEQUALS", // skipped
		"=C:=C:\\", // Windows' per-drive entries: skipped
		"A=2",      // the first pair wins, as with os.Getenv
	})
	want := map[string]string{"A": "1", "B": "x=y", "EMPTY": ""}
	if !maps.Equal(got, want) {
		t.Errorf("Environ = %v, want %v", got, want)
	}
	if got := Environ(nil); got == nil || len(got) != 0 {
		t.Errorf("Environ(nil) = %#v, want an empty map", got)
	}
}

func TestLoadAPIBatchSyncCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"unset: asynchronous batch commits", nil, false},
		{"false", map[string]string{"BATCH_SYNC_COMMIT": "false"}, false},
		{"true", map[string]string{"BATCH_SYNC_COMMIT": "true"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := LoadAPI(apiEnv(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BatchSyncCommit != tc.want {
				t.Errorf("BatchSyncCommit %t, want %t", cfg.BatchSyncCommit, tc.want)
			}
		})
	}
}
