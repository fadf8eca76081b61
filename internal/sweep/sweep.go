// Package sweep owns the retention engine: the specs of what to delete, the runner that deletes it
// in bounded batches under one time budget, the dry-run counter, and the bundled catalog.
package sweep

import (
	"errors"
	"time"
)

// Mode says how a pass deletes its eligible rows.
type Mode string

// The pass modes of DESIGN.md.
const (
	// ModeBatched deletes in short transactions of at most a batch of rows each.
	ModeBatched Mode = "batched"
	// ModeSingle deletes every eligible row in one predicated statement, for small, race-sensitive sets.
	ModeSingle Mode = "single"
	// ModePerRow calls a SQL function once per eligible key, each call in its own transaction.
	ModePerRow Mode = "per-row"
)

// StopReason names why a pass or a run stopped.
type StopReason string

// The stop reasons, from least to most severe.
const (
	StopExhausted  StopReason = "exhausted"
	StopBatchCap   StopReason = "batch-cap"
	StopBudget     StopReason = "budget"
	StopShutdown   StopReason = "shutdown"
	StopBatchError StopReason = "batch-error"
	StopLeaseHeld  StopReason = "lease-held"
)

// severity orders the stop reasons of passes for the run's top-level reason.
func (s StopReason) severity() int {
	switch s {
	case StopExhausted:
		return 0
	case StopBatchCap:
		return 1
	case StopBudget:
		return 2
	case StopShutdown:
		return 3
	case StopBatchError:
		return 4
	}
	return -1
}

// truncates reports whether a pass that stopped for this reason left a backlog for the next tick.
func (s StopReason) truncates() bool {
	return s == StopBudget || s == StopBatchCap || s == StopShutdown
}

// Outcomes lists every value of the runs metric's outcome label: each stop reason a run can end
// with, and "skipped" for a run that found the lease held.
func Outcomes() []string {
	return []string{
		string(StopExhausted), string(StopBatchCap), string(StopBudget),
		string(StopShutdown), string(StopBatchError), OutcomeSkipped,
	}
}

// OutcomeSkipped is the runs metric's outcome for a run that found its lease held.
const OutcomeSkipped = "skipped"

// ErrUnknownSweep is returned for a sweep name the catalog does not hold.
var ErrUnknownSweep = errors.New("unknown sweep")

// Spec is one sweep: a name, served as POST /internal/sweep-<name>, and its passes, run in order.
type Spec struct {
	Name   string `json:"name"`
	Passes []Pass `json:"passes"`
}

// Guard keeps a row while another table still references it:
// NOT EXISTS (SELECT 1 FROM <Table> WHERE <Table>.<Column> = t.<References>).
type Guard struct {
	Table      string `json:"table"`
	Column     string `json:"column"`
	References string `json:"references"`
}

// Pass is one predicate over one table. A row is eligible when Where holds, the age column is
// older than the cutoff (the database clock at run start minus Retention), and no Guard references it.
type Pass struct {
	Name      string        `json:"pass"`
	Table     string        `json:"table"`
	AgeColumn string        `json:"ageColumn"`
	Retention time.Duration `json:"-"`
	// Where is an extra SQL condition over the table's columns (unqualified, or qualified as t.col).
	Where  string  `json:"where,omitempty"`
	Guards []Guard `json:"guards,omitempty"`
	Mode   Mode    `json:"mode"`
	// Function is called with the key of each eligible row in per-row mode.
	Function string `json:"function,omitempty"`
	// KeyColumn is the per-row key handed to Function; "id" when empty.
	KeyColumn string `json:"keyColumn,omitempty"`
	// BatchSize and MaxBatches override the runner's settings for this pass when > 0.
	BatchSize  int `json:"batchSize,omitempty"`
	MaxBatches int `json:"maxBatches,omitempty"`
	// AllowUnindexed accepts a pass whose batch select no index can serve (a small table); the
	// policy check refuses such a pass otherwise, since each batch would scan the whole table.
	AllowUnindexed bool `json:"allowUnindexed,omitempty"`
}

// Settings bound every run of a Runner.
type Settings struct {
	// Deadline is one run's time budget, checked between batches.
	Deadline time.Duration
	// StatementTimeout and LockTimeout are set locally in each batch transaction.
	StatementTimeout time.Duration
	LockTimeout      time.Duration
	// CountTimeout bounds a dry run's exact count.
	CountTimeout time.Duration
	// BatchSize is a pass's first batch; adaptive sizing moves it toward BatchTarget within
	// [MinBatchSize, MaxBatchSize].
	BatchSize    int
	MinBatchSize int
	MaxBatchSize int
	BatchTarget  time.Duration
	// MaxBatches caps the batches of one pass in one run.
	MaxBatches int
	// Pause is slept between batches (replicas, autovacuum); zero for none.
	Pause time.Duration
}

// Options are one request's choices.
type Options struct {
	// BatchSize overrides Settings.BatchSize as the first batch of each pass when > 0.
	BatchSize int
}

// ErrorInfo describes the failure that stopped a pass with batch-error.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Pass    string `json:"pass"`
}

// PassResult is what one pass did in one run.
type PassResult struct {
	Pass       string     `json:"pass"`
	Deleted    int64      `json:"deleted"`
	BatchCount int        `json:"batchCount"`
	StopReason StopReason `json:"stopReason"`
}

// Result is the answer of one run, as served by POST /internal/sweep-<name>.
type Result struct {
	Sweep      string       `json:"sweep"`
	RunID      string       `json:"runId"`
	DryRun     bool         `json:"dryRun"`
	Skipped    bool         `json:"skipped"`
	Deleted    int64        `json:"deleted"`
	BatchCount int          `json:"batchCount"`
	DurationMs int64        `json:"durationMs"`
	Truncated  bool         `json:"truncated"`
	StopReason StopReason   `json:"stopReason"`
	Passes     []PassResult `json:"passes"`
	Error      *ErrorInfo   `json:"error"`
}

// Failed reports whether the run stopped on a failed batch, which the API answers with 500.
func (r *Result) Failed() bool { return r.StopReason == StopBatchError }

// DryRunPass is one pass's count in a dry run.
type DryRunPass struct {
	Pass string `json:"pass"`
	// Eligible is the exact count, nil when counting ran past the count timeout.
	Eligible      *int64 `json:"eligible"`
	Estimate      int64  `json:"estimate"`
	CountTimedOut bool   `json:"countTimedOut"`
	// Indexed reports whether the planner can serve the batch select from an index.
	Indexed bool `json:"indexed"`
}

// DryRunResult is the answer of a dry run.
type DryRunResult struct {
	Sweep  string       `json:"sweep"`
	DryRun bool         `json:"dryRun"`
	Passes []DryRunPass `json:"passes"`
}
