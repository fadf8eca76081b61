// Package wire is the JSON contract between the API and its callers: the answer of a sweep route
// and of its dry run, the stop reasons and their order, the catalog of GET /internal/sweeps with
// its bounds, and the range of a request's batchSize; and the retention verdict judged from a
// sweep's run history (verdict.go), which the API, its status page and sweepcron all show. The API
// encodes these types and sweepcron decodes them, so the two cannot drift apart.
//
// It imports nothing but the standard library: sweepcron links it, and must not link the engine
// (pgx). docs/DESIGN.md describes every field.
package wire

import (
	"slices"
	"time"
)

// Routes of the signed rail.
const (
	// SweepRoutePrefix prefixes a sweep's name in its route: POST /internal/sweep-<name>.
	SweepRoutePrefix = "/internal/sweep-"
	// CatalogRoute lists the sweeps and the server's bounds.
	CatalogRoute = "/internal/sweeps"
)

// The range of a request's batchSize. A pass's batch_size in a policy obeys the same range.
const (
	MinRequestBatchSize = 1
	MaxRequestBatchSize = 50000
)

// StopReason names why a pass or a run stopped.
type StopReason string

// The stop reasons, from least to most severe (lease-held stands apart: a run that found the
// lease held ran no pass).
const (
	StopExhausted StopReason = "exhausted"
	StopBatchCap  StopReason = "batch-cap"
	StopBudget    StopReason = "budget"
	// StopCriticalLoad is a run that met more other active sessions than
	// MAX_ACTIVE_SESSIONS_CRITICAL allows, and stopped rather than add to them.
	StopCriticalLoad StopReason = "critical-load"
	StopShutdown     StopReason = "shutdown"
	// StopSchemaChanged: the catalog facts the pass was proven under changed, and its check
	// refuses the live schema; the pass deleted nothing.
	StopSchemaChanged StopReason = "schema-changed"
	StopBatchError    StopReason = "batch-error"
	StopLeaseHeld     StopReason = "lease-held"
)

// stopOrder is every stop reason, least severe first.
var stopOrder = []StopReason{StopExhausted, StopBatchCap, StopBudget, StopCriticalLoad, StopShutdown, StopSchemaChanged, StopBatchError, StopLeaseHeld}

// StopReasons returns every stop reason, least severe first.
func StopReasons() []StopReason { return slices.Clone(stopOrder) }

// Known reports whether s is a stop reason of the contract.
func (s StopReason) Known() bool { return slices.Contains(stopOrder, s) }

// Severity orders the stop reasons of passes: a run's stopReason is the most severe of its
// passes'. It is -1 for an unknown reason.
func (s StopReason) Severity() int { return slices.Index(stopOrder, s) }

// Truncates reports whether a pass or run that stopped for s left a backlog for the next tick.
func (s StopReason) Truncates() bool {
	return s == StopBudget || s == StopBatchCap || s == StopShutdown || s == StopCriticalLoad
}

// Fails reports whether a pass or run that stopped for s needs an operator: a batch failed, or
// the check refuses a schema that changed since the pass was proven.
func (s StopReason) Fails() bool { return s == StopBatchError || s == StopSchemaChanged }

// OutcomeSkipped is the runs metric's outcome for a run that found its lease held.
const OutcomeSkipped = "skipped"

// Outcomes lists every value of the runs metric's outcome label: each stop reason a run can end
// with, and "skipped" for a run that found the lease held.
func Outcomes() []string {
	return []string{
		string(StopExhausted), string(StopBatchCap), string(StopBudget), string(StopCriticalLoad),
		string(StopShutdown), string(StopSchemaChanged), string(StopBatchError), OutcomeSkipped,
	}
}

// ErrorInfo describes the failure that stopped a pass with batch-error or schema-changed.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Pass    string `json:"pass"`
}

// PassResult is what one pass did in one run.
type PassResult struct {
	Pass string `json:"pass"`
	// Deleted counts the rows of the pass's own table; the children deleted with them are in
	// Children. A per-row pass deletes nothing itself: its function's work is in Processed.
	Deleted int64 `json:"deleted"`
	// Processed counts the keys a per-row pass handed to its function that did the work (the
	// calls that did not answer false); absent for the other modes.
	Processed int64 `json:"processed,omitempty"`
	// Cutoff is the instant the pass's rows were compared with: the run's reference time minus
	// the retention, in UTC. CutoffEpoch is the same cutoff as an age column of Unix time
	// compares with it, in AgeUnit (whole units, rounded down); both absent for a time column.
	Cutoff      time.Time `json:"cutoff"`
	CutoffEpoch *int64    `json:"cutoffEpoch,omitempty"`
	AgeUnit     string    `json:"ageUnit,omitempty"`
	// DurationMs is the pass's own time, from its start to its answer.
	DurationMs int64 `json:"durationMs"`
	// Archived is the rows moved to the pass's archive_to table, in the statements that deleted
	// them: equal to Deleted for a pass that archives, 0 for one that does not.
	Archived int64 `json:"archived"`
	// Recovered is the rows a run found in the archive already, identical, and deleted from the
	// swept table: a foreign archive's crash window between the two commits, healed.
	Recovered  int64      `json:"recovered,omitempty"`
	BatchCount int        `json:"batchCount"`
	StopReason StopReason `json:"stopReason"`
	// PartitionsDropped is what a partitions-mode pass dropped (or detached, with keep_detached);
	// Deleted counts only the boundary rows its batches deleted.
	PartitionsDropped int64 `json:"partitionsDropped,omitempty"`
	// ThrottledMs is the time the pass spent waiting between batches on its budgets: standbys
	// to catch up (MAX_REPLICA_LAG), the WAL rate (MAX_WAL_RATE), other sessions
	// (MAX_ACTIVE_SESSIONS). ThrottledBy splits it by cause; absent when nothing waited.
	ThrottledMs int64            `json:"throttledMs"`
	ThrottledBy map[string]int64 `json:"throttledBy,omitempty"`
	// Children are the rows of each delete_with table deleted with the pass's rows, in policy
	// order; absent for a pass without delete_with.
	Children []ChildRows `json:"children,omitempty"`
	// Cascades are the rows each table of the pass's cascades lost to the schema's ON DELETE
	// keys, in policy order, measured in each batch's own transaction; absent for a pass
	// without cascades.
	Cascades []CascadeRows `json:"cascades,omitempty"`
	// Path is how the pass reached its rows: "heap" (block ranges in heap order) or "index" (the
	// keyset on the age index) for a batched pass, chosen per run; else its mode ("single",
	// "per-row", "partitions").
	Path string `json:"path"`
	// LockRetries counts the batches that met a row another transaction held and were run again
	// skipping held rows (FOR UPDATE SKIP LOCKED); those rows wait for the next run.
	LockRetries int `json:"lockRetries,omitempty"`
	// Lag is the pass's retention lag at the end of the run; nil when the run ended before it.
	Lag *Lag `json:"lag,omitempty"`
	// LostCommit is the batch whose COMMIT's reply never came back, which ended the pass: whether
	// it committed (and its rows are counted above), rolled back, or is unknown because the
	// database could not be asked; absent when every reply came back.
	LostCommit *LostCommit `json:"lostCommit,omitempty"`
	// SchemaChanged is, for a pass stopped by schema-changed, what changed and why the check
	// refuses it now; absent otherwise.
	SchemaChanged *SchemaChange `json:"schemaChanged,omitempty"`
}

// SchemaChange is a change to the catalog facts a pass was proven under that its check, run
// again, refuses.
type SchemaChange struct {
	// Changed are the facts that changed, each "added: …" or "removed: …".
	Changed []string `json:"changed"`
	// Refusal is the check's refusal of the live schema, which says how to fix the policy.
	Refusal string `json:"refusal"`
}

// LostCommit is one batch whose COMMIT's reply was lost: the connection died after the batch
// asked to commit. Its rows are the rows it deleted, or for a per-row pass the keys it processed,
// counted in the pass only when Outcome is committed.
type LostCommit struct {
	// Batch is the batch's number in its pass, from 1.
	Batch   int          `json:"batch"`
	Rows    int64        `json:"rows"`
	Outcome BatchOutcome `json:"outcome"`
}

// BatchOutcome is what became of a batch whose COMMIT's reply was lost.
type BatchOutcome string

const (
	// BatchCommitted: the batch's record is in the database; its rows are counted.
	BatchCommitted BatchOutcome = "committed"
	// BatchRolledBack: the batch's record is not, and never will be; nothing of it happened.
	BatchRolledBack BatchOutcome = "rolled-back"
	// BatchUnknown: the database could not be asked. The next run of the sweep settles it in the
	// run history, which then counts its rows or not.
	BatchUnknown BatchOutcome = "unknown"
)

// ChildRows counts the rows of one delete_with child table: deleted with their parents in a run,
// or that would be in a dry run.
type ChildRows struct {
	Table  string `json:"table"`
	Column string `json:"column"`
	Rows   int64  `json:"rows"`
}

// CascadeRows counts what the schema's ON DELETE keys did to one table of a pass's cascades:
// the rows they deleted (CASCADE) and the rows they changed (SET NULL, SET DEFAULT), in a run,
// or that they would in a dry run.
type CascadeRows struct {
	Table   string `json:"table"`
	Deleted int64  `json:"deleted"`
	Updated int64  `json:"updated"`
}

// Result is the answer of one run of POST /internal/sweep-<name>.
type Result struct {
	Sweep      string `json:"sweep"`
	RunID      string `json:"runId"`
	DryRun     bool   `json:"dryRun"`
	Skipped    bool   `json:"skipped"`
	Deleted    int64  `json:"deleted"`
	Archived   int64  `json:"archived"`
	BatchCount int    `json:"batchCount"`
	DurationMs int64  `json:"durationMs"`
	// Processed sums the per-row passes' Processed (absent when zero).
	Processed int64 `json:"processed,omitempty"`
	// ReferenceTime is the instant the run's cutoffs count back from (the database's clock when
	// the run took its lease), in UTC; null for a run that found the lease held.
	ReferenceTime *time.Time   `json:"referenceTime"`
	Truncated     bool         `json:"truncated"`
	StopReason    StopReason   `json:"stopReason"`
	Passes        []PassResult `json:"passes"`
	Error         *ErrorInfo   `json:"error"`
	// PartitionsDropped sums the passes' (partitions mode only; absent when zero).
	PartitionsDropped int64 `json:"partitionsDropped,omitempty"`
	// ThrottledMs sums the passes' waits on their budgets, ThrottledBy by cause (replica-lag,
	// wal-rate, active-sessions).
	ThrottledMs int64            `json:"throttledMs"`
	ThrottledBy map[string]int64 `json:"throttledBy,omitempty"`
	// HistoryError is why the run's end could not be written to the run history, when it could
	// not: the run itself happened as the rest of the answer says. Absent when it was written.
	HistoryError *ErrorInfo `json:"historyError,omitempty"`
	// TookOverLease is the owner of the lease this run took over before its TTL ended, the
	// holder's session being gone (its process or the server restarted). Absent otherwise.
	TookOverLease string `json:"tookOverLease,omitempty"`
}

// Failed reports whether the run stopped on a failed batch, or on a pass its check now refuses,
// which the API answers with 500: either needs an operator.
func (r *Result) Failed() bool {
	return r.StopReason == StopBatchError || r.StopReason == StopSchemaChanged
}

// DryRunPass is one pass's count in a dry run.
type DryRunPass struct {
	Pass string `json:"pass"`
	// Cutoff, CutoffEpoch and AgeUnit are the cutoff the pass was counted by, as PassResult's.
	Cutoff      time.Time `json:"cutoff"`
	CutoffEpoch *int64    `json:"cutoffEpoch,omitempty"`
	AgeUnit     string    `json:"ageUnit,omitempty"`
	// Eligible is the exact count, nil when counting ran past the count timeout.
	Eligible      *int64 `json:"eligible"`
	Estimate      int64  `json:"estimate"`
	CountTimedOut bool   `json:"countTimedOut"`
	// Indexed reports whether an index can serve the batch select.
	Indexed bool `json:"indexed"`
	// Children are the rows of each delete_with table that would go with the eligible rows, in
	// policy order, counted in the same statement as Eligible; absent for a pass without
	// delete_with, and when the count timed out.
	Children []ChildRows `json:"children,omitempty"`
	// Cascades are what each table of the pass's cascades would lose, in policy order, counted
	// in the same statement as Eligible; absent for a pass without cascades, when the count
	// timed out, and when CascadesUncounted.
	Cascades []CascadeRows `json:"cascades,omitempty"`
	// CascadesUncounted says the pass's keys form a cycle (a table's key onto itself), which
	// the dry run's one statement cannot follow: a run still counts what they delete.
	CascadesUncounted bool `json:"cascadesUncounted,omitempty"`
	// Triggers are the user triggers that fire on DELETE on the tables the pass's statement
	// deletes from ("table.trigger (AFTER DELETE, function)"): they run for every row deleted.
	Triggers []string `json:"triggers,omitempty"`
	// Path is the access path a run would take now, as PassResult.Path.
	Path string `json:"path"`
	// Partitions lists, for a partitions-mode pass, the partitions a run would drop; Eligible and
	// Estimate then count the boundary rows the batches would delete.
	Partitions []DryRunPartition `json:"partitions,omitempty"`
}

// DryRunPartition is one partition a partitions-mode run would drop.
type DryRunPartition struct {
	Name string `json:"name"`
	// RowsEstimate is the planner's row count (reltuples); -1 when never analyzed.
	RowsEstimate int64 `json:"rowsEstimate"`
}

// DryRunResult is the answer of a dry run. It has no stopReason: that is how a caller tells it
// from a run's answer.
type DryRunResult struct {
	Sweep  string       `json:"sweep"`
	DryRun bool         `json:"dryRun"`
	Passes []DryRunPass `json:"passes"`
	// ReferenceTime is the instant the cutoffs count back from, as a run's.
	ReferenceTime time.Time `json:"referenceTime"`
	// Counted says how the counts relate to a run: DryRunCounted.
	Counted string `json:"counted"`
}

// DryRunCounted is a dry run's Counted: a run deletes pass by pass, and a dry run deletes nothing,
// so a later pass's count includes rows an earlier pass (or its delete_with) would take first.
const DryRunCounted = "each pass is counted as the tables stand now, before any earlier pass of the sweep runs: " +
	"a row that two passes match is counted by both, and a run deletes it once, in the first"

// History is the answer of GET /internal/runs: runs newest first.
type History struct {
	Runs []HistoryRun `json:"runs"`
	// Unrecorded are the runs whose end the answering process failed to write since it started,
	// newest first: Runs lacks them or shows them unfinished. Empty on a healthy history.
	Unrecorded []Unrecorded `json:"unrecorded"`
}

// Unrecorded is a run whose end could not be written to the history.
type Unrecorded struct {
	RunID string    `json:"runId"`
	Sweep string    `json:"sweep"`
	At    time.Time `json:"at"`
	Error string    `json:"error"`
}

// HistoryRun is one run as the history keeps it. FinishedAt and StopReason are null for a run
// still going, or whose process died before it could write its end; Error is null for a run
// without one.
type HistoryRun struct {
	RunID     string    `json:"runId"`
	Sweep     string    `json:"sweep"`
	StartedAt time.Time `json:"startedAt"`
	// ReferenceTime is the run's, as Result.ReferenceTime; null for a skipped run, and for runs
	// recorded before the history kept it.
	ReferenceTime     *time.Time    `json:"referenceTime"`
	FinishedAt        *time.Time    `json:"finishedAt"`
	StopReason        *StopReason   `json:"stopReason"`
	Truncated         bool          `json:"truncated"`
	Skipped           bool          `json:"skipped"`
	Deleted           int64         `json:"deleted"`
	Archived          int64         `json:"archived"`
	PartitionsDropped int64         `json:"partitionsDropped"`
	ThrottledMs       int64         `json:"throttledMs"`
	Passes            []HistoryPass `json:"passes"`
	Error             *ErrorInfo    `json:"error"`
	RequestID         string        `json:"requestId"`
	// Requests is how many answers the row stands for: 1 for a run; for the lease-held answers,
	// or the runs that found nothing to do, of one sweep in one minute, which share a row, how
	// many there were (RequestID and ReferenceTime are the last one's, RunID the first one's).
	Requests int64 `json:"requests"`
}

// HistoryPass is one pass of a run in the history.
type HistoryPass struct {
	Pass              string     `json:"pass"`
	Deleted           int64      `json:"deleted"`
	Archived          int64      `json:"archived"`
	PartitionsDropped int64      `json:"partitionsDropped"`
	StopReason        StopReason `json:"stopReason"`
	// Path is the access path the pass took, as PassResult.Path; "" in runs recorded before the
	// history kept it.
	Path string `json:"path,omitempty"`
	// Processed, Cutoff, CutoffEpoch, AgeUnit and DurationMs are PassResult's; Cutoff is null in
	// runs recorded before the history kept it.
	Processed   int64      `json:"processed,omitempty"`
	Cutoff      *time.Time `json:"cutoff"`
	CutoffEpoch *int64     `json:"cutoffEpoch,omitempty"`
	AgeUnit     string     `json:"ageUnit,omitempty"`
	DurationMs  int64      `json:"durationMs"`
	// TableRows is the planner's estimate of the rows of the pass's table at the run's end
	// (pg_class.reltuples, summed over the leaf partitions); -1 when it was never analyzed.
	// TableBytes is its total size then: heap, TOAST and indexes (pg_total_relation_size, summed
	// likewise). Both are catalog reads, no scan; null when not measured (a table that was gone,
	// a run recorded before the history kept them).
	TableRows  *int64 `json:"tableRows"`
	TableBytes *int64 `json:"tableBytes"`
	// Recovered is PassResult's: rows found in the archive already, identical, and deleted.
	Recovered int64 `json:"recovered,omitempty"`
	// LostCommit is PassResult's; an unknown outcome is settled by the sweep's next run, which
	// writes the outcome here and counts its rows in Deleted (or Processed).
	LostCommit *LostCommit `json:"lostCommit,omitempty"`
	// Children and Cascades are PassResult's: what went with the pass's rows, per table.
	Children []ChildRows   `json:"children,omitempty"`
	Cascades []CascadeRows `json:"cascades,omitempty"`
	// Lag is PassResult's; nil in runs recorded before the history kept it.
	Lag *Lag `json:"lag,omitempty"`
	// SchemaChanged is PassResult's: what changed, and the check's refusal of it.
	SchemaChanged *SchemaChange `json:"schemaChanged,omitempty"`
}

// The range of GET /internal/runs's limit.
const (
	DefaultHistoryLimit = 20
	MaxHistoryLimit     = 1000
)

// Catalog is the answer of GET /internal/sweeps. The cron client relies on sweeps[].name,
// sweeps[].route and bounds.serverWriteTimeoutMs; the rest is for operators.
type Catalog struct {
	Sweeps []CatalogSweep `json:"sweeps"`
	Bounds Bounds         `json:"bounds"`
}

// CatalogSweep is one sweep of the catalog and the route that runs it.
type CatalogSweep struct {
	Name   string        `json:"name"`
	Route  string        `json:"route"`
	Passes []CatalogPass `json:"passes"`
	// Retention is the sweep's retention verdict, judged from its run history as the request
	// was answered; absent on a server without a history, or when it could not be read.
	Retention *SweepVerdict `json:"retention,omitempty"`
}

// CatalogPass is one pass of a sweep, every field of its policy.
type CatalogPass struct {
	Pass      string `json:"pass"`
	Table     string `json:"table"`
	Mode      string `json:"mode"`
	AgeColumn string `json:"ageColumn"`
	// AgeUnit is the unit of Unix time an integer age column holds (seconds, milliseconds,
	// microseconds); absent for a date or timestamp column.
	AgeUnit string `json:"ageUnit,omitempty"`
	// Retention is a Go duration ("720h0m0s"); RetentionSeconds the same as a number.
	Retention        string `json:"retention"`
	RetentionSeconds int64  `json:"retentionSeconds"`
	// MinRetentionSeconds is the pass's own retention floor (min_retention), 0 when it has none.
	MinRetentionSeconds int64 `json:"minRetentionSeconds,omitempty"`
	// Expiry: the age column holds when a row expires, and the retention is the grace after it.
	Expiry bool `json:"expiry"`
	// TimeZone is the zone a date or timestamp (without time zone) age column is read in: UTC,
	// database or an IANA name.
	TimeZone   string         `json:"timeZone"`
	Where      string         `json:"where"`
	Guards     []CatalogGuard `json:"guards"`
	DeleteWith []CatalogChild `json:"deleteWith"`
	Function   string         `json:"function,omitempty"`
	KeyColumn  string         `json:"keyColumn,omitempty"`
	BatchSize  int            `json:"batchSize,omitempty"`
	MaxBatches int            `json:"maxBatches,omitempty"`
	// MaxRows caps the rows one run deletes in this pass.
	MaxRows        int  `json:"maxRows,omitempty"`
	AllowUnindexed bool `json:"allowUnindexed"`
	// AllowShortRetention: the pass may keep rows for less than an hour (down to a minute).
	AllowShortRetention bool `json:"allowShortRetention"`
	// KeepDetached and Boundary are a partitions-mode pass's choices.
	KeepDetached bool `json:"keepDetached,omitempty"`
	// ArchiveSchema is where a partitions-mode pass moves expired partitions instead of dropping them.
	ArchiveSchema string `json:"archiveSchema,omitempty"`
	Boundary      string `json:"boundary,omitempty"`
	// ArchiveTo is the table each batch's rows are moved to as they are deleted; "" for none.
	ArchiveTo string `json:"archiveTo,omitempty"`
	// Cascades are the tables the pass's deletes change through the schema's ON DELETE keys.
	Cascades []string `json:"cascades"`
}

// CatalogGuard is a keep guard: a row stays while a row of <table> for which <where> holds (any
// row, when where is empty) references its <references> by <column>. Column and References
// join the columns of a key of several with ", "; Columns and ReferencesColumns list them.
type CatalogGuard struct {
	Table             string   `json:"table"`
	Column            string   `json:"column"`
	References        string   `json:"references"`
	Columns           []string `json:"columns"`
	ReferencesColumns []string `json:"referencesColumns"`
	Where             string   `json:"where,omitempty"`
	// WithoutForeignKey: the policy declares the relation, and no foreign key says it.
	WithoutForeignKey bool `json:"withoutForeignKey,omitempty"`
}

// CatalogChild is a delete_with child: the rows of <table> whose <column> holds a deleted row's
// <references> are deleted in the same statement; the columns as CatalogGuard's.
type CatalogChild struct {
	Table             string   `json:"table"`
	Column            string   `json:"column"`
	References        string   `json:"references"`
	Columns           []string `json:"columns"`
	ReferencesColumns []string `json:"referencesColumns"`
	// WithoutForeignKey: the policy declares the relation, and no foreign key says it.
	WithoutForeignKey bool `json:"withoutForeignKey,omitempty"`
}

// Bounds is every time and size bound of a run on the server, durations in milliseconds.
type Bounds struct {
	ServerWriteTimeoutMs    int64 `json:"serverWriteTimeoutMs"`
	SweepDeadlineMs         int64 `json:"sweepDeadlineMs"`
	BatchStatementTimeoutMs int64 `json:"batchStatementTimeoutMs"`
	BatchLockTimeoutMs      int64 `json:"batchLockTimeoutMs"`
	CountTimeoutMs          int64 `json:"countTimeoutMs"`
	SignatureMaxAgeMs       int64 `json:"signatureMaxAgeMs"`
	InternalFetchTimeoutMs  int64 `json:"internalFetchTimeoutMs,omitempty"`
	ShutdownGraceMs         int64 `json:"shutdownGraceMs"`
	LeaseTTLMs              int64 `json:"leaseTtlMs"`
	BatchSize               int   `json:"batchSize"`
	MinBatchSize            int   `json:"minBatchSize"`
	MaxBatchSize            int   `json:"maxBatchSize"`
	BatchTargetMs           int64 `json:"batchTargetMs"`
	MaxBatches              int   `json:"maxBatches"`
	BatchPauseMs            int64 `json:"batchPauseMs"`
}
