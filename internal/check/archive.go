package check

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// The SQLSTATEs the check reads: a statement the role may not run, one a statement_timeout ended.
const (
	sqlstateInsufficientPrivilege = "42501"
	sqlstateQueryCanceled         = "57014"
)

// archive checks pass p's archive_to against the live schema: the archive exists and is a table,
// a partitioned table or a foreign table, and not the swept table; it has a column of the same
// name for every column of the swept table, which accepts that column's values (an INSERT of
// that column alone, planned); the role may insert into each; and the pass's archive statement
// compiles. A foreign archive's remote table is then asked for the same columns (a read of one
// row): a remote that cannot be reached is a warning, not a refusal, since it is a run's
// problem and the API must boot without it.
func (c *checker) archive(ctx context.Context, sweep string, p policy.Pass, cutoff time.Time) error {
	if p.ArchiveTo == "" {
		return nil
	}
	src, err := c.table(ctx, p.Table)
	if err != nil || src.problem != "" {
		return err // the catalog step reported it
	}
	var oid uint32
	var kind string
	err = c.pool.QueryRow(ctx, `SELECT c.oid, c.relkind::text FROM pg_class c WHERE c.oid = to_regclass($1)`,
		statement.QuoteName(p.ArchiveTo)).Scan(&oid, &kind)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		msg, err := c.missingTable(ctx, p.ArchiveTo)
		if err != nil {
			return err
		}
		c.fail(sweep, p.Name, "archive_to", "archive_to table %q %s (CREATE TABLE %s (LIKE %s) makes one; for cold storage on another server, a postgres_fdw foreign table)",
			p.ArchiveTo, msg, p.ArchiveTo, p.Table)
		return nil
	case err != nil:
		return fmt.Errorf("look up archive %q: %w", p.ArchiveTo, err)
	case kind != "r" && kind != "p" && kind != "f":
		c.fail(sweep, p.Name, "archive_to", "archive_to %q is %s: name a table, or a postgres_fdw foreign table", p.ArchiveTo, relkindName(kind))
		return nil
	case oid == src.oid:
		c.fail(sweep, p.Name, "archive_to", "archive_to %q is the swept table itself: name another table", p.ArchiveTo)
		return nil
	}
	if refused, err := c.archivePlace(ctx, sweep, p, oid); err != nil || refused {
		return err
	}
	if err := c.archiveSideEffects(ctx, sweep, p, oid); err != nil {
		return err
	}
	archCols, err := c.columns(ctx, oid)
	if err != nil {
		return fmt.Errorf("read columns of %q: %w", p.ArchiveTo, err)
	}
	have := map[string]columnInfo{}
	for _, col := range archCols {
		have[col.name] = col
	}
	alter := "ALTER TABLE"
	if kind == "f" {
		alter = "ALTER FOREIGN TABLE" // and the remote table
	}
	archiveName, err := c.sqlName(ctx, strings.Split(p.ArchiveTo, ".")...)
	if err != nil {
		return err
	}
	before := len(c.errs)
	names := make([]string, len(src.columns))
	for i, col := range src.columns {
		names[i] = col.name
		if _, ok := have[col.name]; !ok {
			colName, err := c.sqlName(ctx, col.name)
			if err != nil {
				return err
			}
			c.fail(sweep, p.Name, "archive_to", "archive_to table %q has no column %q: every column of %q is archived, by name; add it: %s %s ADD COLUMN %s %s;",
				p.ArchiveTo, col.name, p.Table, alter, archiveName, colName, col.typ)
		}
	}
	if len(c.errs) > before {
		return nil
	}
	var denied []string
	err = c.pool.QueryRow(ctx, `SELECT coalesce(array_agg(n ORDER BY o), '{}') FROM unnest($2::text[]) WITH ORDINALITY AS a(n, o)
WHERE NOT has_column_privilege($1::oid, a.n, 'INSERT')`, oid, names).Scan(&denied)
	if err != nil {
		return fmt.Errorf("read privileges on %q: %w", p.ArchiveTo, err)
	}
	if len(denied) > 0 {
		var role string
		if err := c.pool.QueryRow(ctx, "SELECT current_user").Scan(&role); err != nil {
			return fmt.Errorf("read current user: %w", err)
		}
		roleName, err := c.sqlName(ctx, role)
		if err != nil {
			return err
		}
		what := fmt.Sprintf(" (columns %s)", strings.Join(denied, ", "))
		if len(denied) == len(names) {
			what = ""
		}
		c.fail(sweep, p.Name, "archive_to", "the API's role %q may not insert into archive_to table %q%s: GRANT INSERT ON %s TO %s;",
			role, p.ArchiveTo, what, archiveName, roleName)
		return nil
	}
	// The whole insert first; column by column only when it fails, to name the columns.
	if problem, err := c.explainArchiveInsert(ctx, p, names); err != nil {
		return err
	} else if problem != nil {
		for _, col := range src.columns {
			colProblem, err := c.explainArchiveInsert(ctx, p, []string{col.name})
			if err != nil {
				return err
			}
			if colProblem != nil {
				c.fail(sweep, p.Name, "archive_to", "archive_to table %q does not accept column %q (%s in %q, %s in the archive): %s",
					p.ArchiveTo, col.name, col.typ, p.Table, have[col.name].typ, describePgError(colProblem, "", 0))
			}
		}
		if len(c.errs) == before {
			c.fail(sweep, p.Name, "archive_to", "archive_to table %q does not accept the rows of %q: %s", p.ArchiveTo, p.Table, describePgError(problem, "", 0))
		}
		return nil
	}
	st := statement.BuildArchive(p, c.ageKind(p), names)
	query, args := st.Locked.Index, []any{cutoff, checkPlanBatchSize}
	if p.Mode == policy.ModeSingle {
		query, args = st.Single, []any{cutoff}
	}
	_, err = c.explain(ctx, false, query, args...)
	if pgErr, err := pgProblem(err); err != nil {
		return err
	} else if pgErr != nil {
		c.fail(sweep, p.Name, "archive_to", "the %s statement with archive_to does not compile: %s", p.Mode, describePgError(pgErr, "", 0))
		return nil
	}
	if kind == "f" {
		before := len(c.errs) + len(c.warnings)
		if err := c.remoteArchive(ctx, sweep, p, names); err != nil || len(c.errs)+len(c.warnings) > before {
			return err
		}
		return c.remoteInsert(ctx, sweep, p, names)
	}
	return nil
}

// sqlName writes a possibly qualified name as a person would in SQL: each part quoted only where
// it must be (quote_ident: upper case, a keyword), so that a suggested statement reads plainly.
func (c *checker) sqlName(ctx context.Context, parts ...string) (string, error) {
	var name string
	if err := c.pool.QueryRow(ctx, `SELECT string_agg(quote_ident(p), '.' ORDER BY o) FROM unnest($1::text[]) WITH ORDINALITY AS a(p, o)`,
		parts).Scan(&name); err != nil {
		return "", fmt.Errorf("quote %q: %w", strings.Join(parts, "."), err)
	}
	return name, nil
}

// explainArchiveInsert plans an INSERT of columns of the swept table into the archive, and
// returns the statement's own failure (a type that does not fit, a generated column).
func (c *checker) explainArchiveInsert(ctx context.Context, p policy.Pass, columns []string) (*pgconn.PgError, error) {
	q := statement.ArchiveInsert(p.ArchiveTo, columns, fmt.Sprintf("SELECT %s FROM %s AS t", statement.ColumnList("t", columns), statement.QuoteName(p.Table)))
	_, err := c.explain(ctx, false, q)
	return pgProblem(err)
}

// remoteArchive asks a foreign archive's server for the archived columns, reading one row of the
// remote table: that proves the user mapping, the remote table and its columns. It cannot prove
// that the remote role may insert (only an insert would); a batch refused there fails with
// batch-error and rolls back on both sides.
func (c *checker) remoteArchive(ctx context.Context, sweep string, p policy.Pass, columns []string) error {
	probe := func(cols []string) (*pgconn.PgError, error) {
		err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			if err := (statement.Timeouts{Statement: checkStatementTimeout}).Set(ctx, tx); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, fmt.Sprintf("SELECT %s FROM %s AS a LIMIT 1", statement.ColumnList("a", cols), statement.QuoteName(p.ArchiveTo)))
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		})
		pgErr, err := pgProblem(err)
		if pgErr != nil && pgErr.Code == sqlstateInsufficientPrivilege {
			// Refused at execution, after the remote resolved every column: they exist.
			return nil, nil
		}
		return pgErr, err
	}
	problem, err := probe(columns)
	switch {
	case err != nil:
		return err
	case problem == nil:
		return nil
	case strings.HasPrefix(problem.Code, "08") || problem.Code == sqlstateQueryCanceled:
		c.warnings = append(c.warnings, c.problem(sweep, p.Name, "archive_to",
			"the server of foreign archive %q could not be reached to check its remote table (%s): its batches fail with batch-error, moving nothing, until it can",
			p.ArchiveTo, describePgError(problem, "", 0)).Error())
		return nil
	case problem.Code == "42703":
		before := len(c.errs)
		for _, col := range columns {
			colProblem, err := probe([]string{col})
			if err != nil {
				return err
			}
			if colProblem != nil && colProblem.Code == "42703" {
				c.fail(sweep, p.Name, "archive_to", "the remote table of foreign archive %q has no column %q: add it there (%s)",
					p.ArchiveTo, col, describePgError(colProblem, "", 0))
			}
		}
		if len(c.errs) > before {
			return nil
		}
	}
	c.fail(sweep, p.Name, "archive_to", "the remote table of foreign archive %q cannot be read: %s", p.ArchiveTo, describePgError(problem, "", 0))
	return nil
}
