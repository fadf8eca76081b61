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
	if err == nil || a == nil || a.heal == nil || a.healing || !errors.As(err, &pgErr) || pgErr.Code != sqlstateUniqueViolation {
		return err
	}
	a.log.Info("sweep batch met rows its archive holds already: healing", "pass", a.p.Name, "archive", a.p.ArchiveTo, "err", err)
	a.healing = true
	defer func() { a.healing = false }()
	return again()
}

// prove returns b, or the error that rolls it back: an archiving batch must have moved every row
// it deleted, to the archive now or (healing) in a commit before, identical. A nil archiver
// proves nothing.
func (a *archiver) prove(ctx context.Context, tx pgx.Tx, b batchResult) (batchResult, error) {
	if a == nil {
		return b, nil
	}
	if a.move.Count.SQL != "" && !a.healing && len(b.keys) > 0 {
		// The foreign archive's own count of the keys deleted, in this transaction's remote one.
		count := a.move.Count
		if err := tx.QueryRow(ctx, count.SQL, count.Params.Bind(statement.Args{Keys: b.keys})...).Scan(&b.archived); err != nil {
			return batchResult{}, fmt.Errorf("count the rows the archive took: %w", err)
		}
	}
	if a.healing && len(b.heldKeys) > 0 {
		if err := a.recover(ctx, tx, &b); err != nil {
			return batchResult{}, err
		}
	}
	if b.archived+b.recovered != b.n {
		return batchResult{}, &ArchiveShortError{Archive: a.p.ArchiveTo, Deleted: b.n, Archived: b.archived}
	}
	return b, nil
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
