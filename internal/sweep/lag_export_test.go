package sweep

import (
	"context"
	"time"

	"github.com/sweeprail/sweeprail/internal/statement"
)

// ReadLag runs the lag read of pass i of sweep name, for a timestamptz age column, at cutoff.
func ReadLag(ctx context.Context, r *Runner, name string, i int, cutoff time.Time) (*float64, error) {
	all, err := r.statements(ctx)
	if err != nil {
		return nil, err
	}
	return r.readLag(ctx, all.stmts[name][i][statement.Instant].Lag, cutoff)
}

// LagLockTimeout is how long the lag read waits for its table's lock.
const LagLockTimeout = lagLockTimeout
