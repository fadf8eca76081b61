package history

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// sizeQuery reads each table's estimated rows and total size from the catalog, scanning none of
// them. A partitioned table is the sum of its leaf partitions: its own pg_class row holds no
// data, and a reltuples of -1 (never analyzed) stands only when every leaf says so. A table
// that does not resolve is left out.
const sizeQuery = `
SELECT t.name, s.rows, s.bytes
FROM unnest($1::text[]) AS t(name)
CROSS JOIN LATERAL (
    SELECT CASE WHEN bool_and(c.reltuples < 0) THEN -1 ELSE sum(greatest(c.reltuples, 0)) END::bigint AS rows,
           sum(pg_total_relation_size(c.oid))::bigint AS bytes
    FROM pg_class c
    JOIN (SELECT to_regclass(t.name) AS relid
          UNION
          SELECT relid FROM pg_partition_tree(to_regclass(t.name)) WHERE isleaf) r ON c.oid = r.relid
    WHERE c.relkind <> 'p'
) s
WHERE s.bytes IS NOT NULL`

// measureLockTimeout bounds the wait for a table's lock while measuring it.
const measureLockTimeout = 100 * time.Millisecond

// tableSize is one table's size as the catalog has it.
type tableSize struct{ rows, bytes int64 }

// measure returns the size of each of tables (policy names, possibly schema-qualified), keyed by
// the name as given; a table that is gone has no entry.
func (s *Store) measure(ctx context.Context, tables []string) (map[string]tableSize, error) {
	out := map[string]tableSize{}
	if len(tables) == 0 {
		return out, nil
	}
	quoted := make([]string, 0, len(tables))
	byQuoted := map[string]string{}
	for _, t := range tables {
		q := pgx.Identifier(strings.Split(t, ".")).Sanitize()
		if _, dup := byQuoted[q]; !dup {
			quoted = append(quoted, q)
		}
		byQuoted[q] = t
	}
	// pg_total_relation_size takes the table's ACCESS SHARE lock: behind a migration's or a
	// VACUUM FULL's lock it would hold the run's answer until the statement timeout. It waits
	// measureLockTimeout at most, and the run is recorded without the sizes.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("measure tables: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, fmt.Sprint(measureLockTimeout.Milliseconds())); err != nil {
		return nil, fmt.Errorf("measure tables: %w", err)
	}
	rows, err := tx.Query(ctx, sizeQuery, quoted)
	if err != nil {
		return nil, fmt.Errorf("measure tables: %w", err)
	}
	for rows.Next() {
		var name string
		var size tableSize
		if err := rows.Scan(&name, &size.rows, &size.bytes); err != nil {
			rows.Close()
			return nil, fmt.Errorf("measure tables: %w", err)
		}
		out[byQuoted[name]] = size
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("measure tables: %w", err)
	}
	return out, nil
}

// historyPasses is the history's record of res's passes, each with its table's size when
// tables (pass name → table) names it and the catalog has it.
func historyPasses(res *wire.Result, tables map[string]string, sizes map[string]tableSize) []wire.HistoryPass {
	passes := make([]wire.HistoryPass, 0, len(res.Passes))
	for _, p := range res.Passes {
		h := wire.HistoryPass{Pass: p.Pass, Deleted: p.Deleted, Archived: p.Archived,
			PartitionsDropped: p.PartitionsDropped, StopReason: p.StopReason, Path: p.Path,
			Children: p.Children, Cascades: p.Cascades, Recovered: p.Recovered,
			Processed: p.Processed, CutoffEpoch: p.CutoffEpoch, AgeUnit: p.AgeUnit, DurationMs: p.DurationMs,
			Lag: p.Lag, LostCommit: p.LostCommit, SchemaChanged: p.SchemaChanged}
		if !p.Cutoff.IsZero() {
			cutoff := p.Cutoff
			h.Cutoff = &cutoff
		}
		if size, ok := sizes[tables[p.Pass]]; ok && tables[p.Pass] != "" {
			h.TableRows, h.TableBytes = &size.rows, &size.bytes
		}
		passes = append(passes, h)
	}
	return passes
}
