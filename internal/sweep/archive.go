package sweep

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// refuseSelfArchive fails when pass p's archive_to is its swept table under another spelling
// (audit_log and public.audit_log). Such a pass deletes each batch's rows and inserts them back:
// history says deleted and archived, and nothing is ever retained less. The policy check refuses
// it at boot by the tables' oids; a run asks again, since the specs may not have been checked and
// a schema change (a search_path, a table renamed into place) can make two names one table later.
func refuseSelfArchive(ctx context.Context, pool *pgxpool.Pool, p policy.Pass) error {
	same, err := statement.SameTable(ctx, pool, p.Table, p.ArchiveTo)
	if err != nil {
		return fmt.Errorf("look up archive %q: %w", p.ArchiveTo, err)
	}
	if same {
		return fmt.Errorf("archive_to %q is the swept table %q itself: name another table", p.ArchiveTo, p.Table)
	}
	return nil
}

// prepareArchive refuses an archive that is the swept table, reads the swept table's columns and
// writes the run's archive statements with them (statement/archive.go): a list read per run, so
// that a column added to both tables by a migration is archived from the next run on, without a
// restart.
func (pr *passRun) prepareArchive() error {
	ctx, cancel := context.WithTimeout(pr.db, pr.r.cfg.Settings.StatementTimeout)
	defer cancel()
	if err := refuseSelfArchive(ctx, pr.r.cfg.Pool, pr.p); err != nil {
		return err
	}
	cols, err := statement.ReadColumns(ctx, pr.r.cfg.Pool, pr.p.Table)
	if err != nil {
		return err
	}
	if err := pr.prepareHeal(ctx, cols); err != nil {
		return err
	}
	st := statement.BuildArchive(pr.p, pr.kind, cols)
	foreign, err := statement.IsForeign(ctx, pr.r.cfg.Pool, pr.p.ArchiveTo)
	if err != nil {
		return fmt.Errorf("look up archive %q: %w", pr.p.ArchiveTo, err)
	}
	if foreign && pr.heal != nil {
		keyed := statement.BuildForeignArchive(pr.p, pr.kind, cols, pr.healKey, pr.healKeyType)
		// The count needs SELECT on the foreign table and on its remote one: asked once per run,
		// for no key, which the remote checks as it would for a batch's. Without it, each batch
		// is proven by RETURNING, a row at a time.
		if err := pgx.BeginTxFunc(ctx, pr.r.cfg.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			var n int64
			return tx.QueryRow(ctx, keyed.Count.SQL, []string{}).Scan(&n)
		}); err != nil {
			pr.log.Info("foreign archive cannot be counted: each batch proves its archive by RETURNING, a row at a time; grant SELECT on it, here and on its remote table",
				"pass", pr.p.Name, "archive", pr.p.ArchiveTo, "err", err)
		} else {
			st = keyed
		}
	}
	pr.arch = &st
	return nil
}

// archived is how many of batch b's deleted rows it archived: all of them but those a healing
// batch recovered (proven), or none for a pass without archive_to.
func (pr *passRun) archived(b batchResult) int64 {
	if pr.arch == nil {
		return 0
	}
	return b.n - b.recovered
}
