package dbpool_test

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
)

// TestSocketBounds checks that a pool's connections carry keepalives and a bound on
// unacknowledged data, and that a connect is bounded whether or not the URL says how long.
func TestSocketBounds(t *testing.T) {
	t.Parallel()
	t.Run("a pooled connection has keepalives and a user timeout", func(t *testing.T) {
		t.Parallel()
		pool, err := dbpool.NewPool(context.Background(), dbtest.EmptyURL(t))
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		tc, ok := c.Conn().PgConn().Conn().(*net.TCPConn)
		if !ok {
			t.Fatalf("connection is a %T, want TCP", c.Conn().PgConn().Conn())
		}
		rc, err := tc.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var keepAlive, idle, user int
		var serr error
		if err := rc.Control(func(fd uintptr) {
			keepAlive, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
			if serr == nil {
				idle, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
			}
			if serr == nil {
				user, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, 0x12)
			}
		}); err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		if keepAlive != 1 || idle != 10 || user != 20000 {
			t.Fatalf("SO_KEEPALIVE %d, TCP_KEEPIDLE %ds, TCP_USER_TIMEOUT %dms: want 1, 10s, 20000ms", keepAlive, idle, user)
		}
	})
	cases := []struct {
		name string
		dsn  string
		want time.Duration
	}{
		{"a URL without connect_timeout is bounded at 10s", "postgres://u@127.0.0.1:1/db", 10 * time.Second},
		{"a URL's own connect_timeout is kept", "postgres://u@127.0.0.1:1/db?connect_timeout=3", 3 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := dbpool.PoolConfig(tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			cc, err := dbpool.ConnConfig(tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.ConnConfig.ConnectTimeout; got != tc.want || cc.ConnectTimeout != tc.want {
				t.Fatalf("connect timeouts %s (pool) and %s (connection), want %s", got, cc.ConnectTimeout, tc.want)
			}
		})
	}
}
