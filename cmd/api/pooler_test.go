package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// poolerPolicy sweeps one table per mode: batched, single, per-row and partitions.
const poolerPolicy = `sweeps:
  - name: pooled
    passes:
      - name: events
        table: pool_events
        age_column: at
        retention: 7d
      - name: claims
        table: pool_claims
        age_column: at
        retention: 7d
        mode: single
      - name: users
        table: pool_users
        age_column: at
        retention: 7d
        mode: per-row
        function: pool_erase
      - name: log
        table: pool_log
        age_column: at
        retention: 7d
        mode: partitions
`

// poolerSchema creates the tables of poolerPolicy with old and fresh rows: 300 old events, 30
// old claims, 12 old users; pool_log has a partition per day for 20 days back and one for the
// days ahead, 10 rows a day.
var poolerSchema = []string{
	`CREATE TABLE pool_events (id bigserial PRIMARY KEY, at timestamptz NOT NULL)`,
	`CREATE INDEX ON pool_events (at)`,
	`INSERT INTO pool_events (at) SELECT now() - interval '30 days' FROM generate_series(1, 300)`,
	`INSERT INTO pool_events (at) SELECT now() FROM generate_series(1, 20)`,
	`CREATE TABLE pool_claims (id bigserial PRIMARY KEY, at timestamptz NOT NULL)`,
	`CREATE INDEX ON pool_claims (at)`,
	`INSERT INTO pool_claims (at) SELECT now() - interval '30 days' FROM generate_series(1, 30)`,
	`INSERT INTO pool_claims (at) SELECT now() FROM generate_series(1, 5)`,
	`CREATE TABLE pool_users (id bigserial PRIMARY KEY, at timestamptz NOT NULL)`,
	`CREATE INDEX ON pool_users (at)`,
	`INSERT INTO pool_users (at) SELECT now() - interval '30 days' FROM generate_series(1, 12)`,
	`INSERT INTO pool_users (at) SELECT now() FROM generate_series(1, 3)`,
	`CREATE FUNCTION pool_erase(k bigint) RETURNS boolean LANGUAGE sql AS $$
		WITH d AS (DELETE FROM pool_users WHERE id = k RETURNING 1) SELECT count(*) > 0 FROM d $$`,
	`CREATE TABLE pool_log (id bigint NOT NULL, at timestamptz NOT NULL) PARTITION BY RANGE (at)`,
	`CREATE INDEX ON pool_log (at)`,
	`DO $$ BEGIN FOR i IN 0..19 LOOP
		EXECUTE format('CREATE TABLE pool_log_%s PARTITION OF pool_log FOR VALUES FROM (%L) TO (%L)', i,
			date_trunc('day', now()) - (i + 1) * interval '1 day', date_trunc('day', now()) - i * interval '1 day');
	END LOOP; END $$`,
	`CREATE TABLE pool_log_ahead PARTITION OF pool_log FOR VALUES FROM (date_trunc('day', now())) TO (MAXVALUE)`,
	`INSERT INTO pool_log SELECT g, date_trunc('day', now()) - interval '19 days' + g * interval '2 hours'
		FROM generate_series(0, 12 * 20 - 1) g`,
}

// TestBehindPooler runs the API through a real PgBouncer, in transaction and in session mode,
// with the plain connection string an operator writes: two migrations at once (one applies
// migration 1, both succeed), the policy check, serve, a sweep of every mode with exact counts,
// dry runs, the lease (a second run finds the rows gone), the replay store (a replayed request
// is refused) and a complete run history. Meanwhile other clients of the same pooler never see
// a setting of sweeprail's (watchSettings).
func TestBehindPooler(t *testing.T) {
	for _, mode := range []string{"transaction", "session"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			direct := dbtest.EmptyURL(t)
			pooled := dbtest.PoolerURL(t, mode, direct)
			ctx := context.Background()
			env := map[string]string{"DATABASE_URL": pooled}

			var wg sync.WaitGroup
			outs := make([]bytes.Buffer, 2)
			errs := make([]error, 2)
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = run(ctx, []string{"api", "migrate", "up"}, env, &outs[i], &outs[i])
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("two migrate up at once: %v\n%s\n%s", err, &outs[0], &outs[1])
			}
			if n := strings.Count(outs[0].String()+outs[1].String(), "applied sweeprail/00001_"); n != 1 {
				t.Fatalf("migration 1 applied %d times:\n%s\n%s", n, &outs[0], &outs[1])
			}

			admin, err := dbpool.NewPool(ctx, direct)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			for _, q := range poolerSchema {
				if _, err := admin.Exec(ctx, q); err != nil {
					t.Fatalf("%v\n%s", err, q)
				}
			}
			policy := filepath.Join(t.TempDir(), "sweeps.yaml")
			if err := os.WriteFile(policy, []byte(poolerPolicy), 0o600); err != nil {
				t.Fatal(err)
			}
			env["SWEEP_POLICY_FILE"] = policy
			// From here on, other clients of the pooler read every setting sweeprail changes.
			leaks := watchSettings(t, pooled)
			var out bytes.Buffer
			if err := run(ctx, []string{"api", "policy", "check"}, env, &out, &out); err != nil {
				t.Fatalf("policy check: %v\n%s", err, &out)
			}

			env["INTERNAL_SIGNING_KEY"] = serveKey
			s := startServe(t, env)
			if status, body := get(t, s.url+"/readyz"); status != http.StatusOK {
				t.Fatalf("readyz: HTTP %d: %s", status, body)
			}

			status, body := do(t, signedRequest(t, http.MethodPost, s.url+"/internal/sweep-pooled", `{"dryRun":true}`))
			var dry struct {
				Passes []wire.DryRunPass `json:"passes"`
			}
			if err := json.Unmarshal(body, &dry); status != http.StatusOK || err != nil || len(dry.Passes) != 4 {
				t.Fatalf("dry run: HTTP %d, %v: %s", status, err, body)
			}
			for i, want := range []int64{300, 30, 12} {
				if p := dry.Passes[i]; p.Eligible == nil || *p.Eligible != want {
					t.Errorf("dry run of %s: eligible %v, want %d", p.Pass, p.Eligible, want)
				}
			}
			if p := dry.Passes[3]; len(p.Partitions) != 13 {
				t.Errorf("dry run of log: %d partitions to drop, want 13: %s", len(p.Partitions), body)
			}

			req := signedRequest(t, http.MethodPost, s.url+"/internal/sweep-pooled", `{}`)
			header := req.Header.Clone()
			status, body = do(t, req)
			var res wire.Result
			if err := json.Unmarshal(body, &res); status != http.StatusOK || err != nil {
				t.Fatalf("sweep: HTTP %d, %v: %s", status, err, body)
			}
			if res.StopReason != wire.StopExhausted || res.HistoryError != nil || len(res.Passes) != 4 ||
				res.Passes[0].Deleted != 300 || res.Passes[1].Deleted != 30 || res.Passes[2].Processed != 12 || res.PartitionsDropped != 13 {
				t.Fatalf("sweep answer: %s", body)
			}
			count := func(q string) int64 {
				t.Helper()
				var n int64
				if err := admin.QueryRow(ctx, q).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			for _, c := range []struct {
				q    string
				want int64
			}{
				{`SELECT count(*) FROM pool_events`, 20},
				{`SELECT count(*) FROM pool_claims`, 5},
				{`SELECT count(*) FROM pool_users`, 3},
				{`SELECT count(*) FROM pool_log WHERE at < now() - interval '7 days'`, 0},
				{`SELECT count(*) FROM pg_inherits WHERE inhparent = 'pool_log'::regclass`, 8},
				{`SELECT count(*) FROM pg_class WHERE relname LIKE 'pool\_log\_%' AND relkind = 'r' AND NOT relispartition`, 0},
			} {
				if got := count(c.q); got != c.want {
					t.Errorf("%s = %d, want %d", c.q, got, c.want)
				}
			}
			// A second run finds nothing left; the first request, sent again, is refused by the
			// replay store.
			if status, body := do(t, signedRequest(t, http.MethodPost, s.url+"/internal/sweep-pooled", `{}`)); status != http.StatusOK ||
				!strings.Contains(string(body), `"deleted":0`) {
				t.Errorf("a second run: HTTP %d: %s", status, body)
			}
			again, err := http.NewRequest(http.MethodPost, s.url+"/internal/sweep-pooled", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			again.Header = header
			if status, body := do(t, again); status != http.StatusUnauthorized || !strings.Contains(string(body), "replayed") {
				t.Errorf("a replayed request: HTTP %d, want 401 replayed: %s", status, body)
			}

			if seen := leaks(); len(seen) > 0 {
				t.Errorf("other clients of the pooler saw sweeprail's settings:\n%s", strings.Join(seen, "\n"))
			}

			status, body = do(t, signedRequest(t, http.MethodGet, s.url+"/internal/runs?sweep=pooled", ""))
			var hist wire.History
			if err := json.Unmarshal(body, &hist); status != http.StatusOK || err != nil {
				t.Fatalf("runs: HTTP %d, %v: %s", status, err, body)
			}
			if len(hist.Runs) != 2 || len(hist.Unrecorded) != 0 {
				t.Fatalf("history: %s", body)
			}
			for _, r := range hist.Runs {
				if r.FinishedAt == nil || r.StopReason == nil || *r.StopReason != wire.StopExhausted {
					t.Errorf("run %s recorded %+v, want finished and exhausted", r.RunID, r)
				}
			}
			if r := hist.Runs[1]; r.RunID != res.RunID || r.Deleted != res.Deleted || r.PartitionsDropped != 13 || len(r.Passes) != 4 {
				t.Errorf("first run recorded as %+v, answered %+v", r, res)
			}
			if err := s.stop(t, 20*time.Second); err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
}

// watchedSettings are every setting sweeprail changes in a batch, a dry run, a partitions step or
// a check.
var watchedSettings = []string{
	"lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout", "synchronous_commit", "plan_cache_mode",
	"enable_sort", "enable_bitmapscan", "enable_seqscan", "enable_hashjoin", "enable_mergejoin", "enable_material",
	"DateStyle", "TimeZone", "role",
}

// watchSettings reads watchedSettings without pause through the pooler at u, on connections of
// another client, until the returned function is called; that returns every reading that
// differed from the first. Through a transaction pooler these clients share server connections
// with the API: a setting the API left on a session shows here.
func watchSettings(t *testing.T, u string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg, err := dbpool.PoolConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 3
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	exprs := make([]string, len(watchedSettings))
	for i, name := range watchedSettings {
		exprs[i] = fmt.Sprintf("%s=' || current_setting('%s')", name, name)
	}
	q := "SELECT '" + strings.Join(exprs, " || ' ") + ", pg_backend_pid()"
	read := func() (string, int32, error) {
		var s string
		var pid int32
		err := pool.QueryRow(ctx, q).Scan(&s, &pid)
		return s, pid, err
	}
	base, _, err := read()
	if err != nil {
		t.Fatalf("read the settings through the pooler: %v", err)
	}
	var (
		mu    sync.Mutex
		seen  []string
		reads int
		wg    sync.WaitGroup
	)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				got, pid, err := read()
				mu.Lock()
				reads++
				if err == nil && got != base && len(seen) < 20 {
					seen = append(seen, fmt.Sprintf("backend %d: %s (before: %s)", pid, got, base))
				}
				mu.Unlock()
			}
		}()
	}
	return func() []string {
		cancel()
		wg.Wait()
		pool.Close()
		t.Logf("%d readings of the settings by another client", reads)
		return seen
	}
}
