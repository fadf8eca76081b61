package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// explainPrefix is what explainJSON puts before a query; error positions count it.
const explainPrefix = "EXPLAIN (FORMAT JSON) "

// explainJSON plans query in a read-only transaction that is always rolled back, and returns the
// plan as EXPLAIN (FORMAT JSON) gives it: EXPLAIN without ANALYZE executes nothing, and should
// anything try, read-only refuses the write. forceIndex discourages sequential scans, so the
// planner picks an index whenever one can serve at all, whatever the table's size.
func explainJSON(ctx context.Context, pool *pgxpool.Pool, statementTimeout, lockTimeout time.Duration, forceIndex bool, query string, args ...any) ([]byte, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // nothing to keep
	if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true)",
		ms(statementTimeout), ms(lockTimeout)); err != nil {
		return nil, fmt.Errorf("set timeouts: %w", err)
	}
	if forceIndex {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return nil, fmt.Errorf("disable sequential scans: %w", err)
		}
	}
	var raw []byte
	err = tx.QueryRow(ctx, explainPrefix+query, args...).Scan(&raw)
	return raw, err
}

// scanNode is the part of EXPLAIN (FORMAT JSON) that the index check reads.
type scanNode struct {
	NodeType  string     `json:"Node Type"`
	Alias     string     `json:"Alias"`
	IndexCond string     `json:"Index Cond"`
	Plans     []scanNode `json:"Plans"`
}

// indexConditionOn reports whether the plan reads the relation aliased alias through an index
// condition: an index or index-only scan with an Index Cond, or a bitmap heap scan whose index
// scans all have one. An index scan without a condition is a full read of the index (the planner
// picks one for a join's order when sequential scans are disabled), no better than a sequential
// scan, and does not count.
func indexConditionOn(raw []byte, alias string) (bool, error) {
	var out []struct {
		Plan scanNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return false, err
	}
	if len(out) == 0 {
		return false, errors.New("empty plan")
	}
	n, ok := findScan(out[0].Plan, alias)
	if !ok {
		return false, nil
	}
	switch n.NodeType {
	case "Index Scan", "Index Only Scan":
		return n.IndexCond != "", nil
	case "Bitmap Heap Scan":
		return len(n.Plans) > 0 && bitmapConditions(n.Plans), nil
	}
	return false, nil
}

// findScan returns the first scan of alias in the plan, depth first: the outer query's, since a
// condition's subqueries come later in the tree than the relation they filter.
func findScan(n scanNode, alias string) (scanNode, bool) {
	if n.Alias == alias {
		return n, true
	}
	for _, c := range n.Plans {
		if s, ok := findScan(c, alias); ok {
			return s, true
		}
	}
	return scanNode{}, false
}

// bitmapConditions reports whether every leaf under a bitmap heap scan is an index scan with a
// condition (BitmapAnd and BitmapOr combine them).
func bitmapConditions(nodes []scanNode) bool {
	for _, n := range nodes {
		switch n.NodeType {
		case "BitmapAnd", "BitmapOr":
			if len(n.Plans) == 0 || !bitmapConditions(n.Plans) {
				return false
			}
		case "Bitmap Index Scan":
			if n.IndexCond == "" {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// aggregateInputRows reads the estimated eligible rows from the count's plan: the rows its
// aggregate reads.
func aggregateInputRows(raw []byte) (int64, error) {
	type node struct {
		NodeType string  `json:"Node Type"`
		PlanRows float64 `json:"Plan Rows"`
		Plans    []node  `json:"Plans"`
	}
	var out []struct {
		Plan node `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) == 0 {
		return 0, fmt.Errorf("read plan: %v", err)
	}
	n := out[0].Plan
	if n.NodeType == "Aggregate" && len(n.Plans) > 0 {
		return int64(n.Plans[0].PlanRows), nil
	}
	return int64(n.PlanRows), nil
}
