package check

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// ownSchema is sweeprail's own schema: its lease, run history and replay store.
const ownSchema = "sweeprail"

// archivePlace refuses an archive in sweeprail's own schema, where rows inserted would be read
// as leases or runs (a forged lease disables another sweep), or in a system schema.
func (c *checker) archivePlace(ctx context.Context, sweep string, p policy.Pass, oid uint32) (findings, error) {
	var found findings
	var schema string
	if err := c.pool.QueryRow(ctx, `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`,
		oid).Scan(&schema); err != nil {
		return findings{}, fmt.Errorf("look up the schema of archive %q: %w", p.ArchiveTo, err)
	}
	switch {
	case schema == ownSchema:
		found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to %q is in schema %s, sweeprail's own (its leases, run history and replay store): rows archived there would be read as its own; archive to a table of another schema",
			p.ArchiveTo, ownSchema))
	case schema == "pg_catalog" || schema == "information_schema" || strings.HasPrefix(schema, "pg_"):
		found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to %q is in system schema %s: archive to a table of your own schema", p.ArchiveTo, schema))
	}
	return found, nil
}

// archiveSideEffects refuses what on the archive acts after each batch's proof that it holds the
// batch's rows: a deferrable constraint trigger fires at commit, and a rule rewrites the insert
// itself. The archive's other triggers that fire on INSERT are listed, as a warning: the proof
// reads the rows back after the batch's statement, when their AFTER triggers have run too, and
// rolls the batch back if a trigger removed or changed one.
func (c *checker) archiveSideEffects(ctx context.Context, sweep string, p policy.Pass, oid uint32) (findings, error) {
	var found findings
	var triggers, deferrable, rules []string
	err := c.pool.QueryRow(ctx, `
SELECT ARRAY(SELECT format('%s (%s INSERT, %s)', t.tgname,
                           CASE WHEN t.tgtype & 2 <> 0 THEN 'BEFORE' WHEN t.tgtype & 64 <> 0 THEN 'INSTEAD OF' ELSE 'AFTER' END,
                           t.tgfoid::regproc)
             FROM pg_trigger t WHERE t.tgrelid = $1 AND NOT t.tgisinternal AND NOT t.tgdeferrable AND t.tgenabled <> 'D' AND t.tgtype & 4 <> 0
             ORDER BY t.tgname),
       ARRAY(SELECT t.tgname::text FROM pg_trigger t WHERE t.tgrelid = $1 AND NOT t.tgisinternal AND t.tgdeferrable ORDER BY t.tgname),
       ARRAY(SELECT format('%s (ON %s%s)', r.rulename,
                           CASE r.ev_type WHEN '1' THEN 'SELECT' WHEN '2' THEN 'UPDATE' WHEN '3' THEN 'INSERT' ELSE 'DELETE' END,
                           CASE WHEN r.is_instead THEN ' DO INSTEAD' ELSE '' END)
             FROM pg_rewrite r WHERE r.ev_class = $1 AND r.rulename <> '_RETURN' ORDER BY r.rulename)`, oid).Scan(&triggers, &deferrable, &rules)
	if err != nil {
		return findings{}, fmt.Errorf("read the triggers and rules of %q: %w", p.ArchiveTo, err)
	}
	for _, t := range deferrable {
		found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to table %q has deferrable constraint trigger %s: it fires at commit, after each batch's proof that the archive holds its rows; drop it, or recreate it NOT DEFERRABLE (it then fires before the proof)",
			p.ArchiveTo, t))
	}
	for _, r := range rules {
		found.refuse(c.problem(sweep, p.Name, "archive_to", "archive_to table %q has rule %s: a rule rewrites the batch's insert, so rows may never reach the archive; drop it (DROP RULE … ON %s)",
			p.ArchiveTo, r, p.ArchiveTo))
	}
	if len(triggers) > 0 && !found.refused() {
		found.warn(c.problem(sweep, p.Name, "archive_to",
			"archive_to table %q has triggers %s: each batch reads its rows back from the archive after its statement (and its AFTER triggers), by key and content, and rolls back (batch-error archive-short or archive-altered) when one is missing or changed",
			p.ArchiveTo, strings.Join(triggers, ", ")))
	}
	return found, nil
}

// remoteInsert proves what only an insert proves of a foreign archive: that the API's role (the
// check's own connection) has a user mapping on its server, and that the remote role may insert
// into the remote table and keeps what it is given. It inserts one row of the swept table (a
// row of NULLs when it is empty) in a transaction that is always rolled back, here and on the
// remote server. A remote constraint that refuses the row (a key it holds already, a NULL) has
// run the insert, which is the proof; a remote that cannot be reached is remoteArchive's warning.
func (c *checker) remoteInsert(ctx context.Context, sweep string, p policy.Pass, columns []string) (findings, error) {
	var found findings
	rows := fmt.Sprintf("SELECT %s FROM %s AS t LIMIT 1", statement.ColumnList("t", columns), statement.QuoteName(p.Table))
	var sent, kept int64
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := (statement.Timeouts{Statement: checkStatementTimeout}).Set(ctx, tx); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM ("+rows+") AS r").Scan(&sent); err != nil {
			return err
		}
		if sent == 0 {
			nulls := make([]string, len(columns))
			for i := range nulls {
				nulls[i] = "NULL"
			}
			rows, sent = "VALUES ("+strings.Join(nulls, ", ")+")", 1
		}
		q := "WITH archived AS (" + statement.ArchiveInsert(p.ArchiveTo, columns, rows) + " RETURNING 1) SELECT count(*) FROM archived"
		if err := tx.QueryRow(ctx, q).Scan(&kept); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	pgErr, err := pgProblem(err)
	switch {
	case err != nil:
		return findings{}, err
	case pgErr == nil && kept < sent:
		found.refuse(c.problem(sweep, p.Name, "archive_to", "foreign archive %q kept none of the row the check inserted (and rolled back): a trigger or rule on its remote table discards rows, and every batch would roll back with batch-error archive-short; remove it there",
			p.ArchiveTo))
	case pgErr == nil, strings.HasPrefix(pgErr.Code, "23"):
		// The remote ran the insert: a constraint there refused the probe's row, not the role.
	case noUserMapping(pgErr):
		var role string
		if err := c.pool.QueryRow(ctx, "SELECT current_user").Scan(&role); err != nil {
			return findings{}, fmt.Errorf("read current user: %w", err)
		}
		found.refuse(c.problem(sweep, p.Name, "archive_to", "foreign archive %q has no user mapping for the API's role %q: every batch would fail with 42704; CREATE USER MAPPING FOR %s SERVER … OPTIONS (user '…', password '…'); (%s)",
			p.ArchiveTo, role, role, describePgError(pgErr, "", 0)))
	case strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == sqlstateQueryCanceled:
		found.warn(c.problem(sweep, p.Name, "archive_to",
			"the server of foreign archive %q could not be reached to prove an insert (%s): its batches fail with batch-error, moving nothing, until it can",
			p.ArchiveTo, describePgError(pgErr, "", 0)))
	default:
		found.refuse(c.problem(sweep, p.Name, "archive_to", "the API's role cannot insert into foreign archive %q: %s; every batch would fail and roll back", p.ArchiveTo, describePgError(pgErr, "", 0)))
	}
	return found, nil
}

// errRollback ends a transaction whose work is only a proof: it is always rolled back.
var errRollback = errors.New("rolled back")
