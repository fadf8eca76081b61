package sweep

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// archiver moves an archiving pass's rows (statement/archive.go): the run's statements that move
// them, the proof that each batch's rows reached the archive as they left, the read-back of a
// foreign archive's rows after each commit, and the healing of its crash window (archiveproof.go).
type archiver struct {
	p   policy.Pass
	log *slog.Logger
	// move are the statements that move the rows, for the swept table's columns as this run read
	// them, with the proof that reads them back by key.
	move statement.Archive
	// heal are the statements that heal the crash window; healing says the batch running now
	// runs them.
	heal    statement.Heal
	key     string
	healing bool
	// foreign says the archive is a foreign table, whose remote commit can still lose rows after
	// the proof: each committed batch is read back (archiver.readBack).
	foreign bool
}

// newArchiver refuses an archive that is the swept table, or what can act on the archive after
// the proof, reads the swept table's columns and primary key, and writes the run's archive
// statements with them: read per run, so that a column added to both tables by a migration is
// archived from the next run on, without a restart. p names its tables as statements do
// (passRun.sql); the archiver's errors name shown's.
func newArchiver(ctx context.Context, pool *pgxpool.Pool, shown, p policy.Pass, kind statement.Kind, log *slog.Logger) (*archiver, error) {
	if err := refuseSelfArchive(ctx, pool, shown, p); err != nil {
		return nil, err
	}
	if err := refuseLateActors(ctx, pool, p); err != nil {
		return nil, err
	}
	cols, err := statement.ReadColumns(ctx, pool, p.Table)
	if err != nil {
		return nil, err
	}
	key, keyType, err := statement.ReadPrimaryKey(ctx, pool, p.Table)
	if err != nil {
		return nil, fmt.Errorf("read the primary key of %q: %w", p.Table, err)
	}
	if len(key) != 1 {
		return nil, fmt.Errorf("archive_to needs a primary key of one column on %q, by which each batch proves its rows reached the archive: add one", shown.Table)
	}
	a := &archiver{p: shown, log: log, key: key[0]}
	a.heal = statement.BuildHeal(p, kind, cols, key[0], keyType[0])
	a.move = statement.BuildArchive(p, kind, cols, key[0], keyType[0])
	if a.foreign, err = statement.IsForeign(ctx, pool, p.ArchiveTo); err != nil {
		return nil, fmt.Errorf("look up archive %q: %w", p.ArchiveTo, err)
	}
	return a, nil
}

// refuseSelfArchive fails when pass p's archive_to is its swept table under another spelling
// (audit_log and public.audit_log): each batch would delete its rows and insert them back. The
// policy check refuses it at boot; a run asks again, since a schema change (a search_path, a
// table renamed into place) can make two names one table later. sql names the tables as
// statements do; the error names shown's.
func refuseSelfArchive(ctx context.Context, pool *pgxpool.Pool, shown, sql policy.Pass) error {
	same, err := statement.SameTable(ctx, pool, sql.Table, sql.ArchiveTo)
	if err != nil {
		return fmt.Errorf("look up archive %q: %w", shown.ArchiveTo, err)
	}
	if same {
		return fmt.Errorf("archive_to %q is the swept table %q itself: name another table", shown.ArchiveTo, shown.Table)
	}
	return nil
}

// batch is the batch statements a batch runs now (lock: the locking form), moving the rows.
func (a *archiver) batch(lock bool) statement.Batch {
	switch {
	case a.healing && lock:
		return a.heal.Locked
	case a.healing:
		return a.heal.Unlocked
	case lock:
		return a.move.Locked
	}
	return a.move.Unlocked
}

// single is the statement of a single-mode pass, moving the rows.
func (a *archiver) single() statement.Form {
	if a.healing {
		return a.heal.Single
	}
	return a.move.Single
}

// refuseLateActors fails when pass p's archive has what can act on its rows after the proof:
// a deferrable constraint trigger (it fires at commit) or a rule. The policy check refuses them
// at boot; a run asks again, since either can be added later.
func refuseLateActors(ctx context.Context, pool *pgxpool.Pool, p policy.Pass) error {
	triggers, rules, err := statement.ReadLateActors(ctx, pool, p.ArchiveTo)
	if err != nil {
		return fmt.Errorf("read the triggers and rules of archive %q: %w", p.ArchiveTo, err)
	}
	if len(triggers) > 0 || len(rules) > 0 {
		return fmt.Errorf("archive_to %q has %s: they act after each batch's proof that the archive holds its rows; drop them (`api policy check` names them)",
			p.ArchiveTo, strings.Join(append(triggers, rules...), ", "))
	}
	return nil
}

// archived is how many of batch b's deleted rows it archived: all of them but those a healing
// batch recovered and those the archive lost after the commit, or none for a pass without
// archive_to (a nil archiver).
func (a *archiver) archived(b batchResult) int64 {
	if a == nil {
		return 0
	}
	return b.n - b.recovered - b.lost
}
