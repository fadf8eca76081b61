package sweep

import "fmt"

// ArchiveShortCode is the answer's error code for a batch whose archive took fewer rows than it
// deleted.
const ArchiveShortCode = "archive-short"

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

// proveArchive refuses a batch of an archiving pass unless its archive took every row it
// deleted, as the archive insert's RETURNING counted them in the same statement. The error
// rolls the batch back (inTx commits only when the batch returns none).
func (pr *passRun) proveArchive(b batchResult) error {
	if pr.arch == nil || b.archived == b.n {
		return nil
	}
	return &ArchiveShortError{Archive: pr.p.ArchiveTo, Deleted: b.n, Archived: b.archived}
}
