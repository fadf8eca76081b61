package sweep

import (
	"context"
	"log/slog"

	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// settleEarlier settles the batches of unknown outcome that spec's earlier runs left (the
// database was out of reach when their runner asked), under the lease this run holds: each is
// counted in its run's history, and in the row metrics now, when it committed. A failure leaves
// them for the next run.
func (r *Runner) settleEarlier(db context.Context, log *slog.Logger, spec *policy.Spec) {
	perRow := func(pass string) bool {
		for _, p := range spec.Passes {
			if p.Name == pass {
				return p.Mode == policy.ModePerRow
			}
		}
		return false
	}
	var settled []history.Settled
	_ = r.record(db, log, func(ctx context.Context) (err error) {
		settled, err = r.cfg.History.Settle(ctx, spec.Name, perRow)
		return err
	})
	for _, s := range settled {
		table := ""
		for _, p := range spec.Passes {
			if p.Name == s.Pass {
				table = p.Table
			}
		}
		if s.Processed {
			r.cfg.Metrics.RowsProcessed(spec.Name, s.Pass, table, s.Rows)
		} else {
			r.cfg.Metrics.RowsDeleted(spec.Name, s.Pass, table, s.Rows)
		}
		log.Info("settled a batch of an earlier run: it committed, and its run now counts it",
			"settled_run_id", s.RunID, "pass", s.Pass, "rows", s.Rows)
	}
}

// markUnsettled flags run res in the history when a pass of it ended on a batch of unknown
// outcome, once its end is written, for the sweep's next run to settle.
func (r *Runner) markUnsettled(db context.Context, log *slog.Logger, res *wire.Result) {
	_ = r.record(db, log, func(ctx context.Context) error { return r.cfg.History.MarkUnsettled(ctx, res) })
}
