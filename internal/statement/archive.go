package statement

import (
	"strings"

	"github.com/sweeprail/sweeprail/internal/policy"
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
// their order, read from the catalog at the start of each run (ReadColumns), and checked
// against the archive by the policy check (check.Policy: every one exists in the archive by name
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
// 23505) instead of keeping it, and the batch heals (BuildHeal, package sweep's archiveproof.go):
// run again skipping the rows the archive holds, which are compared with its copies. Batches of an
// archiving pass commit synchronously: with synchronous_commit off, a crash could lose a local
// commit after the remote one was durable, undoing the delete of rows the archive keeps.

// Archive is the statements of an archiving pass for one run: they name the swept table's
// columns as the run read them.
type Archive struct {
	// Unlocked and Locked are Set's, moving the rows; Single is Set.Single, moving them.
	Unlocked, Locked Batch
	Single           Form
	// Count is set for a foreign archive keyed like the swept table (BuildForeignArchive): its
	// batches answer the keys they deleted rather than RETURNING the archived rows, and Count
	// asks the archive how many rows of those keys it holds.
	Count Form
}

// archiveForm is what pass p's archiving templates read, for an age column of kind k: the
// insert of the swept table's columns, and key, of SQL type keyType, where they name it.
func archiveForm(p policy.Pass, k Kind, columns []string, key, keyType string) form {
	f := form{pass: newPass(p, k), Archive: QuoteName(p.ArchiveTo), Columns: ColumnList("", columns),
		Rows: "SELECT deleted.* FROM deleted", KeyType: keyType}
	if key != "" {
		f.Key = ident(key)
	}
	return f
}

// archiveBatches renders the batches, both lock forms, and the single statement of an
// archiving pass with the templates batch and single, answering a (Newest for the batches).
func archiveBatches(p policy.Pass, f form, batch, single string, a Answer) (unlocked, locked Batch, one Form) {
	capped := p.MaxRows > 0
	b := a
	b.Newest = true
	return batches(f, capped, false, batch, b, false), batches(f, capped, true, batch, b, false), build(single, f, a, Cutoff)
}

// BuildArchive renders the statements that move pass p's rows to its archive_to, for an age
// column of kind k; columns are the swept table's, in order.
func BuildArchive(p policy.Pass, k Kind, columns []string) Archive {
	var a Archive
	a.Unlocked, a.Locked, a.Single = archiveBatches(p, archiveForm(p, k, columns, "", ""),
		"archive-batch", "archive-single", Answer{Row: true, Archived: true})
	return a
}

// BuildForeignArchive renders the statements that move pass p's rows to a foreign archive_to,
// as BuildArchive, proven by Count instead of RETURNING: postgres_fdw sends an INSERT with
// RETURNING a row at a time, and one without in its batches. key is the swept table's primary
// key of one column, of SQL type keyType, which the archive holds as its key.
func BuildForeignArchive(p policy.Pass, k Kind, columns []string, key, keyType string) Archive {
	f := archiveForm(p, k, columns, key, keyType)
	var a Archive
	a.Unlocked, a.Locked, a.Single = archiveBatches(p, f, "archive-keyed-batch", "archive-keyed-single", Answer{Row: true, Keys: true})
	a.Count = build("archive-count", f, Answer{}, DeletedKeys)
	return a
}

// Heal is the statements of an archiving pass that heal a foreign archive's crash window: the
// batches again, skipping the rows the archive holds already and answering them, and the read
// of the archive's copies to compare them with.
type Heal struct {
	Unlocked, Locked Batch
	Single           Form
	// Held reads the archive's copies of some keys, each as its key and its row as text.
	Held Form
}

// BuildHeal renders pass p's healing statements, as BuildArchive, for a swept table whose
// primary key is the one column key, of SQL type keyType.
func BuildHeal(p policy.Pass, k Kind, columns []string, key, keyType string) Heal {
	f := archiveForm(p, k, columns, key, keyType)
	var h Heal
	h.Unlocked, h.Locked, h.Single = archiveBatches(p, f, "archive-heal-batch", "archive-heal-single",
		Answer{Row: true, Archived: true, Held: true})
	g := f
	g.Columns = ColumnList("a", columns)
	h.Held = build("archive-held", g, Answer{}, HeldKeys)
	return h
}

// ArchiveInsert is an INSERT into archive of rows, a query answering the named columns in order.
func ArchiveInsert(archive string, columns []string, rows string) string {
	return render("archive-insert", form{Archive: QuoteName(archive), Columns: ColumnList("", columns), Rows: rows})
}

// ColumnList quotes columns, each qualified by alias when it is not "", and joins them.
func ColumnList(alias string, columns []string) string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = ident(c)
		if alias != "" {
			names[i] = alias + "." + names[i]
		}
	}
	return strings.Join(names, ", ")
}
