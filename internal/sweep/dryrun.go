package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// sqlstateQueryCanceled is what a statement_timeout raises.
const sqlstateQueryCanceled = "57014"

// DryRun counts what Run would delete now, without deleting or taking the lease. Each pass gets an
// exact count bounded by the count timeout (past it: Eligible nil and CountTimedOut), the
// planner's estimate, and whether the batch select can be served from an index.
func (r *Runner) DryRun(ctx context.Context, name string) (*DryRunResult, error) {
	spec, ok := r.byName[name]
	if !ok {
		return nil, fmt.Errorf("dry run %q: %w", name, ErrUnknownSweep)
	}
	ref, err := r.asOf(ctx)
	if err != nil {
		return nil, fmt.Errorf("dry run %q: read database clock: %w", name, err)
	}
	res := &DryRunResult{Sweep: name, DryRun: true, Passes: []DryRunPass{}}
	for i, p := range spec.Passes {
		st := r.stmts[name][i]
		cutoff := ref.Add(-p.Retention)
		dp := DryRunPass{Pass: p.Name}
		n, err := r.count(ctx, st, cutoff)
		switch {
		case isQueryCanceled(err):
			dp.CountTimedOut = true
		case err != nil:
			return nil, fmt.Errorf("dry run %q: count pass %q: %w", name, p.Name, err)
		default:
			dp.Eligible = &n
		}
		if dp.Estimate, dp.Indexed, err = r.plan(ctx, p, st, cutoff); err != nil {
			return nil, fmt.Errorf("dry run %q: plan pass %q: %w", name, p.Name, err)
		}
		res.Passes = append(res.Passes, dp)
	}
	return res, nil
}

func isQueryCanceled(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlstateQueryCanceled
}

func (r *Runner) count(ctx context.Context, st statements, cutoff any) (int64, error) {
	var n int64
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)", ms(r.settings.CountTimeout)); err != nil {
			return err
		}
		return tx.QueryRow(ctx, st.count, cutoff).Scan(&n)
	})
	return n, err
}

// plan asks the planner twice: as it stands, for the estimate; and with sequential scans
// discouraged, for whether any index can serve the batch select at all. The second answer does
// not depend on the table's size, so it is the same on a test table and on production.
func (r *Runner) plan(ctx context.Context, p Pass, st statements, cutoff any) (estimate int64, indexed bool, err error) {
	size := firstPositive(p.BatchSize, r.settings.BatchSize)
	err = pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)", ms(r.settings.CountTimeout)); err != nil {
			return err
		}
		plain, err := explain(ctx, tx, st.count, cutoff)
		if err != nil {
			return err
		}
		estimate = plainRows(plain)
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		forced, err := explain(ctx, tx, st.plan, cutoff, size)
		if err != nil {
			return err
		}
		indexed = usesIndex(forced, p.Table)
		return nil
	})
	return estimate, indexed, err
}

// planNode is the part of EXPLAIN (FORMAT JSON) that the dry run reads.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	Schema       string     `json:"Schema"`
	IndexName    string     `json:"Index Name"`
	PlanRows     float64    `json:"Plan Rows"`
	Plans        []planNode `json:"Plans"`
}

func explain(ctx context.Context, tx pgx.Tx, query string, args ...any) (planNode, error) {
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
		return planNode{}, err
	}
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) == 0 {
		return planNode{}, fmt.Errorf("read plan: %v", err)
	}
	return out[0].Plan, nil
}

// plainRows reads the estimated eligible rows from the count's plan: the rows its aggregate reads.
func plainRows(n planNode) int64 {
	if n.NodeType == "Aggregate" && len(n.Plans) > 0 {
		return int64(n.Plans[0].PlanRows)
	}
	return int64(n.PlanRows)
}

// usesIndex reports whether the plan reads table through an index (an index, index-only or bitmap
// index scan on it).
func usesIndex(n planNode, table string) bool {
	name := table[strings.LastIndex(table, ".")+1:]
	if n.RelationName == name && n.IndexName != "" {
		return true
	}
	if n.NodeType == "Bitmap Heap Scan" && n.RelationName == name {
		for _, c := range n.Plans {
			if c.IndexName != "" || c.NodeType == "BitmapAnd" || c.NodeType == "BitmapOr" {
				return true
			}
		}
	}
	for _, c := range n.Plans {
		if usesIndex(c, table) {
			return true
		}
	}
	return false
}
