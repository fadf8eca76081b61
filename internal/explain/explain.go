// Package explain asks the planner about a statement without running it: EXPLAIN (FORMAT JSON)
// in a read-only transaction that is always rolled back, and the readers of its plans that the
// index verdict, the keep guards' lookups and the eligible-share estimate need.
package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// Prefix is what JSON puts before a query; error positions count it.
const Prefix = "EXPLAIN (FORMAT JSON) "

// JSON plans query in a read-only transaction that is always rolled back, and returns the
// plan as EXPLAIN (FORMAT JSON) gives it: EXPLAIN without ANALYZE executes nothing, and should
// anything try, read-only refuses the write. forceIndex prices out sequential scans and sorts, so
// that the planner reads an index in the query's order whenever one can serve it at all, whatever
// the table's size and statistics: the index verdict's plan.
func JSON(ctx context.Context, pool *pgxpool.Pool, statementTimeout, lockTimeout time.Duration, forceIndex bool, query string, args ...any) ([]byte, error) {
	priced := ""
	if forceIndex {
		priced = "SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off"
	}
	return Priced(ctx, pool, statementTimeout, lockTimeout, priced, query, args...)
}

// Priced is JSON with priced, the SET LOCAL statements that price plan nodes out
// ("" for none).
func Priced(ctx context.Context, pool *pgxpool.Pool, statementTimeout, lockTimeout time.Duration, priced, query string, args ...any) ([]byte, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // nothing to keep
	if err := (statement.Timeouts{Statement: statementTimeout, Lock: lockTimeout}).Set(ctx, tx); err != nil {
		return nil, err
	}
	if priced != "" {
		if _, err := tx.Exec(ctx, priced); err != nil {
			return nil, fmt.Errorf("price out plan nodes: %w", err)
		}
	}
	var raw []byte
	err = tx.QueryRow(ctx, Prefix+query, args...).Scan(&raw)
	return raw, err
}

// scanNode is the part of EXPLAIN (FORMAT JSON) that the index check reads.
type scanNode struct {
	NodeType  string     `json:"Node Type"`
	Alias     string     `json:"Alias"`
	IndexName string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Plans     []scanNode `json:"Plans"`
}

// IndexServes reads the index verdict's plan of pass p: see AgeIndexServes. A single-mode pass
// deletes every eligible row in one statement, in no order, so any index condition serves it.
func IndexServes(raw []byte, p policy.Pass) (bool, error) {
	if p.Mode == policy.ModeSingle {
		return AgeIndexServes(raw, "t", "")
	}
	return AgeIndexServes(raw, "t", p.AgeColumn)
}

// AgeIndexServes reads the index verdict's plan (the batch select, sequential scans and sorts
// priced out): whether every scan of alias reads an index condition that bounds ageColumn, so a
// batch reads about a batch of entries in age order. Priced out, a scan that reads otherwise is
// chosen only where no index can serve, so the verdict is the schema's, not the statistics'.
func AgeIndexServes(raw []byte, alias, ageColumn string) (bool, error) {
	var out []struct {
		Plan scanNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return false, err
	}
	if len(out) == 0 {
		return false, errors.New("empty plan")
	}
	// A partitioned table is scanned once per partition left after pruning, each aliased t_<n>:
	// every one of those scans must be served.
	scans := findScans(out[0].Plan, alias, nil)
	if len(scans) == 0 {
		return false, nil
	}
	bounds := condMentions(ageColumn)
	for _, n := range scans {
		switch n.NodeType {
		case "Index Scan", "Index Only Scan":
			if !bounds(n.IndexCond) {
				return false, nil
			}
		case "Bitmap Heap Scan":
			if len(n.Plans) == 0 || !bitmapConditions(n.Plans, bounds) {
				return false, nil
			}
		default:
			return false, nil
		}
	}
	return true, nil
}

// findScans returns the scans of alias in the plan, and of its partitions (alias_<n>), depth
// first. It does not descend into a scan it found: a condition's subqueries name other aliases.
func findScans(n scanNode, alias string, acc []scanNode) []scanNode {
	if n.Alias == alias || partitionAliasRE(alias).MatchString(n.Alias) {
		return append(acc, n)
	}
	for _, c := range n.Plans {
		acc = findScans(c, alias, acc)
	}
	return acc
}

// partitionAliasRE matches the aliases EXPLAIN gives the partitions of alias: alias_1, alias_2, …
func partitionAliasRE(alias string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(alias) + `_[0-9]+$`)
}

// condMentions returns a test of whether an index condition, as EXPLAIN prints it, names column;
// for column "", whether there is a condition at all.
func condMentions(column string) func(cond string) bool {
	if column == "" {
		return func(cond string) bool { return cond != "" }
	}
	name := column
	if !simpleIdentRE.MatchString(column) {
		name = `"` + strings.ReplaceAll(column, `"`, `""`) + `"`
	}
	re := regexp.MustCompile(`(^|[^A-Za-z0-9_$"])` + regexp.QuoteMeta(name) + `($|[^A-Za-z0-9_$"])`)
	return func(cond string) bool { return cond != "" && re.MatchString(cond) }
}

// simpleIdentRE is an identifier that EXPLAIN prints without quotes.
var simpleIdentRE = regexp.MustCompile(`^[a-z_][a-z0-9_$]*$`)

// bitmapConditions reports whether every leaf under a bitmap heap scan is an index scan whose
// condition passes ok (BitmapAnd and BitmapOr combine them).
func bitmapConditions(nodes []scanNode, ok func(cond string) bool) bool {
	for _, n := range nodes {
		switch n.NodeType {
		case "BitmapAnd", "BitmapOr":
			if len(n.Plans) == 0 || !bitmapConditions(n.Plans, ok) {
				return false
			}
		case "Bitmap Index Scan":
			if !ok(n.IndexCond) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// TopRows reads the planner's row estimate from the top node of a plan: for the estimate
// statement (SELECT 1 … WHERE <predicate>) that is the eligible rows, whatever sits above the
// scan (a Gather over a parallel scan, a Sort).
func TopRows(raw []byte) (int64, error) {
	var out []struct {
		Plan struct {
			PlanRows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return 0, fmt.Errorf("read plan: %w", err)
	}
	if len(out) == 0 {
		return 0, errors.New("read plan: empty plan")
	}
	return int64(out[0].Plan.PlanRows), nil
}

// LookupIndexes returns, for each scan of the relation aliased alias (one per partition left of a
// partitioned table), the indexes it reads with an index condition on column: an index scan's, or
// the bitmap index scans' under a bitmap heap scan. A scan read otherwise has none.
func LookupIndexes(raw []byte, alias, column string) ([][]string, error) {
	var out []struct {
		Plan scanNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("empty plan")
	}
	bounds := condMentions(column)
	var scans [][]string
	for _, n := range findScans(out[0].Plan, alias, nil) {
		var names []string
		var walk func(n scanNode)
		walk = func(n scanNode) {
			switch n.NodeType {
			case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
				if bounds(n.IndexCond) {
					names = append(names, n.IndexName)
				}
			case "Bitmap Heap Scan", "BitmapAnd", "BitmapOr":
				for _, c := range n.Plans {
					walk(c)
				}
			}
		}
		walk(n)
		scans = append(scans, names)
	}
	return scans, nil
}
