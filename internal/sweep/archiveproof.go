package sweep

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sweeprail/sweeprail/internal/statement"
)

// The answer's error codes for a batch whose archive did not take its rows: fewer than it
// deleted (short), or rows of the same key that differ from the swept ones (differs).
const (
	ArchiveShortCode   = "archive-short"
	ArchiveDiffersCode = "archive-differs"
)

// sqlstateUniqueViolation is what an archive raises for a key it holds already.
const sqlstateUniqueViolation = "23505"

// ArchiveShortError is a batch whose archive insert reported fewer rows than the delete removed:
// a trigger that returns NULL, a rule, or a foreign table whose remote side discards rows. The
// batch is rolled back, so no row is deleted that the archive did not take.
type ArchiveShortError struct {
	Archive           string
	Deleted, Archived int64
}

func (e *ArchiveShortError) Error() string {
	return fmt.Sprintf("archive %q took %d of the %d rows the batch deleted: rolled back, nothing deleted; a trigger or rule on the archive (or on its remote table) discards rows: `api policy check` lists them",
		e.Archive, e.Archived, e.Deleted)
}

// ArchiveDiffersError is a healing batch that met rows the archive holds under the same key but
// with other values: which copy is right is not sweeprail's to guess, so the batch rolls back and
// the run stops, naming the keys, until an operator removes one of the two.
type ArchiveDiffersError struct {
	Archive, Table, Key string
	Values              []string
}

func (e *ArchiveDiffersError) Error() string {
	keys := make([]string, len(e.Values))
	for i, v := range e.Values {
		keys[i] = fmt.Sprintf("Key (%s)=(%s)", e.Key, v)
	}
	return fmt.Sprintf("archive %q holds rows of %q under the same key as rows the batch would archive, with other values: %s; rolled back, nothing deleted: compare the two copies, and delete the one you do not keep",
		e.Archive, e.Table, strings.Join(keys, ", "))
}

// A foreign archive's crash window: should the API's database crash between the cold server's
// commit and its own (postgres_fdw has no two-phase commit), the rows stay in the swept table
// although the archive holds them, and the next batch meeting them fails with 23505 on the
// archive's key. The batch is then run once more, healing: its insert skips the rows the archive
// holds (ON CONFLICT DO NOTHING) and answers them, and before it commits they are compared,
// whole, with the archive's copies. Identical ones are the crash's: deleted from the swept
// table with the rest of the batch, and counted as recovered. Any that differ stop the batch
// (ArchiveDiffersError). Healing needs the swept table's primary key of one column, which the
// archive must hold as its key too; without one, the 23505 stands.

// prepareHeal reads the swept table's primary key and writes the run's healing statements with
// it, when it is one column.
func (pr *passRun) prepareHeal(ctx context.Context, cols []string) error {
	key, keyType, err := statement.ReadPrimaryKey(ctx, pr.r.cfg.Pool, pr.p.Table)
	if err != nil {
		return fmt.Errorf("read the primary key of %q: %w", pr.p.Table, err)
	}
	if len(key) != 1 {
		return nil
	}
	h := statement.BuildHeal(pr.p, pr.kind, cols, key[0], keyType[0])
	pr.heal, pr.healKey, pr.healKeyType = &h, key[0], keyType[0]
	return nil
}

// archiveAnswer is where an archiving batch statement's answer goes after the rows deleted (and
// the newest age): the rows archived, and for a healing batch the rows the archive held.
func (pr *passRun) archiveAnswer(b *batchResult) []any {
	switch {
	case pr.healing:
		return []any{&b.archived, &b.heldKeys, &b.heldRows}
	case pr.arch.Count.SQL != "":
		return []any{&b.keys}
	}
	return []any{&b.archived}
}

// healed runs the batch once more, healing, when err is the archive refusing a key it holds
// already; otherwise it returns err.
func (pr *passRun) healed(err error, again func() error) error {
	var pgErr *pgconn.PgError
	if err == nil || pr.heal == nil || pr.healing || !errors.As(err, &pgErr) || pgErr.Code != sqlstateUniqueViolation {
		return err
	}
	pr.log.Info("sweep batch met rows its archive holds already: healing", "pass", pr.p.Name, "archive", pr.p.ArchiveTo, "err", err)
	pr.healing = true
	defer func() { pr.healing = false }()
	return again()
}

// proven returns b, or the error that rolls it back: an archiving batch must have moved every row
// it deleted, to the archive now or (healing) in a commit before, identical.
func (pr *passRun) proven(ctx context.Context, tx pgx.Tx, b batchResult) (batchResult, error) {
	if pr.arch == nil {
		return b, nil
	}
	if pr.arch.Count.SQL != "" && !pr.healing && len(b.keys) > 0 {
		// The foreign archive's own count of the keys deleted, in this transaction's remote one.
		if err := tx.QueryRow(ctx, pr.arch.Count.SQL, b.keys).Scan(&b.archived); err != nil {
			return batchResult{}, fmt.Errorf("count the rows the archive took: %w", err)
		}
	}
	if pr.healing && len(b.heldKeys) > 0 {
		copies := map[string]string{}
		rows, err := tx.Query(ctx, pr.heal.Held.SQL, b.heldKeys)
		if err != nil {
			return batchResult{}, fmt.Errorf("read the archive's copies: %w", err)
		}
		for rows.Next() {
			var k, row string
			if err := rows.Scan(&k, &row); err != nil {
				rows.Close()
				return batchResult{}, fmt.Errorf("read the archive's copies: %w", err)
			}
			copies[k] = row
		}
		if err := rows.Err(); err != nil {
			return batchResult{}, fmt.Errorf("read the archive's copies: %w", err)
		}
		var differ []string
		for i, k := range b.heldKeys {
			if row, ok := copies[k]; ok && row == b.heldRows[i] {
				b.recovered++
			} else {
				differ = append(differ, k)
			}
		}
		if len(differ) > 0 {
			return batchResult{}, &ArchiveDiffersError{Archive: pr.p.ArchiveTo, Table: pr.p.Table, Key: pr.healKey, Values: differ}
		}
	}
	if b.archived+b.recovered != b.n {
		return batchResult{}, &ArchiveShortError{Archive: pr.p.ArchiveTo, Deleted: b.n, Archived: b.archived}
	}
	return b, nil
}
