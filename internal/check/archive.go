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

// archive checks pass p's archive_to: a table (or foreign table) that is not the swept one, in a
// schema of the user's, with a column for each of the swept table's that accepts its values,
// into which the role may insert, and with which the pass's statement compiles. A foreign
// archive's remote table is then proved too (remoteArchive, remoteInsert).
func (c *checker) archive(ctx context.Context, sweep string, p policy.Pass, cutoff time.Time) (findings, error) {
	if p.ArchiveTo == "" {
		return findings{}, nil
	}
	src, err := c.table(ctx, p.Table)
	if err != nil || src.problem != "" {
		return findings{}, err // the catalog step reported it
	}
	found, arch, err := c.archiveTable(ctx, sweep, p, src)
	if err != nil || found.refused() {
		return found, err
	}
	for _, step := range []func() (findings, error){
		func() (findings, error) { return c.archiveSideEffects(ctx, sweep, p, arch.oid) },
		func() (findings, error) { return c.archiveColumns(ctx, sweep, p, src, arch) },
		func() (findings, error) { return c.archiveGrants(ctx, sweep, p, src, arch) },
		func() (findings, error) { return c.archiveAccepts(ctx, sweep, p, src, arch) },
		func() (findings, error) { return c.archiveCompiles(ctx, sweep, p, src, cutoff) },
	} {
		f, err := step()
		if err != nil {
			return findings{}, err
		}
		if found.add(f); f.refused() {
			return found, nil
		}
	}
	if arch.kind != "f" {
		return found, nil
	}
	remote, err := c.remoteArchive(ctx, sweep, p, src.columnNames())
	if err != nil {
		return findings{}, err
	}
	if found.add(remote); remote.refused() || len(remote.warnings) > 0 {
		return found, nil // a remote that cannot be read cannot be inserted into either
	}
	actors, err := c.remoteActors(ctx, sweep, p, arch.oid)
	if err != nil {
		return findings{}, err
	}
	if found.add(actors); actors.refused() {
		return found, nil
	}
	insert, err := c.remoteInsert(ctx, sweep, p, src.columnNames())
	if err != nil {
		return findings{}, err
	}
	found.add(insert)
	return found, nil
}

// archiveRel is the archive as the catalog has it.
type archiveRel struct {
	oid uint32
	// kind is its relkind: r, p or f.
	kind string
	// columns are its columns by name.
	columns map[string]columnInfo
	// sqlName is its name as a suggested statement writes it.
	sqlName string
}

// archiveTable resolves p's archive_to and refuses what cannot hold the swept rows: nothing, a
// relation that is no table, the swept table itself, a table of sweeprail's or the system's.
func (c *checker) archiveTable(ctx context.Context, sweep string, p policy.Pass, src *tableInfo) (findings, archiveRel, error) {
	var found findings
	var arch archiveRel
	err := c.pool.QueryRow(ctx, `SELECT c.oid, c.relkind::text FROM pg_class c WHERE c.oid = to_regclass($1)`,
		statement.QuoteName(p.ArchiveTo)).Scan(&arch.oid, &arch.kind)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		msg, err := c.missingTable(ctx, p.ArchiveTo)
		if err != nil {
			return findings{}, arch, err
		}
		found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to table %q %s (CREATE TABLE %s (LIKE %s) makes one; for cold storage on another server, a postgres_fdw foreign table)",
			p.ArchiveTo, msg, p.ArchiveTo, p.Table))
		return found, arch, nil
	case err != nil:
		return findings{}, arch, fmt.Errorf("look up archive %q: %w", p.ArchiveTo, err)
	case arch.kind != "r" && arch.kind != "p" && arch.kind != "f":
		found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to %q is %s: name a table, or a postgres_fdw foreign table", p.ArchiveTo, relkindName(arch.kind)))
		return found, arch, nil
	case arch.oid == src.oid:
		found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to %q is the swept table itself: name another table", p.ArchiveTo))
		return found, arch, nil
	}
	if found, err := c.archivePlace(ctx, sweep, p, arch.oid); err != nil || found.refused() {
		return found, arch, err
	}
	cols, err := c.columns(ctx, arch.oid)
	if err != nil {
		return findings{}, arch, fmt.Errorf("read columns of %q: %w", p.ArchiveTo, err)
	}
	arch.columns = map[string]columnInfo{}
	for _, col := range cols {
		arch.columns[col.name] = col
	}
	if arch.sqlName, err = c.sqlName(ctx, strings.Split(p.ArchiveTo, ".")...); err != nil {
		return findings{}, arch, err
	}
	return found, arch, nil
}

// archiveColumns refuses each column of the swept table the archive lacks, with the ALTER that
// adds it, and each it holds as another type, with the ALTER that retypes it: every column is
// archived, by name, and an assignment cast to another type can change the value on the way (a
// date for a timestamptz keeps the day only), which the proof would then refuse at every batch.
func (c *checker) archiveColumns(ctx context.Context, sweep string, p policy.Pass, src *tableInfo, arch archiveRel) (findings, error) {
	var found findings
	alter := "ALTER TABLE"
	if arch.kind == "f" {
		alter = "ALTER FOREIGN TABLE" // and the remote table
	}
	for _, col := range src.columns {
		have, ok := arch.columns[col.name]
		if ok && have.typ == col.typ {
			continue
		}
		colName, err := c.sqlName(ctx, col.name)
		if err != nil {
			return findings{}, err
		}
		if ok {
			found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to table %q holds column %q as %s, and %q as %s: an archived value must be the one deleted, so the types must be the same; retype it: %s %s ALTER COLUMN %s TYPE %s;",
				p.ArchiveTo, col.name, have.typ, p.Table, col.typ, alter, arch.sqlName, colName, col.typ))
			continue
		}
		found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to table %q has no column %q: every column of %q is archived, by name; add it: %s %s ADD COLUMN %s %s;",
			p.ArchiveTo, col.name, p.Table, alter, arch.sqlName, colName, col.typ))
	}
	return found, nil
}

// archiveGrants refuses an archive the role may not insert into, or read the swept columns of
// (each batch reads its rows back to prove they arrived), with the GRANT that fixes it.
func (c *checker) archiveGrants(ctx context.Context, sweep string, p policy.Pass, src *tableInfo, arch archiveRel) (findings, error) {
	var found findings
	names := src.columnNames()
	var denied, unreadable []string
	err := c.pool.QueryRow(ctx, `SELECT coalesce(array_agg(n ORDER BY o) FILTER (WHERE NOT has_column_privilege($1::oid, a.n, 'INSERT')), '{}'),
       coalesce(array_agg(n ORDER BY o) FILTER (WHERE NOT has_column_privilege($1::oid, a.n, 'SELECT')), '{}')
FROM unnest($2::text[]) WITH ORDINALITY AS a(n, o)`, arch.oid, names).Scan(&denied, &unreadable)
	if err != nil {
		return findings{}, fmt.Errorf("read privileges on %q: %w", p.ArchiveTo, err)
	}
	if len(denied) == 0 && len(unreadable) == 0 {
		return found, nil
	}
	var role string
	if err := c.pool.QueryRow(ctx, "SELECT current_user").Scan(&role); err != nil {
		return findings{}, fmt.Errorf("read current user: %w", err)
	}
	roleName, err := c.sqlName(ctx, role)
	if err != nil {
		return findings{}, err
	}
	which := func(cols []string) string {
		if len(cols) == len(names) {
			return ""
		}
		return fmt.Sprintf(" (columns %s)", strings.Join(cols, ", "))
	}
	if len(denied) > 0 {
		found.refuse(c.problem(sweep, p.Name, "archive_to", "the API's role %q may not insert into archive_to table %q%s: GRANT INSERT ON %s TO %s;",
			role, p.ArchiveTo, which(denied), arch.sqlName, roleName))
	}
	if len(unreadable) > 0 {
		found.refuse(c.problem(sweep, p.Name, "archive_to", "the API's role %q may not read archive_to table %q%s, which each batch reads its rows back from to prove they arrived as they left: GRANT SELECT ON %s TO %s;",
			role, p.ArchiveTo, which(unreadable), arch.sqlName, roleName))
	}
	return found, nil
}

// archiveAccepts plans the insert of the swept table's rows into the archive; when it fails,
// column by column, to name the columns whose values the archive refuses.
func (c *checker) archiveAccepts(ctx context.Context, sweep string, p policy.Pass, src *tableInfo, arch archiveRel) (findings, error) {
	var found findings
	problem, err := c.explainArchiveInsert(ctx, p, src.columnNames())
	if err != nil || problem == nil {
		return found, err
	}
	for _, col := range src.columns {
		colProblem, err := c.explainArchiveInsert(ctx, p, []string{col.name})
		if err != nil {
			return findings{}, err
		}
		if colProblem != nil {
			found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to table %q does not accept column %q (%s in %q, %s in the archive): %s",
				p.ArchiveTo, col.name, col.typ, p.Table, arch.columns[col.name].typ, describePgError(colProblem, "", 0)))
		}
	}
	if !found.refused() {
		found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to table %q does not accept the rows of %q: %s", p.ArchiveTo, p.Table, describePgError(problem, "", 0)))
	}
	return found, nil
}

// archiveCompiles plans the statement the pass runs with its archive.
func (c *checker) archiveCompiles(ctx context.Context, sweep string, p policy.Pass, src *tableInfo, cutoff time.Time) (findings, error) {
	var found findings
	key, keyType, err := statement.ReadPrimaryKey(ctx, c.pool, p.Table)
	if err != nil {
		return findings{}, fmt.Errorf("read the primary key of %q: %w", p.Table, err)
	}
	if len(key) != 1 {
		found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to needs a primary key of one column on %q: each batch reads its rows back from the archive by it, to prove they arrived as they left; add one (ALTER TABLE %s ADD PRIMARY KEY (…))",
			p.Table, p.Table))
		return found, nil
	}
	st := statement.BuildArchive(p, c.ageKind(p), src.columnNames(), key[0], keyType[0])
	query, args := st.Locked.Index.SQL, []any{cutoff, checkPlanBatchSize}
	if p.Mode == policy.ModeSingle {
		query, args = st.Single.SQL, []any{cutoff}
	}
	_, err = c.explain(ctx, false, query, args...)
	pgErr, err := pgProblem(err)
	if err != nil {
		return findings{}, err
	}
	if pgErr != nil {
		found.refuse(c.problem(sweep, p.Name, "archive_to", "the %s statement with archive_to does not compile: %s", p.Mode, describePgError(pgErr, "", 0)))
	}
	return found, nil
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

// noUserMapping reports whether pgErr is postgres_fdw's refusal of a role without a user mapping.
func noUserMapping(pgErr *pgconn.PgError) bool {
	return pgErr.Code == "42704" || strings.Contains(pgErr.Message, "user mapping")
}

// remoteArchive asks a foreign archive's server for the archived columns, reading one row of the
// remote table: that proves the user mapping, the remote table and its columns. It cannot prove
// that the remote role may insert (only an insert would); a batch refused there fails with
// batch-error and rolls back on both sides.
func (c *checker) remoteArchive(ctx context.Context, sweep string, p policy.Pass, columns []string) (findings, error) {
	var found findings
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
		if pgErr != nil && (pgErr.Code == sqlstateInsufficientPrivilege || noUserMapping(pgErr)) {
			// Refused at execution, after the remote resolved every column: they exist. A
			// missing user mapping is remoteInsert's refusal.
			return nil, nil
		}
		return pgErr, err
	}
	problem, err := probe(columns)
	switch {
	case err != nil:
		return findings{}, err
	case problem == nil:
		return found, nil
	case strings.HasPrefix(problem.Code, "08") || problem.Code == sqlstateQueryCanceled:
		found.warn(c.problem(sweep, p.Name, "archive_to",
			"the server of foreign archive %q could not be reached to check its remote table (%s): its batches fail with batch-error, moving nothing, until it can",
			p.ArchiveTo, describePgError(problem, "", 0)))
		return found, nil
	case problem.Code == "42703":
		for _, col := range columns {
			colProblem, err := probe([]string{col})
			if err != nil {
				return findings{}, err
			}
			if colProblem != nil && colProblem.Code == "42703" {
				found.refuse(c.problem(sweep, p.Name, "archive_to", "the remote table of foreign archive %q has no column %q: add it there (%s)",
					p.ArchiveTo, col, describePgError(colProblem, "", 0)))
			}
		}
		if found.refused() {
			return found, nil
		}
	}
	found.refuse(c.problem(sweep, p.Name, "archive_to", "the remote table of foreign archive %q cannot be read: %s", p.ArchiveTo, describePgError(problem, "", 0)))
	return found, nil
}
