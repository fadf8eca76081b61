package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Partitioned describes a table partitioned by day, for benchmarks of retention by partitions.
type Partitioned struct {
	// Table is created (it must not exist): id bigint, at timestamptz, payload text, partitioned
	// by RANGE (at), primary key (id, at).
	Table string
	// Rows are spread evenly over the Days daily partitions [End - Days days, End).
	Rows, Days int
	// End is the first instant after the last partition; it is truncated to a UTC midnight.
	End time.Time
	// Default adds a DEFAULT partition (empty).
	Default bool
}

// Execer is what SeedPartitioned needs of a pool, a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// SeedPartitioned creates the table of spec and fills it: one set-based INSERT per partition, so
// ten million rows take tens of seconds, not minutes; then ANALYZE, so that row estimates are
// there. Partition i (oldest first) is <table>_d<i>; row ids are 1..Rows in age order.
func SeedPartitioned(ctx context.Context, db Execer, spec Partitioned) error {
	if spec.Days <= 0 || spec.Rows < 0 {
		return errors.New("seed partitioned: want Days > 0 and Rows >= 0")
	}
	table := pgx.Identifier{spec.Table}.Sanitize()
	end := spec.End.UTC().Truncate(24 * time.Hour)
	start := end.AddDate(0, 0, -spec.Days)
	if _, err := db.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id bigint NOT NULL, at timestamptz NOT NULL, payload text,
  PRIMARY KEY (id, at)) PARTITION BY RANGE (at)`, table)); err != nil {
		return fmt.Errorf("seed partitioned: create %s: %w", spec.Table, err)
	}
	perDay := spec.Rows / spec.Days
	for i := range spec.Days {
		part := pgx.Identifier{fmt.Sprintf("%s_d%d", spec.Table, i)}.Sanitize()
		lo, hi := start.AddDate(0, 0, i), start.AddDate(0, 0, i+1)
		if _, err := db.Exec(ctx, fmt.Sprintf("CREATE TABLE %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')",
			part, table, lo.Format(time.RFC3339), hi.Format(time.RFC3339))); err != nil {
			return fmt.Errorf("seed partitioned: create partition %d: %w", i, err)
		}
		// The last day takes the remainder, so that the total is Rows exactly.
		n := perDay
		if i == spec.Days-1 {
			n = spec.Rows - perDay*(spec.Days-1)
		}
		if n == 0 {
			continue
		}
		if _, err := db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, at, payload)
SELECT $1::bigint + g, $2::timestamptz + (g - 1) * (interval '1 day' / $3::int), 'event ' || g
FROM generate_series(1, $3::int) g`, part), int64(i*perDay), lo, n); err != nil {
			return fmt.Errorf("seed partitioned: fill partition %d: %w", i, err)
		}
	}
	if spec.Default {
		if _, err := db.Exec(ctx, fmt.Sprintf("CREATE TABLE %s PARTITION OF %s DEFAULT",
			pgx.Identifier{spec.Table + "_default"}.Sanitize(), table)); err != nil {
			return fmt.Errorf("seed partitioned: create default partition: %w", err)
		}
	}
	if _, err := db.Exec(ctx, "ANALYZE "+table); err != nil {
		return fmt.Errorf("seed partitioned: analyze: %w", err)
	}
	return nil
}
