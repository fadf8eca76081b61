package sweep

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/metrics"
)

// Runner runs the sweeps of one catalog against one database.
type Runner struct {
	pool     *pgxpool.Pool
	specs    []Spec
	byName   map[string]*Spec
	settings Settings
	logger   *slog.Logger
	metrics  *metrics.Metrics
	now      func() time.Time
}

// NewRunner returns a Runner over specs. A nil metrics records nothing.
func NewRunner(pool *pgxpool.Pool, specs []Spec, settings Settings, logger *slog.Logger, m *metrics.Metrics) *Runner {
	r := &Runner{pool: pool, specs: specs, byName: map[string]*Spec{}, settings: settings, logger: logger, metrics: m, now: time.Now}
	for i := range specs {
		r.byName[specs[i].Name] = &r.specs[i]
	}
	return r
}

// Specs returns the catalog, in order.
func (r *Runner) Specs() []Spec { return r.specs }

// Settings returns the bounds every run obeys.
func (r *Runner) Settings() Settings { return r.settings }

// Run runs the sweep name once. Cancelling ctx asks the run to stop between batches with
// StopShutdown; a statement in flight is never cut by it. The error is ErrUnknownSweep for a name
// the catalog does not hold; database failures are reported in the Result as batch-error.
func (r *Runner) Run(ctx context.Context, name string, opts Options) (*Result, error) {
	panic("TODO")
}

// DryRun counts what Run would delete, without deleting.
func (r *Runner) DryRun(ctx context.Context, name string) (*DryRunResult, error) {
	panic("TODO")
}
