// Package policy owns what a retention policy says: the sweeps and passes, the YAML loader that
// reads them with a line for every message, the rules a pass must keep without a database, the
// lexer of where conditions, and the bundled catalog. It knows nothing of SQL beyond the shape
// of a condition; the statements are package statement's, the live-schema check package
// check's, and running them package sweep's.
package policy

import (
	"cmp"
	"strings"
	"time"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// Mode says how a pass deletes its eligible rows.
type Mode string

// The pass modes of docs/DESIGN.md.
const (
	// ModeBatched deletes in short transactions of at most a batch of rows each.
	ModeBatched Mode = "batched"
	// ModeSingle deletes every eligible row in one predicated statement, for small, race-sensitive sets.
	ModeSingle Mode = "single"
	// ModePerRow calls a SQL function once per eligible key, each call in its own transaction.
	ModePerRow Mode = "per-row"
	// ModePartitions detaches and drops every partition of a range-partitioned table whose upper
	// bound is at or before the cutoff, then deletes the boundary rows in batches.
	ModePartitions Mode = "partitions"
)

// The boundary choices of a partitions-mode pass.
const (
	// BoundaryDelete deletes, in batches, the rows past the cutoff in the partition that
	// straddles it and in a default partition (the default).
	BoundaryDelete = "delete"
	// BoundaryKeep leaves them for the day their partition expires whole.
	BoundaryKeep = "keep"
)

// Spec is one sweep: a name, served as POST /internal/sweep-<name>, and its passes, run in order.
type Spec struct {
	Name   string `json:"name"`
	Passes []Pass `json:"passes"`
}

// Guard keeps a row while another table still references it:
// NOT EXISTS (SELECT 1 FROM <Table> AS g WHERE (g.<Columns>) = (t.<References>) [AND (<Where>)]).
type Guard struct {
	Table string `json:"table"`
	// Columns are the guard table's columns; References the swept table's columns they hold,
	// pairwise, in the same order: ["id"] when empty.
	Columns    []string `json:"columns"`
	References []string `json:"references"`
	// Where narrows the referencing rows that keep a row (g.state = 'reserved'): SQL over alias g
	// (and t, the swept row), checked as a pass's Where is. Empty: any reference keeps it.
	Where string `json:"where,omitempty"`
	// WithoutForeignKey declares the relation where no foreign key says it (the check then asks
	// that the swept table's References be unique).
	WithoutForeignKey bool `json:"withoutForeignKey,omitempty"`
}

// Child is a table whose rows go with their parent: the rows whose Columns hold a deleted row's
// References are deleted in the same statement as it (delete_with), so that a foreign key without
// ON DELETE CASCADE never fails the batch and no parent is ever gone without its children, nor
// the other way round.
type Child struct {
	Table string `json:"table"`
	// Columns are the child's columns; References the swept table's columns they hold,
	// pairwise, in the same order: ["id"] when empty.
	Columns    []string `json:"columns"`
	References []string `json:"references"`
	// WithoutForeignKey declares the relation where no foreign key says it, as Guard's.
	WithoutForeignKey bool `json:"withoutForeignKey,omitempty"`
}

// Refs returns the swept table's columns a guard's or child's columns hold: refs, or ["id"].
func Refs(refs []string) []string {
	if len(refs) == 0 {
		return []string{"id"}
	}
	return refs
}

// Pass is one predicate over one table. A row is eligible when Where holds, the age column is
// older than the cutoff (the database clock at run start minus Retention), and no Guard references it.
type Pass struct {
	Name      string `json:"pass"`
	Table     string `json:"table"`
	AgeColumn string `json:"ageColumn"`
	// AgeUnit says the age column is a number of Unix time in this unit (AgeSeconds,
	// AgeMilliseconds, AgeMicroseconds): "" for a date or timestamp column.
	AgeUnit   string        `json:"ageUnit,omitempty"`
	Retention time.Duration `json:"-"`
	// MinRetention, when > 0, is the shortest retention the pass may ever be given: the policy's
	// own floor (a compliance table's year), which an override such as SWEEP_RETENTION cannot
	// go below.
	MinRetention time.Duration `json:"-"`
	// Expiry says the age column holds when the row expires rather than when it was made: the
	// retention is then the grace after it, and may be zero.
	Expiry bool `json:"expiry,omitempty"`
	// TimeZone is the zone whose calendar and wall clock a date or timestamp-without-time-zone age
	// column is read in: TimeZoneUTC (the default), TimeZoneDatabase (the session's TimeZone) or
	// an IANA name. It does not apply to a timestamptz column. See cutoff.go.
	TimeZone string `json:"timeZone,omitempty"`
	// Where is an extra SQL condition over the table's columns (unqualified, or qualified as t.col).
	Where  string  `json:"where,omitempty"`
	Guards []Guard `json:"guards,omitempty"`
	// DeleteWith are the children deleted in the same statement as each batch of rows.
	DeleteWith []Child `json:"deleteWith,omitempty"`
	// Cascades names the tables the pass's deletes change through the schema's own ON DELETE
	// CASCADE, SET NULL and SET DEFAULT keys (cascades): the policy check refuses a pass whose
	// deletes reach a table it does not name, and runs count what each one lost.
	Cascades []string `json:"cascades,omitempty"`
	// Mode is how the pass deletes; empty means ModeBatched (normalized once, by normalize).
	Mode Mode `json:"mode"`
	// Function is called with the key of each eligible row in per-row mode.
	Function string `json:"function,omitempty"`
	// KeyColumn is the per-row key handed to Function; "id" when empty.
	KeyColumn string `json:"keyColumn,omitempty"`
	// BatchSize and MaxBatches override the runner's settings for this pass when > 0.
	BatchSize  int `json:"batchSize,omitempty"`
	MaxBatches int `json:"maxBatches,omitempty"`
	// MaxRows caps the rows one run deletes from the table when > 0 (batched mode): the last batch
	// shrinks to what is left of it, whatever size adaptive sizing has reached.
	MaxRows int `json:"maxRows,omitempty"`
	// AllowUnindexed accepts a pass whose batch select no index can serve (a small table); the
	// policy check refuses such a pass otherwise, since each batch would scan the whole table.
	AllowUnindexed bool `json:"allowUnindexed,omitempty"`
	// AllowShortRetention lowers the retention floor from MinRetention to MinShortRetention, for
	// tables whose rows are finished within minutes (job queues keep completed jobs for a minute).
	AllowShortRetention bool `json:"allowShortRetention,omitempty"`
	// KeepDetached, in partitions mode, detaches expired partitions without dropping them.
	KeepDetached bool `json:"keepDetached,omitempty"`
	// ArchiveSchema, in partitions mode, moves each expired partition, detached, into this schema
	// instead of dropping it (archive_schema).
	ArchiveSchema string `json:"archiveSchema,omitempty"`
	// Boundary, in partitions mode, is BoundaryDelete (when empty) or BoundaryKeep.
	Boundary string `json:"boundary,omitempty"`
	// ArchiveTo, when set, is the table (or postgres_fdw foreign table) that each batch moves its
	// rows to, in the statement that deletes them (archive.go); batched and single passes only.
	ArchiveTo string `json:"archiveTo,omitempty"`
}

// CatalogPass is p as the catalog answer and `api policy check` show it: every field of its
// policy, so that a field added to Pass shows up in both at once.
func CatalogPass(p Pass) wire.CatalogPass {
	out := wire.CatalogPass{
		Pass: p.Name, Table: p.Table, Mode: string(cmp.Or(p.Mode, ModeBatched)), AgeColumn: p.AgeColumn, AgeUnit: p.AgeUnit,
		Retention: p.Retention.String(), RetentionSeconds: int64(p.Retention / time.Second), MinRetentionSeconds: int64(p.MinRetention / time.Second),
		Expiry: p.Expiry, TimeZone: cmp.Or(p.TimeZone, TimeZoneUTC),
		Where: p.Where, Guards: []wire.CatalogGuard{}, DeleteWith: []wire.CatalogChild{}, Function: p.Function, KeyColumn: p.KeyColumn,
		BatchSize: p.BatchSize, MaxBatches: p.MaxBatches, MaxRows: p.MaxRows, AllowUnindexed: p.AllowUnindexed,
		AllowShortRetention: p.AllowShortRetention, KeepDetached: p.KeepDetached, Boundary: p.Boundary,
		ArchiveSchema: p.ArchiveSchema,
		ArchiveTo:     p.ArchiveTo,
		Cascades:      append([]string{}, p.Cascades...),
	}
	for _, g := range p.Guards {
		out.Guards = append(out.Guards, wire.CatalogGuard{Table: g.Table, Column: strings.Join(g.Columns, ", "), References: strings.Join(Refs(g.References), ", "),
			Columns: append([]string{}, g.Columns...), ReferencesColumns: append([]string{}, Refs(g.References)...), Where: g.Where, WithoutForeignKey: g.WithoutForeignKey})
	}
	for _, c := range p.DeleteWith {
		out.DeleteWith = append(out.DeleteWith, wire.CatalogChild{Table: c.Table, Column: strings.Join(c.Columns, ", "), References: strings.Join(Refs(c.References), ", "),
			Columns: append([]string{}, c.Columns...), ReferencesColumns: append([]string{}, Refs(c.References)...), WithoutForeignKey: c.WithoutForeignKey})
	}
	return out
}
