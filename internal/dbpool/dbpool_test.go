package dbpool_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
)

var ctx = context.Background()

// limitedRole creates a login role without superuser on the test's database and returns a URL
// that connects as it, with application_name set at startup. The reset must work for the least
// privileged role the API may run as, not only for a superuser. other is a second role the
// first is a member of, for SET ROLE.
func limitedRole(t *testing.T) (u, other string) {
	t.Helper()
	base := dbtest.URL(t)
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name, other, password := "dbpool_"+hex.EncodeToString(b), "dbpool_other_"+hex.EncodeToString(b), hex.EncodeToString(b)
	for _, sql := range []string{
		"CREATE ROLE " + name + " LOGIN PASSWORD '" + password + "'",
		"CREATE ROLE " + other,
		"GRANT " + other + " TO " + name,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		// The test's database is dropped after this cleanup (cleanups run last first): the roles
		// own nothing that outlives their connections.
		if _, err := c.Exec(ctx, "DROP ROLE IF EXISTS "+name+", "+other); err != nil {
			t.Errorf("drop the test roles: %v", err)
		}
	})
	p, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	p.User = url.UserPassword(name, password)
	q := p.Query()
	q.Set("application_name", "sweeprail-dbpool-test")
	p.RawQuery = q.Encode()
	return p.String(), other
}

// onePool is a pool of one connection, so that every acquire gets the connection the last
// release handed back.
func onePool(t *testing.T, u string, reset bool) *pgxpool.Pool {
	t.Helper()
	var (
		cfg *pgxpool.Config
		err error
	)
	if reset {
		cfg, err = dbpool.ParseConfig(u, nil)
	} else {
		cfg, err = pgxpool.ParseConfig(u)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func text(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string) string {
	t.Helper()
	var s string
	if err := q.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// TestResetOnRelease (every route to it): whatever session state one
// holder of a pooled connection leaves, the next holder of that same connection (same backend
// pid: reset, not replaced) finds the session as it was. Row 3 is a policy condition calling
// set_config(…, false) in a dry run: unreset, every later sweep on that connection fails 25006.
func TestResetOnRelease(t *testing.T) {
	u, other := limitedRole(t)
	cases := []struct {
		name string
		// dirty leaves state on the connection; check reads it back as text.
		dirty func(t *testing.T, c *pgxpool.Conn)
		check string
	}{
		{"set_config default_transaction_read_only, session level", exec(`SELECT set_config('default_transaction_read_only', 'on', false)`),
			`SELECT current_setting('default_transaction_read_only')`},
		{"set_config inside a committed read-only transaction (a dry run's)", func(t *testing.T, c *pgxpool.Conn) {
			err := pgx.BeginTxFunc(ctx, c, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT set_config('default_transaction_read_only', 'on', false)`)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}, `SELECT current_setting('default_transaction_read_only')`},
		// Not a timeout of a millisecond or so: the reset's own first statement runs under it,
		// and on a loaded machine it can cancel the reset, which rightly closes the connection.
		{"SET statement_timeout", exec(`SET statement_timeout = '1min'`), `SELECT current_setting('statement_timeout')`},
		{"SET search_path", exec(`SET search_path = pg_catalog`), `SELECT current_setting('search_path')`},
		{"SET application_name, set at startup by the URL", exec(`SET application_name = 'someone-else'`),
			`SELECT current_setting('application_name')`},
		{"SET ROLE", exec(`SET ROLE ` + other), `SELECT current_user::text`},
		{"advisory lock", exec(`SELECT pg_advisory_lock(4242)`),
			`SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`},
		{"temporary table", exec(`CREATE TEMP TABLE leftover (x int)`), `SELECT (to_regclass('pg_temp.leftover') IS NULL)::text`},
		{"LISTEN", exec(`LISTEN sweeprail_dbpool_test`), `SELECT count(*)::text FROM pg_listening_channels()`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := onePool(t, u, true)
			c, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pid, want := text(t, c, `SELECT pg_backend_pid()::text`), text(t, c, tc.check)
			tc.dirty(t, c)
			if got := text(t, c, tc.check); got == want {
				t.Fatalf("the test's dirt left no trace: %s is %q before and after", tc.check, got)
			}
			c.Release()

			c, err = pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			if got := text(t, c, `SELECT pg_backend_pid()::text`); got != pid {
				t.Fatalf("the next acquirer got backend %s, not %s: nothing shows the connection was reset", got, pid)
			}
			if got := text(t, c, tc.check); got != want {
				t.Errorf("the next acquirer of the connection reads %q from %s, want %q", got, tc.check, want)
			}
			// Row 3's symptom: a write on the same connection.
			if _, err := c.Exec(ctx, `CREATE TEMP TABLE written (x int)`); err != nil {
				t.Errorf("a write on the reset connection: %v", err)
			}
		})
	}
}

// TestResetRunsUnderDefaults: the reset does not run under a lock_timeout the last holder left.
// The holder leaves a 1 ms lock_timeout and a temporary table that another session holds a
// lock on, so the reset's DISCARD TEMP must wait; once the reset is seen waiting (pg_blocking_pids)
// the lock goes, and the next acquirer gets the same backend, reset. Under the holder's
// lock_timeout the wait would fail at once and the pool would close the connection.
func TestResetRunsUnderDefaults(t *testing.T) {
	t.Parallel()
	u, _ := limitedRole(t)
	pool := onePool(t, u, true)
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			c.Release() // the pool's cleanup waits for every connection to come back
		}
	}()
	pid := text(t, c, `SELECT pg_backend_pid()::text`)
	exec(`CREATE TEMP TABLE leftover (x int)`)(t, c)
	table := text(t, c, `SELECT pg_my_temp_schema()::regnamespace::text || '.leftover'`)
	exec(`SET lock_timeout = 1`)(t, c)

	// Another session may lock a session's temporary table if it is a superuser: the server's
	// own role, on the test's database.
	admin, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	server, err := url.Parse(dbtest.ServerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	admin.User = server.User
	locker, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE `+table+` IN ACCESS SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	c.Release()
	released = true

	// The deterministic point: the reset waits on the locker. A reset that gave up instead has
	// closed its connection, and its backend is gone.
	deadline := time.Now().Add(15 * time.Second)
	for {
		var waiting, alive bool
		if err := locker.QueryRow(ctx, `SELECT pg_backend_pid() = ANY (pg_blocking_pids($1::int)),
			EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1::int)`, pid).Scan(&waiting, &alive); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if !alive {
			t.Fatal("the reset gave up on the lock under the holder's lock_timeout: its connection was closed")
		}
		if time.Now().After(deadline) {
			t.Fatal("the reset never waited on the locker's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	c, err = pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if got := text(t, c, `SELECT pg_backend_pid()::text`); got != pid {
		t.Fatalf("the next acquirer got backend %s, not %s: the reset failed and the connection was replaced", got, pid)
	}
	for check, want := range map[string]string{
		`SELECT current_setting('lock_timeout')`:                 "0",
		`SELECT (to_regclass('pg_temp.leftover') IS NULL)::text`: "true",
	} {
		if got := text(t, c, check); got != want {
			t.Errorf("%s: %q after the reset, want %q", check, got, want)
		}
	}
}

func exec(sql string) func(*testing.T, *pgxpool.Conn) {
	return func(t *testing.T, c *pgxpool.Conn) {
		t.Helper()
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// TestResetKeepsStatementCache: the reset is not DISCARD ALL, whose DEALLOCATE ALL would drop the
// statements pgx prepared on the connection: with a connection string that chooses pgx's
// statement cache, a parameterized query still runs from the cache after a release, and the
// statement is still prepared server-side.
func TestResetKeepsStatementCache(t *testing.T) {
	u, _ := limitedRole(t)
	pool := onePool(t, u+"&default_query_exec_mode=cache_statement", true)
	const q = `SELECT $1::int + 1`
	for i := range 3 {
		var n int
		if err := pool.QueryRow(ctx, q, i).Scan(&n); err != nil || n != i+1 {
			t.Fatalf("run %d of a cached statement: %d, %v", i, n, err)
		}
	}
	var prepared int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement = $1`, q).Scan(&prepared); err != nil {
		t.Fatal(err)
	}
	if prepared != 1 {
		t.Errorf("%d server-side statements for %q after three releases, want the 1 pgx prepared", prepared, q)
	}
}

// TestWithoutReset shows what the reset is for: the same dirt on a plain pgx pool reaches the
// next acquirer, and a write there fails as row 3's sweeps did (25006).
func TestWithoutReset(t *testing.T) {
	u, _ := limitedRole(t)
	pool := onePool(t, u, false)
	if _, err := pool.Exec(ctx, `SELECT set_config('default_transaction_read_only', 'on', false)`); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, `CREATE TEMP TABLE written (x int)`)
	if err == nil {
		t.Fatal("a plain pool handed back a clean connection: the test no longer shows anything")
	}
	t.Logf("without the reset: %v", err)
}

// TestProbeConfig: the probe's pool is small and separate; the sweeps' configuration is untouched.
func TestProbeConfig(t *testing.T) {
	cfg, err := dbpool.ParseConfig("postgres://u@127.0.0.1:1/db?pool_max_conns=9", nil)
	if err != nil {
		t.Fatal(err)
	}
	probe := dbpool.ProbeConfig(cfg)
	if probe.MaxConns != 2 || cfg.MaxConns != 9 {
		t.Errorf("probe MaxConns %d (want 2), sweeps' %d (want 9, untouched)", probe.MaxConns, cfg.MaxConns)
	}
	if probe.AfterRelease == nil {
		t.Error("the probe's pool lost the reset")
	}
}

// BenchmarkAcquireRelease measures what the reset adds to one acquire, query and release
// (one round trip more, off the acquirer's path unless the pool is empty).
//
//	go test -run='^$' -bench=AcquireRelease ./internal/dbpool/
func BenchmarkAcquireRelease(b *testing.B) {
	u := dbtest.URL(b)
	for _, reset := range []bool{false, true} {
		name := "plain"
		if reset {
			name = "reset"
		}
		b.Run(name, func(b *testing.B) {
			cfg, err := pgxpool.ParseConfig(u)
			if err != nil {
				b.Fatal(err)
			}
			if reset {
				dbpool.ResetOnRelease(cfg, nil)
			}
			cfg.MaxConns = 1
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			for b.Loop() {
				if _, err := pool.Exec(ctx, `SELECT 1`); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestQueryExecMode: a connection string that names no query mode gets one that prepares no named
// statement (a transaction pooler breaks those), and one that names a mode keeps it, in both
// forms of connection string.
func TestQueryExecMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, dsn string
		want      pgx.QueryExecMode
	}{
		{"URL without a mode", "postgres://u@127.0.0.1:5432/db?sslmode=disable", dbpool.DefaultQueryExecMode},
		{"keywords without a mode", "host=127.0.0.1 user=u dbname=db sslmode=disable", dbpool.DefaultQueryExecMode},
		{"URL naming cache_statement", "postgres://u@127.0.0.1:5432/db?default_query_exec_mode=cache_statement", pgx.QueryExecModeCacheStatement},
		{"keywords naming simple_protocol", "host=127.0.0.1 user=u default_query_exec_mode=simple_protocol", pgx.QueryExecModeSimpleProtocol},
		{"URL naming cache_describe", "postgres://u@127.0.0.1/db?default_query_exec_mode=cache_describe", pgx.QueryExecModeCacheDescribe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cc, err := dbpool.ConnConfig(tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			pc, err := dbpool.ParseConfig(tc.dsn, nil)
			if err != nil {
				t.Fatal(err)
			}
			if cc.DefaultQueryExecMode != tc.want || pc.ConnConfig.DefaultQueryExecMode != tc.want {
				t.Errorf("conn %v, pool %v; want %v", cc.DefaultQueryExecMode, pc.ConnConfig.DefaultQueryExecMode, tc.want)
			}
			if _, ok := cc.RuntimeParams["default_query_exec_mode"]; ok {
				t.Error("the mode went to the server as a runtime parameter")
			}
		})
	}
	if dbpool.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement || dbpool.DefaultQueryExecMode == pgx.QueryExecModeCacheDescribe ||
		dbpool.DefaultQueryExecMode == pgx.QueryExecModeDescribeExec {
		t.Errorf("the default %v needs a statement to outlive its transaction", dbpool.DefaultQueryExecMode)
	}
}
