// Package classify turns one answer of POST /internal/sweep-<name> into the cron client's verdict:
// a Category, the parsed answer when there is one, and a one-line detail. It does no I/O, so a
// table test pins every rule.
//
// Rules, checked in this order:
//
//  1. TransportErr set (connect error, or timeout before any response header): unreachable.
//  2. BodyErr set (the body read broke after the headers arrived): truncated-body, whatever the
//     status, because a partial body cannot be trusted to say what happened.
//  3. Non-2xx status: batch-error when the body is a sweep answer that reports a failed batch,
//     schema-changed when it reports a pass its check refused after the schema changed (the API
//     answers 500 with the run's JSON for both); otherwise fail, whatever the body claims: the
//     client must not be more optimistic than a scheduler that reads only the status.
//  4. 2xx but not a sweep answer (not JSON, not a JSON object, no "sweep", neither a
//     "stopReason" nor "dryRun": true, a field of the wrong type, an unknown stop reason, or an
//     answer that contradicts itself such as skipped without lease-held): unparseable.
//  5. A sweep answer, in priority order: skipped > batch-error > schema-changed > history-error >
//     truncated > ok. The body decides, not the status: a 200 whose body reports a failed batch
//     is still batch-error.
//
// A dry-run answer (dryRun true, no stopReason, passes carrying counts) is ok; its counts are in
// Answer.DryRunPasses.
package classify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// Category is the cron client's verdict on one route.
type Category string

// The categories of docs/DESIGN.md. The first three are healthy; every other one is a failure.
const (
	// OK is a completed run that left no backlog, or a dry run.
	OK Category = "ok"
	// Truncated is a completed run that left a backlog the next tick continues (budget,
	// batch-cap, critical-load or shutdown).
	Truncated Category = "truncated"
	// Skipped is a run that found another run holding the sweep's lease.
	Skipped Category = "skipped"
	// BatchError is a run where a batch failed; the answer's Error says how.
	BatchError Category = "batch-error"
	// SchemaChanged is a run where a pass found the schema changed since its proof and its check
	// refusing it now: the pass deleted nothing, and stays stopped until the policy or the schema
	// is fixed. The answer's Error names the change and the fix.
	SchemaChanged Category = "schema-changed"
	// HistoryError is a run that went as its answer says, but whose end the API could not write to
	// the run history (the answer's historyError).
	HistoryError Category = "history-error"
	// Unreachable is a connect error or a timeout before any response: the cron client stops the
	// whole run on it, since every further route would fail the same way.
	Unreachable Category = "unreachable"
	// Fail is a non-2xx status without a sweep answer that explains it.
	Fail Category = "fail"
	// TruncatedBody is an answer whose body broke after the headers arrived.
	TruncatedBody Category = "truncated-body"
	// Unparseable is a 2xx answer that is not a sweep answer.
	Unparseable Category = "unparseable"
)

// Categories returns every category, healthy ones first, in the order reports list them.
func Categories() []Category {
	return []Category{OK, Truncated, Skipped, BatchError, SchemaChanged, HistoryError, Fail, TruncatedBody, Unparseable, Unreachable}
}

// Failed reports whether c makes the cron client exit non-zero. An unknown category counts as
// failed, so a category added here and forgotten by a caller fails closed.
func (c Category) Failed() bool {
	switch c {
	case OK, Truncated, Skipped:
		return false
	}
	return true
}

// StopReason is why a run or a pass stopped, as the API spells it.
type StopReason = wire.StopReason

// The stop reasons of the contract (package wire).
const (
	StopExhausted  = wire.StopExhausted
	StopBudget     = wire.StopBudget
	StopBatchCap   = wire.StopBatchCap
	StopBatchError = wire.StopBatchError
	StopShutdown   = wire.StopShutdown
	StopLeaseHeld  = wire.StopLeaseHeld
	// StopSchemaChanged is the stop reason of a pass its check refused after the schema changed.
	StopSchemaChanged = wire.StopSchemaChanged
)

// Input is the outcome of one HTTP exchange with a sweep route.
type Input struct {
	// TransportErr is a connect error or a timeout before any response header arrived.
	TransportErr error
	// StatusCode is the response's status; it is read only when TransportErr is nil.
	StatusCode int
	// Body is the response body as read, complete when BodyErr is nil.
	Body []byte
	// BodyErr is the error that broke the body read after the headers had arrived.
	BodyErr error
}

// ErrorInfo is the answer's "error": the failure that stopped a pass with batch-error.
type ErrorInfo = wire.ErrorInfo

// Pass is one pass of a run answer.
type Pass = wire.PassResult

// DryRunPass is one pass of a dry-run answer.
type DryRunPass = wire.DryRunPass

// Answer is a parsed sweep answer: a run's, or a dry run's when DryRunPasses is set.
type Answer struct {
	Sweep   string `json:"sweep"`
	RunID   string `json:"runId,omitempty"`
	DryRun  bool   `json:"dryRun"`
	Skipped bool   `json:"skipped"`
	Deleted int64  `json:"deleted"`
	// Processed is the keys the per-row passes handed to their function (the wire's Result).
	Processed  int64      `json:"processed,omitempty"`
	Archived   int64      `json:"archived,omitempty"`
	BatchCount int        `json:"batchCount"`
	DurationMs int64      `json:"durationMs"`
	Truncated  bool       `json:"truncated"`
	StopReason StopReason `json:"stopReason,omitempty"`
	Passes     []Pass     `json:"passes,omitempty"`
	// DryRunPasses holds a dry run's counts. They live in their own field, not in Passes,
	// because the API sends a different shape under the same "passes" key for a dry run.
	DryRunPasses []DryRunPass `json:"dryRunPasses,omitempty"`
	Error        *ErrorInfo   `json:"error,omitempty"`
	// HistoryError is why the run's end is missing from the run history, when it is.
	HistoryError *ErrorInfo `json:"historyError,omitempty"`
}

// IsDryRun reports whether a is a dry run's count rather than a run.
func (a *Answer) IsDryRun() bool { return a.DryRun && a.StopReason == "" }

// Result is the verdict on one route.
type Result struct {
	Category Category `json:"category"`
	// Answer is the parsed sweep answer, nil when the body held none.
	Answer *Answer `json:"answer,omitempty"`
	// Detail explains the category in one line for the operator; empty for a plain ok.
	Detail string `json:"detail,omitempty"`
}

// Classify returns the verdict on one exchange with a sweep route. See the package
// documentation for the rules.
func Classify(in Input) Result {
	if in.TransportErr != nil {
		return Result{Category: Unreachable, Detail: in.TransportErr.Error()}
	}
	if in.BodyErr != nil {
		return Result{
			Category: TruncatedBody,
			Detail:   fmt.Sprintf("HTTP %d, body broke after %d bytes: %v", in.StatusCode, len(in.Body), in.BodyErr),
		}
	}
	ans, perr := parse(in.Body)
	if in.StatusCode < 200 || in.StatusCode > 299 {
		return classifyNon2xx(in, ans, perr)
	}
	if perr != nil {
		return Result{Category: Unparseable, Detail: fmt.Sprintf("HTTP %d: %v", in.StatusCode, perr)}
	}
	return classifyAnswer(ans)
}

// classifyNon2xx judges a non-2xx status: only a sweep answer reporting a failed batch explains
// it; anything else is fail, with whatever the body says about why.
func classifyNon2xx(in Input, ans *Answer, perr error) Result {
	if perr == nil && failedBatch(ans) {
		// batch-error even if the answer also says skipped: the status says the run failed,
		// and of the answer's two claims only the failure agrees with it.
		return Result{Category: BatchError, Answer: ans, Detail: fmt.Sprintf("HTTP %d: %s", in.StatusCode, batchErrorDetail(ans))}
	}
	if perr == nil && schemaChanged(ans) {
		return Result{Category: SchemaChanged, Answer: ans, Detail: fmt.Sprintf("HTTP %d: %s", in.StatusCode, schemaChangedDetail(ans))}
	}
	if perr == nil {
		what := fmt.Sprintf("a sweep answer that reports no failed batch (stopReason %q)", ans.StopReason)
		if ans.IsDryRun() {
			what = "a dry-run answer"
		}
		return Result{Category: Fail, Answer: ans, Detail: fmt.Sprintf("HTTP %d with %s", in.StatusCode, what)}
	}
	detail := fmt.Sprintf("HTTP %d", in.StatusCode)
	if s := errorSummary(in.Body); s != "" {
		detail += ": " + s
	}
	return Result{Category: Fail, Detail: detail}
}

// classifyAnswer applies the priority skipped > batch-error > history-error > truncated > ok to a
// parsed answer.
func classifyAnswer(a *Answer) Result {
	if a.IsDryRun() {
		return Result{Category: OK, Answer: a, Detail: dryRunDetail(a)}
	}
	switch {
	case a.Skipped:
		return Result{Category: Skipped, Answer: a, Detail: "lease held by another run"}
	case failedBatch(a):
		return Result{Category: BatchError, Answer: a, Detail: batchErrorDetail(a)}
	case schemaChanged(a):
		return Result{Category: SchemaChanged, Answer: a, Detail: schemaChangedDetail(a)}
	case a.HistoryError != nil:
		return Result{Category: HistoryError, Answer: a, Detail: "the run history could not record this run: " + a.HistoryError.Code + " " + a.HistoryError.Message}
	case backlog(a):
		return Result{Category: Truncated, Answer: a, Detail: "backlog left for the next tick (stopReason " + string(a.StopReason) + ")"}
	}
	return Result{Category: OK, Answer: a}
}

// failedBatch reports whether any part of the answer says a batch failed. Any one sign is enough:
// the top-level stop reason is meant to be the most severe of the passes, but if the server ever
// got that wrong, a failed pass must still not be reported as ok.
func failedBatch(a *Answer) bool {
	if a.IsDryRun() {
		return false
	}
	if a.StopReason == StopBatchError || (a.Error != nil && a.Error.Code != string(StopSchemaChanged)) {
		return true
	}
	for _, p := range a.Passes {
		if p.StopReason == StopBatchError {
			return true
		}
	}
	return false
}

// backlog reports whether any part of the answer says rows were left for the next tick, for the
// same reason failedBatch reads every sign.
func backlog(a *Answer) bool {
	if a.Truncated || a.StopReason.Truncates() {
		return true
	}
	for _, p := range a.Passes {
		if p.StopReason.Truncates() {
			return true
		}
	}
	return false
}

// schemaChanged reports whether any part of the answer says a pass stopped with schema-changed.
func schemaChanged(a *Answer) bool {
	if a.StopReason == StopSchemaChanged || (a.Error != nil && a.Error.Code == string(StopSchemaChanged)) {
		return true
	}
	for _, p := range a.Passes {
		if p.StopReason == StopSchemaChanged {
			return true
		}
	}
	return false
}

// schemaChangedDetail names, for each refused pass, what changed and the check's way out.
func schemaChangedDetail(a *Answer) string {
	var notes []string
	for _, p := range a.Passes {
		if p.StopReason != StopSchemaChanged || p.SchemaChanged == nil {
			continue
		}
		notes = append(notes, fmt.Sprintf("pass %s deleted nothing: the schema changed since its proof (%s), and its check refuses it now: %s",
			p.Pass, strings.Join(p.SchemaChanged.Changed, "; "), p.SchemaChanged.Refusal))
	}
	if len(notes) == 0 {
		return "a pass's schema changed since its proof and its check refuses it now; the answer carries no detail"
	}
	return strings.Join(notes, " | ")
}

func batchErrorDetail(a *Answer) string {
	if a.Error == nil {
		return "a batch failed; the answer carries no error detail"
	}
	s := "pass " + a.Error.Pass + ": " + a.Error.Code
	if a.Error.Message != "" {
		s += " " + a.Error.Message
	}
	return s
}

// dryRunDetail flags the counts an operator should look at: a count that timed out, and a batch
// predicate the planner cannot serve from an index.
func dryRunDetail(a *Answer) string {
	var notes []string
	for _, p := range a.DryRunPasses {
		if p.CountTimedOut {
			notes = append(notes, "pass "+p.Pass+": count timed out")
		}
		if !p.Indexed {
			notes = append(notes, "pass "+p.Pass+": not index-backed")
		}
	}
	return strings.Join(notes, "; ")
}

// wireAnswer is the union of both answer shapes; passes is decoded once the shape is known.
type wireAnswer struct {
	Sweep      string          `json:"sweep"`
	RunID      string          `json:"runId"`
	DryRun     bool            `json:"dryRun"`
	Skipped    bool            `json:"skipped"`
	Deleted    int64           `json:"deleted"`
	Processed  int64           `json:"processed"`
	Archived   int64           `json:"archived"`
	BatchCount int             `json:"batchCount"`
	DurationMs int64           `json:"durationMs"`
	Truncated  bool            `json:"truncated"`
	StopReason StopReason      `json:"stopReason"`
	Passes     json.RawMessage `json:"passes"`
	Error      *ErrorInfo      `json:"error"`
	// HistoryError: see Answer.
	HistoryError *ErrorInfo `json:"historyError"`
}

// parse reads body as a sweep answer, or says why it is not one.
func parse(body []byte) (*Answer, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, errors.New("empty body")
	}
	if !json.Valid(trimmed) {
		return nil, fmt.Errorf("not JSON: %s", snippet(trimmed))
	}
	// Presence is checked on the raw keys because decoding into a struct cannot tell a missing
	// field from a zero one, and "no stopReason" is what separates a dry run from a run.
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &keys); err != nil || keys == nil {
		return nil, fmt.Errorf("not a JSON object: %s", snippet(trimmed))
	}
	if _, ok := keys["sweep"]; !ok {
		return nil, errors.New(`not a sweep answer: no "sweep"`)
	}
	var w wireAnswer
	if err := json.Unmarshal(trimmed, &w); err != nil {
		return nil, fmt.Errorf("not a sweep answer: %w", err)
	}
	if w.Sweep == "" {
		return nil, errors.New(`not a sweep answer: empty "sweep"`)
	}
	a := &Answer{
		Sweep: w.Sweep, RunID: w.RunID, DryRun: w.DryRun, Skipped: w.Skipped, Deleted: w.Deleted, Processed: w.Processed, Archived: w.Archived,
		BatchCount: w.BatchCount, DurationMs: w.DurationMs, Truncated: w.Truncated,
		StopReason: w.StopReason, Error: w.Error, HistoryError: w.HistoryError,
	}
	_, hasStop := keys["stopReason"]
	switch {
	case hasStop:
		if !w.StopReason.Known() {
			return nil, fmt.Errorf("not a sweep answer: unknown stopReason %q", w.StopReason)
		}
		if err := decodePasses(w.Passes, &a.Passes); err != nil {
			return nil, err
		}
		for _, p := range a.Passes {
			if !p.StopReason.Known() {
				return nil, fmt.Errorf("not a sweep answer: pass %q has unknown stopReason %q", p.Pass, p.StopReason)
			}
		}
		// skipped and lease-held say the same thing twice; an answer where they disagree comes
		// from a server that does not keep the contract, and guessing which half is true could
		// hide a failure.
		if a.Skipped != (a.StopReason == StopLeaseHeld) {
			return nil, fmt.Errorf("inconsistent sweep answer: skipped=%t with stopReason %q", a.Skipped, a.StopReason)
		}
	case w.DryRun:
		if len(w.Passes) == 0 {
			return nil, errors.New(`not a dry-run answer: no "passes"`)
		}
		if err := decodePasses(w.Passes, &a.DryRunPasses); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New(`not a sweep answer: no "stopReason" and not a dry run`)
	}
	return a, nil
}

// decodePasses decodes raw, absent or null meaning no passes, into dst.
func decodePasses[T any](raw json.RawMessage, dst *[]T) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("not a sweep answer: passes: %w", err)
	}
	return nil
}

// errorSummary extracts why a non-2xx answer failed: the API's JSON error ({"error": "code"},
// {"error": {"code", "message"}}, or top-level code and message), else the start of the body.
func errorSummary(body []byte) string {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return ""
	}
	var obj struct {
		Error   json.RawMessage `json:"error"`
		Code    string          `json:"code"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(trimmed, &obj) == nil {
		var s string
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Reason  string `json:"reason"`
		}
		switch {
		case len(obj.Error) > 0 && json.Unmarshal(obj.Error, &s) == nil && s != "":
			return joinNonEmpty(s, obj.Message)
		case len(obj.Error) > 0 && json.Unmarshal(obj.Error, &e) == nil && (e.Code != "" || e.Message != "" || e.Reason != ""):
			return joinNonEmpty(joinNonEmpty(e.Code, e.Reason), e.Message)
		case obj.Code != "" || obj.Message != "":
			return joinNonEmpty(obj.Code, obj.Message)
		}
	}
	return snippet(trimmed)
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ": " + b
}

// snippetMax bounds how much of a foreign body goes into a one-line detail.
const snippetMax = 120

// snippet returns the start of b on one printable line, so that an HTML error page from a proxy
// does not flood the report.
func snippet(b []byte) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return ' '
		}
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, string(b))
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > snippetMax {
		s = string(r[:snippetMax]) + "…"
	}
	return s
}
