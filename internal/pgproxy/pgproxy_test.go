package pgproxy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/pgproxy"
)

// through returns a proxy in front of a fresh database with a table t of three rows, and a
// direct connection to it.
func through(t *testing.T) (*pgproxy.Proxy, string, *pgx.Conn) {
	t.Helper()
	u := dbtest.EmptyURL(t)
	direct := dbtest.Conn(t, u)
	if _, err := direct.Exec(context.Background(), `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	// The exec mode parses every statement, as sweeprail's pools do, so each DELETE crosses the
	// proxy as a Parse message.
	p, pu, err := pgproxy.StartFor(u + "&default_query_exec_mode=exec")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, pu, direct
}

func rows(t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var n int
	if err := c.QueryRow(context.Background(), `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// deleteOne deletes row id in a transaction of its own on c, under timeout.
func deleteOne(c *pgx.Conn, id int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after commit
	if _, err := tx.Exec(ctx, `DELETE FROM t WHERE id = $1`, id); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func TestProxy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fault pgproxy.Fault
		// left is the rows left after deleting rows 1 and 2, the fault firing on the second.
		left int
		// failed is whether the second delete's client sees an error.
		failed bool
	}{
		{"a cut at the second commit's reply loses the reply, not the commit", pgproxy.Fault{Nth: 2, Action: pgproxy.Cut}, 1, true},
		{"a black hole at the second commit's reply holds the client to its deadline", pgproxy.Fault{Nth: 2, Action: pgproxy.BlackHole}, 1, true},
		{"latency from the second commit slows the replies and loses nothing", pgproxy.Fault{Nth: 2, Action: pgproxy.Latency, Delay: time.Millisecond}, 1, false},
		{"a reset in the second delete's statement rolls it back", pgproxy.Fault{Nth: 2, Statement: "DELETE", Action: pgproxy.Reset}, 2, true},
		{"a hook at the second commit runs before the reply is lost", pgproxy.Fault{Nth: 2, Action: pgproxy.Hook}, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, pu, direct := through(t)
			hooked := make(chan struct{})
			if tc.fault.Action == pgproxy.Hook {
				tc.fault.Hook = func() { close(hooked) }
			}
			fired := p.Arm(tc.fault)
			c, err := pgx.Connect(context.Background(), pu)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			if err := deleteOne(c, 1, 10*time.Second); err != nil {
				t.Fatalf("first delete: %v", err)
			}
			select {
			case <-fired:
				t.Fatal("the fault fired on the first match")
			default:
			}
			err = deleteOne(c, 2, 2*time.Second)
			if (err != nil) != tc.failed {
				t.Fatalf("second delete: err %v, want failed %v", err, tc.failed)
			}
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				t.Fatalf("second delete: a server error %v, want the connection's", err)
			}
			<-fired
			if tc.fault.Action == pgproxy.Hook {
				select {
				case <-hooked:
				default:
					t.Fatal("the hook was not called")
				}
			}
			p.Heal()
			// A reset statement's backend may still be winding down: its delete is gone
			// only once its transaction is.
			waitIdle(t, direct)
			if got := rows(t, direct); got != tc.left {
				t.Fatalf("rows left %d, want %d", got, tc.left)
			}
		})
	}
}

// waitIdle waits until no other session of the database is in a transaction.
func waitIdle(t *testing.T, c *pgx.Conn) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still in a transaction", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProxyPasses(t *testing.T) {
	t.Parallel()
	t.Run("an unarmed proxy carries sessions and cancel requests", func(t *testing.T) {
		t.Parallel()
		_, pu, direct := through(t)
		c, err := pgx.Connect(context.Background(), pu)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		for id := 1; id <= 3; id++ {
			if err := deleteOne(c, id, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		// A cancel request is a connection of its own, with an untyped first packet.
		go func() {
			waitSleeping(t, direct)
			_ = c.PgConn().CancelRequest(context.Background())
		}()
		_, err = c.Exec(context.Background(), `SELECT pg_sleep(30)`)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
			t.Fatalf("a cancelled sleep: %v, want the server's 57014 (the cancel request went through)", err)
		}
		if got := rows(t, direct); got != 0 {
			t.Fatalf("rows left %d, want 0", got)
		}
	})
}

// waitSleeping waits until another session of the database runs pg_sleep.
func waitSleeping(t *testing.T, c *pgx.Conn) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event = 'PgSleep'`).Scan(&n); err != nil || n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProxyScope(t *testing.T) {
	t.Parallel()
	t.Run("a commit fault with In counts only transactions that sent it", func(t *testing.T) {
		t.Parallel()
		p, pu, direct := through(t)
		fired := p.Arm(pgproxy.Fault{Nth: 1, In: "DELETE", Action: pgproxy.Cut})
		c, err := pgx.Connect(context.Background(), pu)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		tx, err := c.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(context.Background(), `SELECT count(*) FROM t`); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(context.Background()); err != nil {
			t.Fatalf("a read-only transaction's commit: %v, want it passed", err)
		}
		if err := deleteOne(c, 1, 10*time.Second); err == nil {
			t.Fatal("the deleting transaction's commit reply arrived: the fault did not fire on it")
		}
		<-fired
		if got := rows(t, direct); got != 2 {
			t.Fatalf("rows left %d, want 2: the commit went through", got)
		}
	})
	t.Run("a proxy that is down refuses connections, and up takes them again", func(t *testing.T) {
		t.Parallel()
		p, pu, _ := through(t)
		p.Down()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, pu); err == nil {
			_ = c.Close(ctx)
			t.Fatal("connected through a proxy that is down")
		}
		if err := p.Up(); err != nil {
			t.Fatal(err)
		}
		c, err := pgx.Connect(ctx, pu)
		if err != nil {
			t.Fatalf("connect once up: %v", err)
		}
		_ = c.Close(ctx)
	})
}
