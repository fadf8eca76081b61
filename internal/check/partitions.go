package check

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/partition"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// partitions checks a partitions-mode pass: the table is range-partitioned
// on the age column, one level, and the role may drop its partitions.
func (c *checker) partitions(ctx context.Context, sweep string, p policy.Pass) (findings, error) {
	var found findings
	if p.Mode != policy.ModePartitions {
		return found, nil
	}
	info, err := partition.Describe(ctx, c.pool, p.Table, p.AgeColumn)
	var refused *partition.RefusedError
	switch {
	case errors.As(err, &refused):
		found.refuse(c.problem(sweep, p.Name, "mode", "mode partitions: %s", refused.Reason))
		return found, nil
	case err != nil:
		return findings{}, fmt.Errorf("describe partitions of %q: %w", p.Table, err)
	}
	switch {
	case p.ArchiveSchema != "" && !info.Owns:
		found.refuse(c.problem(sweep, p.Name, "archive_schema", "mode partitions: archive_schema moves each partition with ALTER TABLE … SET SCHEMA, which needs the owner of table %q; the drop function %s only drops: make the API's role a member of the table's owner, or drop instead of archiving",
			p.Table, info.Definer))
		return found, nil
	case info.Definer != "" && p.ArchiveSchema == "":
		// Said, since it trades DETACH … CONCURRENTLY away; the direct way, as the table's owner,
		// is the one a pass takes when nothing is said.
		found.warn(c.problem(sweep, p.Name, "mode",
			"mode partitions drops the expired partitions of %q through its drop function %s, as the table's owner: a plain DETACH under the lock timeout, never CONCURRENTLY", p.Table, info.Definer))
	}
	if info.Definer != "" && p.ArchiveSchema == "" {
		if msg, shorter := partition.WindowDiffers(info.DefinerWindow, partition.WindowOf(p), info.SessionTimeZone); msg != "" {
			pr := c.problem(sweep, p.Name, "retention", "mode partitions: the drop function %s was granted with %s: run api grants again and have the table's owner apply its drop function, so that it follows the policy", info.Definer, msg)
			if shorter {
				found.refuse(pr)
				return found, nil
			}
			found.warn(pr)
		}
	}
	if info.Definer != "" && !info.Owns && p.Boundary != policy.BoundaryKeep {
		f, err := c.boundaryPrivileges(ctx, sweep, p)
		if err != nil {
			return findings{}, err
		}
		found.add(f)
	}
	if p.ArchiveSchema != "" {
		var exists, create bool
		if err := c.pool.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL,
			to_regnamespace($1) IS NOT NULL AND has_schema_privilege(to_regnamespace($1), 'CREATE')`,
			pgx.Identifier{p.ArchiveSchema}.Sanitize()).Scan(&exists, &create); err != nil {
			return findings{}, fmt.Errorf("look up schema %q: %w", p.ArchiveSchema, err)
		}
		switch {
		case !exists:
			found.refuse(c.problem(sweep, p.Name, "archive_schema", "archive_schema %q does not exist: CREATE SCHEMA %s;", p.ArchiveSchema, pgx.Identifier{p.ArchiveSchema}.Sanitize()))
		case !create:
			found.refuse(c.problem(sweep, p.Name, "archive_schema", "the API's role may not create tables in archive_schema %q, which moving a partition there needs: GRANT CREATE ON SCHEMA %s TO <role>;",
				p.ArchiveSchema, pgx.Identifier{p.ArchiveSchema}.Sanitize()))
		}
	}
	return found, nil
}

// boundaryPrivileges checks, for a role that drops through the drop function, that it may run the
// boundary's batches: they read and delete in the partition that holds the cutoff and in the
// default one directly, as tables of their own, which the parent's grants do not cover. Any
// partition may come to hold the cutoff, so each must grant them.
func (c *checker) boundaryPrivileges(ctx context.Context, sweep string, p policy.Pass) (findings, error) {
	var found findings
	var missing []string
	if err := c.pool.QueryRow(ctx, `
SELECT ARRAY(SELECT format('%I.%I', n.nspname, k.relname)
             FROM pg_inherits i JOIN pg_class k ON k.oid = i.inhrelid JOIN pg_namespace n ON n.oid = k.relnamespace
             WHERE i.inhparent = to_regclass($1) AND NOT has_table_privilege(k.oid, 'SELECT, UPDATE, DELETE')
             ORDER BY k.relname)`, statement.QuoteName(p.Table)).Scan(&missing); err != nil {
		return findings{}, fmt.Errorf("read the privileges on the partitions of %q: %w", p.Table, err)
	}
	if len(missing) > 0 {
		shown := missing
		if len(shown) > 3 {
			shown = shown[:3]
		}
		found.refuse(c.problem(sweep, p.Name, "boundary", "mode partitions: the boundary's batches delete from the partition holding the cutoff itself, and the API's role lacks SELECT, UPDATE, DELETE on %d partitions of %q (%s): grant them on each partition as it is created (GRANT SELECT, UPDATE, DELETE ON %s TO <role>; pg_partman: inherit_privileges), or set boundary: keep",
			len(missing), p.Table, strings.Join(shown, ", "), shown[0]))
	}
	return found, nil
}
