package check

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// remoteCatalogSQL makes the remote server's catalog tables readable here, as temporary foreign
// tables on the archive's server (%s), in a transaction that is always rolled back: the remote
// table's triggers and rules are then read through postgres_fdw, with no extension on either side.
const remoteCatalogSQL = `
CREATE FOREIGN TABLE pg_temp.sweeprail_remote_namespace (oid oid, nspname name) SERVER %[1]s OPTIONS (schema_name 'pg_catalog', table_name 'pg_namespace');
CREATE FOREIGN TABLE pg_temp.sweeprail_remote_class (oid oid, relname name, relnamespace oid) SERVER %[1]s OPTIONS (schema_name 'pg_catalog', table_name 'pg_class');
CREATE FOREIGN TABLE pg_temp.sweeprail_remote_trigger (tgrelid oid, tgname name, tgdeferrable bool, tgisinternal bool) SERVER %[1]s OPTIONS (schema_name 'pg_catalog', table_name 'pg_trigger');
CREATE FOREIGN TABLE pg_temp.sweeprail_remote_rewrite (ev_class oid, rulename name) SERVER %[1]s OPTIONS (schema_name 'pg_catalog', table_name 'pg_rewrite')`

// remoteActorsSQL reads the remote table $1.$2's deferrable constraint triggers and its rules.
const remoteActorsSQL = `
WITH r AS (SELECT c.oid FROM pg_temp.sweeprail_remote_class c JOIN pg_temp.sweeprail_remote_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = $1 AND c.relname = $2)
SELECT ARRAY(SELECT t.tgname::text FROM pg_temp.sweeprail_remote_trigger t
             WHERE t.tgrelid IN (SELECT oid FROM r) AND t.tgdeferrable AND NOT t.tgisinternal ORDER BY 1),
       ARRAY(SELECT w.rulename::text FROM pg_temp.sweeprail_remote_rewrite w
             WHERE w.ev_class IN (SELECT oid FROM r) AND w.rulename <> '_RETURN' ORDER BY 1)`

// foreignTargetSQL reads foreign table $1's server and the remote table it names (postgres_fdw's
// options, defaulting to the foreign table's own schema and name).
const foreignTargetSQL = `
SELECT quote_ident(s.srvname),
       coalesce((SELECT substr(o, length('schema_name=') + 1) FROM unnest(f.ftoptions) o WHERE o LIKE 'schema_name=%'), n.nspname),
       coalesce((SELECT substr(o, length('table_name=') + 1) FROM unnest(f.ftoptions) o WHERE o LIKE 'table_name=%'), c.relname)
FROM pg_foreign_table f JOIN pg_foreign_server s ON s.oid = f.ftserver
JOIN pg_class c ON c.oid = f.ftrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE f.ftrelid = $1`

// remoteActors refuses what on a foreign archive's remote table acts after each batch's proof:
// a deferrable constraint trigger fires at the remote commit, and a rule rewrites the insert
// there. Learning it needs USAGE on the foreign server (for the temporary foreign tables over the
// remote catalog); without it, a warning says that only the read-back after each commit, which
// halts the sweep, catches them.
func (c *checker) remoteActors(ctx context.Context, sweep string, p policy.Pass, oid uint32) (findings, error) {
	var found findings
	var server, schema, table string
	if err := c.pool.QueryRow(ctx, foreignTargetSQL, oid).Scan(&server, &schema, &table); err != nil {
		return findings{}, fmt.Errorf("read the remote table of foreign archive %q: %w", p.ArchiveTo, err)
	}
	var triggers, rules []string
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := (statement.Timeouts{Statement: checkStatementTimeout}).Set(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(remoteCatalogSQL, server)); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, remoteActorsSQL, schema, table).Scan(&triggers, &rules); err != nil {
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
	case pgErr != nil && noUserMapping(pgErr):
		return found, nil // remoteInsert refuses it, with the statement that fixes it
	case pgErr != nil:
		found.warn(c.problem(sweep, p.Name, "archive_to",
			"the triggers and rules of foreign archive %q's remote table could not be read through server %s (%s): one that acts at the remote commit is caught only by the read-back after each batch's commit, which halts the sweep (archive-lost); GRANT USAGE ON FOREIGN SERVER %s to the API's role",
			p.ArchiveTo, server, fmt.Sprintf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code), server))
		return found, nil
	}
	remote := schema + "." + table
	for _, t := range triggers {
		found.refuse(c.problem(sweep, p.Name, "archive_to", "the remote table %s of foreign archive %q has deferrable constraint trigger %s: it fires at the remote commit, after each batch's proof that the archive holds its rows; drop it there, or recreate it NOT DEFERRABLE",
			remote, p.ArchiveTo, t))
	}
	for _, r := range rules {
		found.refuse(c.problem(sweep, p.Name, "archive_to", "the remote table %s of foreign archive %q has rule %s: a rule rewrites the insert there, so rows may never reach the archive; drop it there (DROP RULE %s ON %s)",
			remote, p.ArchiveTo, r, r, remote))
	}
	return found, nil
}
