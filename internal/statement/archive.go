package statement

import (
	"strings"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// archive_to: each batch moves its rows to another table in the statement that deletes them,
//
//	WITH deleted AS (DELETE FROM <table> AS t WHERE … RETURNING t.*),
//	     archived AS (INSERT INTO <archive> (c1, …, cn) OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted)
//	SELECT count(*), max(deleted.<age>), <keys deleted>, <md5 of each deleted row's text> FROM deleted
//
// so a row is deleted exactly when it is archived. The INSERT names the swept table's columns as
// the run read them (ReadColumns) and takes deleted.*: a column added or dropped since makes the
// two lists differ in length, and the server refuses the statement before anything is deleted.
// Proof, the batch's next statement, reads the keys back and compares the digests (package
// sweep, archiveproof.go); BuildHeal's statements heal a foreign archive's crash window.

// Archive is the statements of an archiving pass for one run: they name the swept table's
// columns as the run read them.
type Archive struct {
	// Unlocked and Locked are Set's, moving the rows; Single is Set.Single, moving them. Each
	// answers the keys it deleted and the digest of each deleted row.
	Unlocked, Locked Batch
	Single           Form
	// Proof reads the archive's rows of the keys deleted and answers the keys it lacks and
	// those whose row differs from the deleted one's digest.
	Proof Form
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
// column of kind k; columns are the swept table's, in order, and key its primary key of one
// column, of SQL type keyType, by which the proof reads the archive.
func BuildArchive(p policy.Pass, k Kind, columns []string, key, keyType string) Archive {
	f := archiveForm(p, k, columns, key, keyType)
	var a Archive
	a.Unlocked, a.Locked, a.Single = archiveBatches(p, f, "archive-batch", "archive-single", Answer{Row: true, Digests: true})
	g := f
	g.Columns = ColumnList("a", columns)
	a.Proof = build("archive-proof", g, Answer{}, DeletedKeys, Digests)
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
		Answer{Row: true, Archived: true, Held: true, Digests: true})
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
