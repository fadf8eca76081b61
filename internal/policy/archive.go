package policy

import "fmt"

// checkArchiveTo holds validatePass's rules for archive_to (mode is the pass's, defaulted).
func checkArchiveTo(p Pass, mode Mode) []string {
	var out []string
	if err := checkRelationName(p.ArchiveTo); err != nil {
		out = append(out, fmt.Sprintf("archive_to %q: %v", p.ArchiveTo, err))
	}
	switch mode {
	case ModePerRow:
		out = append(out, "archive_to is for modes batched and single: in mode per-row the function deletes, so archive the row in the function (INSERT … before its DELETE)")
	case ModePartitions:
		// Only the boundary's batches would archive: the rows of a dropped partition would not be.
		out = append(out, "archive_to is for modes batched and single: in mode partitions a dropped partition's rows would not be archived; keep_detached: true keeps expired partitions as tables instead")
	}
	if p.ArchiveTo == p.Table {
		out = append(out, fmt.Sprintf("archive_to %q is the swept table itself: name another table", p.ArchiveTo))
	}
	return out
}
