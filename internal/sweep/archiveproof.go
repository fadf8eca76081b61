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

// The answer's error codes for a batch whose archive does not hold its rows as they left: some
// missing after the batch's statement (short), some held under their key with other values
// (altered), rows of the same key that differ from the swept ones met by a healing batch
// (differs), all rolled back; and rows a foreign archive lost after the batch committed (lost),
// which halts the sweep.
const (
	ArchiveShortCode   = "archive-short"
	ArchiveAlteredCode = "archive-altered"
	ArchiveDiffersCode = "archive-differs"
	ArchiveLostCode    = "archive-lost"
)

// sqlstateUniqueViolation is what an archive raises for a key it holds already.
const sqlstateUniqueViolation = "23505"

// maxKeysNamed bounds the keys an error names; the rest are counted.
const maxKeysNamed = 20

// namedKeys writes keys as a unique violation does (Key (id)=(42)), at most maxKeysNamed of them.
func namedKeys(key string, keys []string) string {
	var parts []string
	for i, k := range keys {
		if i == maxKeysNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(keys)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("Key (%s)=(%s)", key, k))
	}
	return strings.Join(parts, ", ")
}

// ArchiveShortError is a batch whose archive, read back after the batch's statement, lacks rows
// the batch deleted (Missing, by key): a trigger that returns NULL or deletes them after the
// insert, a rule that sends them elsewhere, a remote side that discards them. The batch is
// rolled back, so no row is deleted that the archive did not take.
type ArchiveShortError struct {
	Archive, Key string
	Deleted      int64
	Missing      []string
}

func (e *ArchiveShortError) Error() string {
	return fmt.Sprintf("archive %q took %d of the %d rows the batch deleted: rolled back, nothing deleted; missing after the batch's statement: %s; a trigger or rule on the archive (or on its remote table) removes or diverts rows: `api policy check` lists them",
		e.Archive, e.Deleted-int64(len(e.Missing)), e.Deleted, namedKeys(e.Key, e.Missing))
}

// ArchiveAlteredError is a batch whose archive holds rows under the deleted keys (Keys) whose
// values are not the deleted rows': a BEFORE trigger rewrote them, or a column of the archive
// of another type than the swept one's changed them on the way. The batch is rolled back.
type ArchiveAlteredError struct {
	Archive, Table, Key string
	Keys                []string
}

func (e *ArchiveAlteredError) Error() string {
	return fmt.Sprintf("archive %q holds rows of %q other than the batch deleted them: %s; rolled back, nothing deleted; a trigger on the archive rewrites rows, or a column of it is of another type than the swept table's: `api policy check` names it",
		e.Archive, e.Table, namedKeys(e.Key, e.Keys))
}

// ArchiveDiffersError is a healing batch that met rows the archive holds under the same key but
// with other values (Values): which copy is right is not sweeprail's to guess, so the batch rolls
// back and the run stops, naming the keys, until an operator removes one of the two. Missing are
// rows the archive skipped with no copy under their key: a clash on another of its unique
// indexes, with a row of another key.
type ArchiveDiffersError struct {
	Archive, Table, Key string
	Values, Missing     []string
}

func (e *ArchiveDiffersError) Error() string {
	var parts []string
	if len(e.Values) > 0 {
		parts = append(parts, fmt.Sprintf("archive %q holds rows of %q under the same key as rows the batch would archive, with other values: %s",
			e.Archive, e.Table, e.keys(e.Values)))
	}
	if len(e.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("archive %q refused rows of %q that it holds no copy of, on another of its unique indexes: %s",
			e.Archive, e.Table, e.keys(e.Missing)))
	}
	return strings.Join(parts, "; ") + "; rolled back, nothing deleted: compare the archive's rows with the swept ones, and delete the one you do not keep"
}

func (e *ArchiveDiffersError) keys(values []string) string {
	keys := make([]string, len(values))
	for i, v := range values {
		keys[i] = fmt.Sprintf("Key (%s)=(%s)", e.Key, v)
	}
	return strings.Join(keys, ", ")
}

// A foreign archive's crash window: should the API's database crash between the archive's
// commit and its own (postgres_fdw has no two-phase commit), the next batch meeting those rows
// fails with 23505 on the archive's key. It then runs once more, healing: the insert skips the
// rows the archive holds, and they are compared whole with its copies before the commit.

// healed runs the batch once more, healing, when err is the archive refusing a key it holds
// already; otherwise (or for a nil archiver) it returns err.
func (a *archiver) healed(err error, again func() error) error {
	var pgErr *pgconn.PgError
	if err == nil || a == nil || a.healing || !errors.As(err, &pgErr) || pgErr.Code != sqlstateUniqueViolation {
		return err
	}
	a.log.Info("sweep batch met rows its archive holds already: healing", "pass", a.p.Name, "archive", a.p.ArchiveTo, "err", err)
	a.healing = true
	defer func() { a.healing = false }()
	return again()
}

// prove returns b, or the error that rolls it back: an archiving batch must have moved every row
// it deleted, to the archive now or (healing) in a commit before, identical. It reads the
// archive in a statement after the batch's own, so that the insert's AFTER triggers have run
// (they fire as the statement that queued them ends); what fires later still, deferrable
// constraint triggers, is refused before the run (refuseLateActors). A nil archiver proves
// nothing.
func (a *archiver) prove(ctx context.Context, tx pgx.Tx, b batchResult) (batchResult, error) {
	if a == nil {
		return b, nil
	}
	if a.healing && len(b.heldKeys) > 0 {
		if err := a.recover(ctx, tx, &b); err != nil {
			return batchResult{}, err
		}
	}
	missing, altered, err := a.readArchive(ctx, tx, b)
	if err != nil {
		return batchResult{}, err
	}
	switch {
	case len(missing) > 0:
		return batchResult{}, &ArchiveShortError{Archive: a.p.ArchiveTo, Key: a.key, Deleted: b.n, Missing: missing}
	case len(altered) > 0:
		return batchResult{}, &ArchiveAlteredError{Archive: a.p.ArchiveTo, Table: a.p.Table, Key: a.key, Keys: altered}
	}
	return b, nil
}

// querier is a transaction or a connection: what the archive proof reads through.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readArchive runs the archive proof for batch b's keys and digests: the keys the archive lacks,
// and those it holds with other values. A batch that answers a count other than its keys' is
// refused whole, as missing them all.
func (a *archiver) readArchive(ctx context.Context, db querier, b batchResult) (missing, altered []string, err error) {
	if int64(len(b.keys)) != b.n || len(b.digests) != len(b.keys) {
		return nil, nil, fmt.Errorf("prove the archive: the batch answered %d keys and %d digests for %d rows", len(b.keys), len(b.digests), b.n)
	}
	if b.n == 0 {
		return nil, nil, nil
	}
	proof := a.move.Proof
	args := proof.Params.Bind(statement.Args{Keys: b.keys, Digests: b.digests})
	if err := db.QueryRow(ctx, proof.SQL, args...).Scan(&missing, &altered); err != nil {
		return nil, nil, fmt.Errorf("read the batch's rows back from the archive: %w", err)
	}
	return missing, altered, nil
}

// recover compares the rows a healing batch found in the archive with the archive's copies:
// identical ones count as recovered; one that differs, or that has no copy under its key, is an
// ArchiveDiffersError.
func (a *archiver) recover(ctx context.Context, tx pgx.Tx, b *batchResult) error {
	copies := map[string]string{}
	held := a.heal.Held
	rows, err := tx.Query(ctx, held.SQL, held.Params.Bind(statement.Args{Keys: b.heldKeys})...)
	if err != nil {
		return fmt.Errorf("read the archive's copies: %w", err)
	}
	for rows.Next() {
		var k, row string
		if err := rows.Scan(&k, &row); err != nil {
			rows.Close()
			return fmt.Errorf("read the archive's copies: %w", err)
		}
		copies[k] = row
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the archive's copies: %w", err)
	}
	var differ, missing []string
	for i, k := range b.heldKeys {
		switch row, ok := copies[k]; {
		case !ok:
			missing = append(missing, k)
		case row == b.heldRows[i]:
			b.recovered++
		default:
			differ = append(differ, k)
		}
	}
	if len(differ) > 0 || len(missing) > 0 {
		return &ArchiveDiffersError{Archive: a.p.ArchiveTo, Table: a.p.Table, Key: a.key, Values: differ, Missing: missing}
	}
	return nil
}
