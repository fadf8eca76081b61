package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/sweeprail/sweeprail/internal/lease"
)

// acquireLease takes the sweep's lease on a connection of the pool, which the run then keeps
// out of the pool (the pool opens another in its place) until done closes it, after the lease is
// released: the lease row names that session, and a lease whose session is gone, its run having
// died with it, is taken over at once. A lease held by a live session is ErrHeld, the connection
// back in the pool.
func (r *Runner) acquireLease(ctx context.Context, name string) (l *lease.Lease, done func(), err error) {
	c, err := r.cfg.Pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire lease %q: take a connection: %w", name, err)
	}
	l, err = lease.Acquire(ctx, c, name, r.LeaseTTL())
	if err != nil {
		c.Release()
		return nil, nil, err
	}
	conn := c.Hijack()
	return l, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}, nil
}
