package check

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/explain"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// mostlyNull is the share of NULLs (pg_stats.null_frac) from which a suggested index leaves them
// out: every lookup and age test it serves is strict, so no NULL entry is ever read, and an index
// of the rest is that much smaller.
const mostlyNull = 0.5

// columnStats is what the planner's statistics say of a table and one of its columns; known is
// false for a table never analyzed, of which they say nothing.
type columnStats struct {
	known     bool
	rows      float64
	nullFrac  float64
	avgWidth  int
	qualified string
}

func (c *checker) columnStats(ctx context.Context, table, column string) (columnStats, error) {
	st := columnStats{qualified: statement.QuoteName(table)}
	err := c.pool.QueryRow(ctx, `
SELECT c.reltuples::float8, coalesce(s.null_frac, 0)::float8, coalesce(s.avg_width, 8)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = $2
WHERE c.oid = to_regclass($1) AND c.reltuples >= 0`, st.qualified, column).Scan(&st.rows, &st.nullFrac, &st.avgWidth)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("read statistics of %q: %w", table, err)
	}
	st.known = true
	return st, nil
}

// estimatedSize is the size of a btree index on one column of st's table over the rows pred
// (bare column names; "" for all) holds, as the planner estimates them: each leaf entry a tuple
// header and the value, aligned, with its line pointer, at the default 90% fill.
func (c *checker) estimatedSize(ctx context.Context, st columnStats, pred string) (int64, error) {
	rows := st.rows
	if pred != "" {
		raw, err := c.explain(ctx, false, fmt.Sprintf("SELECT 1 FROM %s WHERE %s", st.qualified, pred))
		if err != nil {
			return 0, fmt.Errorf("estimate the rows of %s: %w", pred, err)
		}
		n, err := explain.TopRows(raw)
		if err != nil {
			return 0, err
		}
		rows = float64(n)
	}
	entry := 8 + (st.avgWidth+7)/8*8 + 4
	return int64(rows*float64(entry)/0.9) + 8192, nil
}

// prettySize writes n bytes as pg_size_pretty does, roughly.
func prettySize(n int64) string {
	for _, u := range []string{"bytes", "kB", "MB", "GB"} {
		if n < 10*1024 {
			return fmt.Sprintf("%d %s", n, u)
		}
		n /= 1024
	}
	return fmt.Sprintf("%d TB", n)
}
