package check

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/partition"
	"github.com/sweeprail/sweeprail/internal/policy"
)

// checkPartitions is the policy check of a partitions-mode pass: the table is range-partitioned
// on the age column, one level, and the role may drop its partitions.
func (c *checker) partitions(ctx context.Context, sweep string, p policy.Pass, _ time.Time) error {
	if p.Mode != policy.ModePartitions {
		return nil
	}
	_, err := partition.Describe(ctx, c.pool, p.Table, p.AgeColumn)
	var refused *partition.RefusedError
	switch {
	case errors.As(err, &refused):
		c.fail(sweep, p.Name, "mode", "mode partitions: %s", refused.Reason)
		return nil
	case err != nil:
		return fmt.Errorf("describe partitions of %q: %w", p.Table, err)
	}
	if p.ArchiveSchema != "" {
		var exists, create bool
		if err := c.pool.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL,
			to_regnamespace($1) IS NOT NULL AND has_schema_privilege(to_regnamespace($1), 'CREATE')`,
			pgx.Identifier{p.ArchiveSchema}.Sanitize()).Scan(&exists, &create); err != nil {
			return fmt.Errorf("look up schema %q: %w", p.ArchiveSchema, err)
		}
		switch {
		case !exists:
			c.fail(sweep, p.Name, "archive_schema", "archive_schema %q does not exist: CREATE SCHEMA %s;", p.ArchiveSchema, pgx.Identifier{p.ArchiveSchema}.Sanitize())
		case !create:
			c.fail(sweep, p.Name, "archive_schema", "the API's role may not create tables in archive_schema %q, which moving a partition there needs: GRANT CREATE ON SCHEMA %s TO <role>;",
				p.ArchiveSchema, pgx.Identifier{p.ArchiveSchema}.Sanitize())
		}
	}
	return nil
}
