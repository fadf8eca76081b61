package sweep

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// countStatement is the dry run's count of pass p: st.Count, or for a pass with cascades the
// count that follows its keys too (statement.CascadeCount), answering a deleted and an updated
// count for each of its cascades tables; cascades is how many, 0 when the keys form a cycle the
// count cannot follow (st.Count then).
func (r *Runner) countStatement(ctx context.Context, p policy.Pass, kind statement.Kind, st statement.Set) (query string, cascades int, err error) {
	if len(p.Cascades) == 0 {
		return st.Count.SQL, 0, nil
	}
	g, err := statement.ReadCascades(ctx, r.cfg.Pool, p)
	if err != nil {
		return "", 0, err
	}
	named := make([]uint32, len(p.Cascades))
	for i, name := range p.Cascades {
		if named[i], err = statement.ReadOID(ctx, r.cfg.Pool, name); err != nil {
			return "", 0, fmt.Errorf("look up table %q: %w", name, err)
		}
	}
	q := statement.CascadeCount(p, kind, g, named)
	if q == "" {
		return st.Count.SQL, 0, nil
	}
	return q, len(p.Cascades), nil
}

// cascadeRows pairs each table of a pass's cascades with its deleted and updated counts; nil
// for a pass without cascades.
func cascadeRows(tables []string, counts []int64) []wire.CascadeRows {
	if len(tables) == 0 || len(counts) < 2*len(tables) {
		return nil
	}
	out := make([]wire.CascadeRows, len(tables))
	for i, t := range tables {
		out[i] = wire.CascadeRows{Table: t, Deleted: counts[2*i], Updated: counts[2*i+1]}
	}
	return out
}

// count runs a dry run's count query, which answers n numbers: the eligible rows, then the
// rows of each of the pass's children that would go with them, then its cascades'.
func (r *Runner) count(ctx context.Context, query string, cutoff any, n int) ([]int64, error) {
	counts := make([]int64, n)
	dest := make([]any, len(counts))
	for i := range counts {
		dest[i] = &counts[i]
	}
	err := pgx.BeginTxFunc(ctx, r.cfg.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := (statement.Timeouts{Statement: r.cfg.Settings.CountTimeout}).Set(ctx, tx); err != nil {
			return err
		}
		return tx.QueryRow(ctx, query, cutoff).Scan(dest...)
	})
	return counts, err
}
