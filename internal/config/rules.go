package config

import (
	"errors"
	"math"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/sweeprail/sweeprail/internal/wire"
)

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
	r.checkPace(c)
	r.checkRunHistory(c)
	r.checkExpectedInterval(c)
	r.checkStatusAddr(c)
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
	if f := c.BatchFlushAfter; r.set("BATCH_FLUSH_AFTER") && r.ok("BATCH_FLUSH_AFTER") &&
		(f < FlushAfterPage || f > MaxFlushAfter || f%FlushAfterPage != 0) {
		r.addf("BATCH_FLUSH_AFTER", "%s must be a whole number of 8KiB pages within 8KiB..2MiB, "+
			"PostgreSQL's range for backend_flush_after (unset keeps the server's)", r.show("BATCH_FLUSH_AFTER"))
	}

	r.checkKey("INTERNAL_SIGNING_KEY", c.SigningKey)
	r.checkKey("INTERNAL_SIGNING_KEY_PREVIOUS", c.SigningKeyPrevious)
	if r.ok("APP_ENV") {
		if err := CheckAppEnv(c.AppEnv); err != nil {
			r.addf("APP_ENV", "%v", err)
		}
	}
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

// checkExpectedInterval keeps SWEEP_EXPECTED_INTERVAL to what a cron schedule can be: a minute
// at least (a sweep called more often than its lease allows only skips), and within the history's
// retention, past which no run would be left to judge it by.
func (r *report) checkExpectedInterval(c *API) {
	const name, history = "SWEEP_EXPECTED_INTERVAL", "RUN_HISTORY_RETENTION"
	if !r.set(name) || !r.ok(name) {
		return
	}
	if c.ExpectedInterval < time.Minute {
		r.addf(name, "%s must be at least 1m: sweepcron's schedule, not a run's budget", r.show(name))
	} else if r.ok(history) && c.ExpectedInterval*wire.StaleIntervals > time.Duration(c.RunHistoryRetention) {
		r.addf(name, "%s times %d must be within %s: a stale sweep's last run would be pruned first",
			r.show(name), wire.StaleIntervals, r.show(history))
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

// checkPace holds the pacer's bounds (docs/CRON.md, "Budgets").
func (r *report) checkPace(c *API) {
	const (
		wal      = "MAX_WAL_RATE"
		sessions = "MAX_ACTIVE_SESSIONS"
		critical = "MAX_ACTIVE_SESSIONS_CRITICAL"
	)
	if r.set(wal) && r.ok(wal) && c.MaxWALRate < minWALRate {
		r.addf(wal, "%s must be >= 1MiB (it counts bytes per second): one batch writes about that much WAL", r.show(wal))
	}
	for _, k := range []struct {
		key string
		n   int
	}{{sessions, c.MaxActiveSessions}, {critical, c.MaxActiveSessionsCritical}} {
		if r.set(k.key) && r.ok(k.key) && k.n < 1 {
			r.addf(k.key, "%s must be >= 1: it counts the other sessions that are active", r.show(k.key))
		}
	}
	// At or under the waiting level, the critical one would stop every run the wait would hold.
	if r.set(sessions) && r.set(critical) && r.ok(sessions, critical) && c.MaxActiveSessionsCritical <= c.MaxActiveSessions {
		r.addf(critical, "%s must be > %s: the run would stop where it should wait", r.show(critical), r.show(sessions))
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

// parseBool reads true or false, and nothing else: a 1, an on or a yes is more often a value
// meant for another tool than a choice made here.
func parseBool(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("want true or false")
}

// parseInt reads a whole number in base 10.
func parseInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.New("not a whole number")
	}
	return n, nil
}
