package sweep

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// archive_to: each batch moves its rows to another table in the statement that deletes them,
//
//	WITH deleted AS (DELETE FROM <table> AS t WHERE … RETURNING t.*),
//	     archived AS (INSERT INTO <archive> (c1, …, cn) OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted)
//	SELECT count(*), max(deleted.<age>) FROM deleted
//
// so that a row is deleted exactly when it is archived: one statement, one transaction. The
// batch keeps everything a plain batch has (its access path and forms, the predicate
// standing on the delete target, the keyset cursor: the statement still answers the count and
// the newest age it deleted).
//
// The column list. The INSERT names its target columns, c1 … cn: the swept table's columns in
// their order, read from the catalog at the start of each run (archiveColumns), and checked
// against the archive by the policy check (Policy.Check: every one exists in the archive by name
// and accepts the swept column's type). The rows come from deleted.*, which the server expands
// to the swept table's columns in the same order. Naming the targets maps each value to the
// archive column of the same name, whatever the archive's own column order (it may have more
// columns, such as an archived_at with a default). Taking the values as deleted.* rather than
// naming them too is what makes a schema change between the read and a batch fail instead of
// losing data: a column added to the swept table after the run read its list makes deleted.*
// one value longer than the list, and the server refuses the statement ("INSERT has more
// expressions than target columns") before anything is deleted; a dropped one makes it shorter,
// refused the same way. The next run reads the new list (the archive must then have the new
// column, or the batch fails naming it). OVERRIDING SYSTEM VALUE keeps the swept rows' own
// values in an archive whose columns are GENERATED ALWAYS AS IDENTITY (CREATE TABLE … (LIKE …
// INCLUDING ALL) makes one); it changes nothing for other columns.
//
// A foreign archive (postgres_fdw) takes part in the same transaction: its remote transaction
// commits at the local commit, just before it. A batch whose archive server is down, or goes
// down before that commit, fails and rolls back on both sides. What one statement cannot close is
// the moment between the remote commit and the local one (postgres_fdw has no two-phase commit):
// should the API's database crash there, or the remote's answer to its COMMIT be lost, the rows
// stay in the swept table although the archive holds them, and the next run would archive them
// again. An archive with the swept table's primary key refuses that second copy (SQLSTATE
// 23505, batch-error) instead of keeping it; docs/POLICY.md says what to do then. Batches of an
// archiving pass commit synchronously: with synchronous_commit off, a crash could lose a local
// commit after the remote one was durable, undoing the delete of rows the archive keeps.

// archiveStatements are the statements of an archiving pass for one run: they name the swept
// table's columns as the run read them.
type archiveStatements struct {
	// unlocked and locked are statements.unlocked and locked, moving the rows; single is
	// statements.single, moving them, and answering the count.
	unlocked, locked batchStatements
	single           string
}

// buildArchiveStatements writes the statements that move pass p's rows to its archive; st are
// the pass's own statements (for the predicate), columns the swept table's, in order.
func buildArchiveStatements(p Pass, st statements, columns []string) archiveStatements {
	table, age := quoteQualified(p.Table), pgx.Identifier{p.AgeColumn}.Sanitize()
	insert := archiveInsert(p.ArchiveTo, columns, "SELECT deleted.* FROM deleted")
	wrap := func(del string) string { return archiveBatchSQL(del, insert, age) }
	return archiveStatements{
		unlocked: buildBatches(table, st.predicate, age, false, wrap),
		locked:   buildBatches(table, st.predicate, age, true, wrap),
		single: fmt.Sprintf(`WITH deleted AS (
  DELETE FROM %s AS t WHERE %s
  RETURNING t.*),
archived AS (
  %s)
SELECT count(*) FROM deleted`, table, st.predicate, insert),
	}
}

// archiveInsert is an INSERT into archive of rows, a query answering the named columns in order.
func archiveInsert(archive string, columns []string, rows string) string {
	return fmt.Sprintf(`INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE %s`, quoteQualified(archive), columnList("", columns), rows)
}

// columnList quotes columns, each qualified by alias when it is not "", and joins them.
func columnList(alias string, columns []string) string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = pgx.Identifier{c}.Sanitize()
		if alias != "" {
			names[i] = alias + "." + names[i]
		}
	}
	return strings.Join(names, ", ")
}

// archiveBatchSQL wraps a batch's DELETE (indexDelete, heapDelete) so that it moves the rows, answering what
// batchSQL answers: the rows deleted and the newest age among them.
func archiveBatchSQL(del, insert, age string) string {
	return fmt.Sprintf(`WITH deleted AS (
%s
  RETURNING t.*),
archived AS (
  %s)
SELECT count(*), max(deleted.%s) FROM deleted`, del, insert, age)
}

// archiveColumns reads the columns of the swept table, in order, as the statements resolve it
// (schema-qualified, or on the search_path): the list a run's archive statements name.
func archiveColumns(ctx context.Context, pool *pgxpool.Pool, table string) ([]string, error) {
	var cols []string
	err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(a.attname::text ORDER BY a.attnum), '{}')
FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`,
		quoteQualified(table)).Scan(&cols)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("table %q does not exist (or has no columns)", table)
	}
	return cols, nil
}

// checkArchiveTo holds validatePass's rules for archive_to (mode is the pass's, defaulted).
func checkArchiveTo(p Pass, mode Mode) []string {
	var out []string
	if err := checkRelationName(p.ArchiveTo); err != nil {
		out = append(out, fmt.Sprintf("archive_to %q: %v", p.ArchiveTo, err))
	}
	switch mode {
	case ModePerRow:
		out = append(out, "archive_to is for modes batched and single: in mode per-row the function deletes, so archive the row in the function (INSERT … before its DELETE)")
	case ModePartitions:
		// Only the boundary's batches would archive: the rows of a dropped partition would not be.
		out = append(out, "archive_to is for modes batched and single: in mode partitions a dropped partition's rows would not be archived; keep_detached: true keeps expired partitions as tables instead")
	}
	if p.ArchiveTo == p.Table {
		out = append(out, fmt.Sprintf("archive_to %q is the swept table itself: name another table", p.ArchiveTo))
	}
	return out
}

// sqlstateInsufficientPrivilege is what a statement the role may not run raises.
const sqlstateInsufficientPrivilege = "42501"

// archive checks pass p's archive_to against the live schema: the archive exists and is a table,
// a partitioned table or a foreign table, and not the swept table; it has a column of the same
// name for every column of the swept table, which accepts that column's values (an INSERT of
// that column alone, planned); the role may insert into each; and the pass's archive statement
// compiles. A foreign archive's remote table is then asked for the same columns (a read of one
// row): a remote that cannot be reached is a warning, not a refusal, since it is a run's
// problem and the API must boot without it.
func (c *checker) archive(ctx context.Context, sweep string, p Pass, cutoff time.Time) error {
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
		quoteQualified(p.ArchiveTo)).Scan(&oid, &kind)
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
	st := buildArchiveStatements(p, buildStatements(p, c.ageKind(p)), names)
	query, args := st.locked.index, []any{cutoff, checkPlanBatchSize}
	if p.Mode == ModeSingle {
		query, args = st.single, []any{cutoff}
	}
	_, err = c.explain(ctx, false, query, args...)
	if pgErr, err := pgProblem(err); err != nil {
		return err
	} else if pgErr != nil {
		c.fail(sweep, p.Name, "archive_to", "the %s statement with archive_to does not compile: %s", p.Mode, describePgError(pgErr, "", 0))
		return nil
	}
	if kind == "f" {
		return c.remoteArchive(ctx, sweep, p, names)
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
func (c *checker) explainArchiveInsert(ctx context.Context, p Pass, columns []string) (*pgconn.PgError, error) {
	q := archiveInsert(p.ArchiveTo, columns, fmt.Sprintf("SELECT %s FROM %s AS t", columnList("t", columns), quoteQualified(p.Table)))
	_, err := c.explain(ctx, false, q)
	return pgProblem(err)
}

// remoteArchive asks a foreign archive's server for the archived columns, reading one row of the
// remote table: that proves the user mapping, the remote table and its columns. It cannot prove
// that the remote role may insert (only an insert would); a batch refused there fails with
// batch-error and rolls back on both sides.
func (c *checker) remoteArchive(ctx context.Context, sweep string, p Pass, columns []string) error {
	probe := func(cols []string) (*pgconn.PgError, error) {
		err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)", ms(checkStatementTimeout)); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, fmt.Sprintf("SELECT %s FROM %s AS a LIMIT 1", columnList("a", cols), quoteQualified(p.ArchiveTo)))
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
