package dbpool

import (
	"context"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The socket bounds of every connection, so that a peer gone dark (a NAT or load balancer that
// dropped the flow, a host powered off) is given up well within a sweep's budget (SWEEP_DEADLINE,
// 90s by default) instead of the kernel's hours:
//
//	dialTimeout      a connect that gets no answer, when the URL sets no connect_timeout
//	keepAliveIdle    an idle connection is probed after this long,
//	keepAliveCount   every keepAliveInterval, and closed after this many probes go unanswered
//	userTimeout      data sent and never acknowledged (TCP_USER_TIMEOUT) closes it
//
// A statement in flight is bounded by its context too: a batch's is the statement timeout plus
// a margin, past which pgx gives the connection up whatever the socket says.
const (
	dialTimeout       = 10 * time.Second
	keepAliveIdle     = 10 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	userTimeout       = 20 * time.Second
)

// tcpUserTimeout is Linux's TCP_USER_TIMEOUT socket option (linux/tcp.h); setting it elsewhere
// fails, which the dialer ignores.
const tcpUserTimeout = 0x12

// harden gives c's connections the socket bounds above, keeping a connect_timeout the URL set.
func harden(c *pgconn.Config) {
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = dialTimeout
	}
	d := &net.Dialer{
		Timeout:         c.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount},
		Control: func(network, _ string, rc syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil
			}
			return rc.Control(func(fd uintptr) {
				_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(userTimeout.Milliseconds()))
			})
		},
	}
	c.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
}
