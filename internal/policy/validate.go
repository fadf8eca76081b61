package policy

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/sweeprail/sweeprail/internal/wire"
)

// MinRetention is the floor below which a retention is refused: a window that short would delete
// live data, and is far more likely a typo ("5m" for "5d") than a wish.
const MinRetention = time.Hour

// MinShortRetention is the floor for a pass that says allow_short_retention: job queues keep
// finished jobs for a minute or so, and say so on purpose.
const MinShortRetention = time.Minute

const day = 24 * time.Hour

var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// problem is one broken rule: the policy field it is about ("" for the pass or sweep itself;
// "guard.<i>" and "guard.<i>.<key>" for keep guards), so that the loader and the schema check can
// put the field's line in front of it, and what is wrong, with what to do about it.
type problem struct {
	sweep, pass, field string
	msg                string
}

// validatePass is the one check of a pass's own rules, shared by Load (which adds lines),
// Validate (specs built in Go, retention overrides) and Policy.Check. A pass field's rules live
// here and nowhere else. It reports every problem at once; sweep and pass are left for the caller.
func validatePass(p Pass) []problem {
	var out []problem
	add := func(field, format string, args ...any) {
		out = append(out, problem{field: field, msg: fmt.Sprintf(format, args...)})
	}
	if !nameRE.MatchString(p.Name) {
		add("name", "the name must be lower-case letters, digits and single dashes, such as expired: it labels metrics and answers")
	}
	if p.Table == "" {
		add("table", "table is required")
	} else if err := checkRelationName(p.Table); err != nil {
		add("table", "table %q: %v", p.Table, err)
	}
	if p.AgeColumn == "" {
		add("age_column", "age_column is required")
	} else if err := checkColumnName(p.AgeColumn); err != nil {
		add("age_column", "age_column %q: %v", p.AgeColumn, err)
	}
	if p.Expiry && p.AllowShortRetention {
		add("allow_short_retention", "allow_short_retention has no effect with expiry: true (an expiry's grace may be anything from 0s): remove it")
	} else if msg := checkRetention(p.Retention, p.AllowShortRetention, p.Expiry); msg != "" {
		add("retention", "%s", msg)
	} else if p.MinRetention > 0 && p.Retention < p.MinRetention {
		add("retention", "retention %s is below this pass's min_retention of %s: the pass keeps its rows at least that long "+
			"whatever SWEEP_RETENTION says; lower min_retention in the policy to shorten it",
			formatDuration(p.Retention), formatDuration(p.MinRetention))
	}
	if p.MinRetention < 0 {
		add("min_retention", "min_retention %s is negative: want the shortest window the pass may keep, such as 365d", formatDuration(p.MinRetention))
	}
	if msg := checkTimeZone(p.TimeZone); msg != "" {
		add("time_zone", "%s", msg)
	}
	if msg := checkAgeUnit(p.AgeUnit); msg != "" {
		add("age_unit", "%s", msg)
	} else if p.AgeUnit != "" && p.TimeZone != "" && p.TimeZone != TimeZoneUTC {
		add("time_zone", "time_zone has no effect with age_unit: Unix time counts from one instant, whatever the zone; remove time_zone")
	}
	if strings.TrimSpace(p.Where) != "" {
		for _, problem := range checkCondition(p.Where) {
			add("where", "where: %s", problem)
		}
	}
	for i, g := range p.Guards {
		field := fmt.Sprintf("guard.%d", i)
		if err := checkRelationName(g.Table); err != nil {
			add(field+".table", "keep guard table %q: %v", g.Table, err)
		}
		if err := checkColumnName(g.Column); err != nil {
			add(field+".column", "keep guard column %q: %v", g.Column, err)
		}
		if g.References != "" {
			if err := checkColumnName(g.References); err != nil {
				add(field+".references", "keep guard references %q: %v", g.References, err)
			}
		}
		if g.Where != "" {
			for _, problem := range checkCondition(g.Where) {
				add(field+".where", "keep guard where: %s", problem)
			}
		}
	}
	out = append(out, validateChildren(p)...)
	mode := p.Mode
	switch mode {
	case "":
		mode = ModeBatched
	case ModeBatched, ModeSingle, ModePerRow, ModePartitions:
	default:
		add("mode", "unknown mode %q: want batched (the default), single, per-row or partitions", p.Mode)
		return out // the rules below depend on the mode
	}
	if mode == ModePartitions {
		// A whole partition goes whatever its rows say: a condition or a guard could not be kept.
		if strings.TrimSpace(p.Where) != "" {
			add("where", "where is not for mode partitions: a dropped partition takes every row in it; sweep such rows with a batched pass")
		}
		if len(p.Guards) > 0 {
			add("keep_while_referenced_by", "keep guards are not for mode partitions: a dropped partition takes every row in it")
		}
		if len(p.DeleteWith) > 0 {
			add("delete_with", "delete_with is not for mode partitions: a dropped partition's rows go without their children")
		}
		if p.TimeZone != "" && p.TimeZone != TimeZoneUTC {
			add("time_zone", "time_zone is not for mode partitions: partitions expire by their bounds on the UTC calendar, and the boundary's rows must go by the same one")
		}
	} else {
		if p.KeepDetached {
			add("keep_detached", "keep_detached is only for mode partitions: remove it")
		}
		if p.ArchiveSchema != "" {
			add("archive_schema", "archive_schema is only for mode partitions (it moves whole partitions): for rows, use archive_to")
		}
		if p.Boundary != "" {
			add("boundary", "boundary is only for mode partitions: remove it")
		}
	}
	if p.ArchiveSchema != "" {
		if err := checkIdentifier(p.ArchiveSchema); err != nil {
			add("archive_schema", "archive_schema %q: %v", p.ArchiveSchema, err)
		}
		if p.KeepDetached {
			add("archive_schema", "archive_schema keeps the detached partitions already, in that schema: remove keep_detached")
		}
	}
	switch p.Boundary {
	case "", BoundaryDelete, BoundaryKeep:
	default:
		add("boundary", "unknown boundary %q: want delete (the default: the straddling partition's expired rows are deleted in batches) or keep", p.Boundary)
	}
	if p.Function != "" {
		if err := checkRelationName(p.Function); err != nil {
			add("function", "function %q: %v", p.Function, err)
		}
	}
	if p.KeyColumn != "" {
		if err := checkColumnName(p.KeyColumn); err != nil {
			add("key_column", "key_column %q: %v", p.KeyColumn, err)
		}
	}
	switch {
	case mode == ModePerRow && p.Function == "":
		add("mode", "mode per-row needs a function: the SQL function called once per eligible row with its key_column (default id)")
	case mode != ModePerRow && p.Function != "":
		add("function", "function is only for mode per-row (this pass is %s): set mode: per-row, or remove function", mode)
	case mode != ModePerRow && p.KeyColumn != "":
		add("key_column", "key_column is only for mode per-row (this pass is %s): remove it", mode)
	}
	if p.BatchSize != 0 {
		if msg := checkBatchSize(mode, p.BatchSize); msg != "" {
			add("batch_size", "%s", msg)
		}
	}
	if p.MaxBatches != 0 {
		if msg := checkMaxBatches(mode, p.MaxBatches); msg != "" {
			add("max_batches", "%s", msg)
		}
	}
	out = append(out, checkCascades(p, mode)...)
	if p.ArchiveTo != "" {
		for _, msg := range checkArchiveTo(p, mode) {
			add("archive_to", "%s", msg)
		}
	}
	if p.MaxRows != 0 {
		if msg := checkMaxRows(mode, p.MaxRows); msg != "" {
			add("max_rows", "%s", msg)
		}
	}
	if mode == ModePerRow && len(p.DeleteWith) > 0 {
		add("delete_with", "delete_with has no effect in mode per-row: the function deletes; delete the children in it, or use mode batched")
	}
	if p.ArchiveTo != "" && len(p.DeleteWith) > 0 {
		add("archive_to", "archive_to and delete_with together are refused: the children would be deleted without being archived; archive the children in a pass of their own, before this one")
	}
	return out
}

// validateChildren checks a pass's delete_with entries: names, no child twice, and none that an
// unconditional keep guard on the same reference makes pointless.
func validateChildren(p Pass) []problem {
	var out []problem
	add := func(field, format string, args ...any) {
		out = append(out, problem{field: field, msg: fmt.Sprintf(format, args...)})
	}
	seen := map[[2]string]int{}
	for i, c := range p.DeleteWith {
		field := fmt.Sprintf("delete_with.%d", i)
		if err := checkRelationName(c.Table); err != nil {
			add(field+".table", "delete_with table %q: %v", c.Table, err)
		}
		if err := checkColumnName(c.Column); err != nil {
			add(field+".column", "delete_with column %q: %v", c.Column, err)
		}
		if c.References != "" {
			if err := checkColumnName(c.References); err != nil {
				add(field+".references", "delete_with references %q: %v", c.References, err)
			}
		}
		key := [2]string{c.Table, c.Column}
		if j, dup := seen[key]; dup {
			add(field, "delete_with names %s.%s twice (entries %d and %d): keep one", c.Table, c.Column, j+1, i+1)
		}
		seen[key] = i
		for gi, g := range p.Guards {
			if g.Where == "" && g.Table == c.Table && g.Column == c.Column && cmp.Or(g.References, "id") == cmp.Or(c.References, "id") {
				add(field, "keep guard %d keeps every row that %s.%s references, so delete_with would never delete one of its children: give the guard a where (keep only while a child is in some state), or remove one of them",
					gi+1, c.Table, c.Column)
			}
		}
	}
	return out
}

// checkMaxRows says why a pass's max_rows is refused, or "" when it is not, as checkBatchSize.
func checkMaxRows(mode Mode, v int) string {
	switch {
	case mode == ModeSingle:
		return "max_rows has no effect in mode single (one statement deletes every eligible row): remove it, or use mode batched"
	case mode == ModePerRow:
		return "max_rows has no effect in mode per-row (one row per call): cap the calls with max_batches"
	case mode == ModePartitions:
		return "max_rows is not for mode partitions: a dropped partition takes every row in it, whatever the cap; cap the drops with max_batches"
	case v < 1:
		return fmt.Sprintf("max_rows %d must be at least 1, or leave it out for no cap", v)
	}
	return ""
}

// checkBatchSize says why a pass's batch_size is refused, or "" when it is not. In a Pass, 0
// means "the server's setting"; the loader asks about a batch_size written as 0 too.
func checkBatchSize(mode Mode, v int) string {
	switch {
	case mode != ModeBatched && mode != ModePartitions:
		return fmt.Sprintf("batch_size has no effect in mode %s (%s): remove it", mode, modeBatching(mode))
	case v < wire.MinRequestBatchSize || v > wire.MaxRequestBatchSize:
		return fmt.Sprintf("batch_size %d is out of range: want %d to %d, or leave it out for the server's BATCH_SIZE",
			v, wire.MinRequestBatchSize, wire.MaxRequestBatchSize)
	}
	return ""
}

// checkMaxBatches says why a pass's max_batches is refused, or "" when it is not, as checkBatchSize.
func checkMaxBatches(mode Mode, v int) string {
	switch {
	case mode == ModeSingle:
		return fmt.Sprintf("max_batches has no effect in mode single (%s): remove it", modeBatching(mode))
	case v < 1:
		return fmt.Sprintf("max_batches %d must be at least 1, or leave it out for the server's MAX_BATCHES", v)
	}
	return ""
}

func modeBatching(m Mode) string {
	if m == ModeSingle {
		return "one statement deletes every eligible row"
	}
	return "one row per call; max_batches caps the calls"
}

// checkRetention says why a retention window is refused, or "" when it is not; short says the
// pass allows short retention, expiry that its age column holds when a row expires, which makes
// the retention a grace after it: any grace from zero up is sound, since the column itself says
// when the row may go.
func checkRetention(d time.Duration, short, expiry bool) string {
	if expiry {
		if d < 0 {
			return fmt.Sprintf("retention %s is negative: with expiry: true the retention is the grace after each row's expiry, and a negative one would delete rows before they expire; want 0s or more", formatDuration(d))
		}
		return ""
	}
	floor := "the floor of " + formatDuration(MinRetention)
	if short {
		floor = "the floor of " + formatDuration(MinShortRetention) + " (allow_short_retention)"
	}
	switch {
	case d == 0:
		return fmt.Sprintf("retention 0 is below %s: a zero window makes every row eligible and would delete live data (if age_column holds when each row expires, say expiry: true, and retention is the grace after it)", floor)
	case d < 0:
		return fmt.Sprintf("retention %s is below %s: a negative window puts the cutoff in the future and would delete live data", formatDuration(d), floor)
	case short && d < MinShortRetention:
		return fmt.Sprintf("retention %s is below %s: a window that short would delete rows still being worked on", formatDuration(d), floor)
	case !short && d < MinRetention:
		hint := "write a longer window, or set allow_short_retention: true for a job queue that keeps finished rows for minutes"
		if d%time.Minute == 0 {
			hint = fmt.Sprintf("did you mean %dd? (for a job queue that keeps finished rows for minutes, set allow_short_retention: true)", d/time.Minute)
		}
		return fmt.Sprintf("retention %s is below %s: a window that short would delete live data; %s", formatDuration(d), floor, hint)
	}
	return ""
}

// checkSweepName says why a sweep name is refused, or "" when it is not.
func checkSweepName(name string) string {
	if nameRE.MatchString(name) {
		return ""
	}
	return "the name must be lower-case letters, digits and single dashes, such as expired-sessions: it is the route POST /internal/sweep-<name>"
}

// validateSpecs checks specs whole: each sweep's name and passes, names unique, and every pass by
// validatePass. Problems come in spec order.
func validateSpecs(specs []Spec) []problem {
	var out []problem
	seen := map[string]bool{}
	for _, s := range specs {
		if msg := checkSweepName(s.Name); msg != "" {
			out = append(out, problem{sweep: s.Name, field: "name", msg: msg})
		}
		if seen[s.Name] {
			out = append(out, problem{sweep: s.Name, field: "name", msg: "the name is used twice: each sweep is its own route; rename one"})
		}
		seen[s.Name] = true
		if len(s.Passes) == 0 {
			out = append(out, problem{sweep: s.Name, msg: "no passes: a sweep needs at least one pass"})
		}
		passSeen := map[string]bool{}
		for _, p := range s.Passes {
			if passSeen[p.Name] {
				out = append(out, problem{sweep: s.Name, pass: p.Name, field: "name", msg: "the name is used twice in this sweep; rename one"})
			}
			passSeen[p.Name] = true
			for _, pr := range validatePass(p) {
				pr.sweep, pr.pass = s.Name, p.Name
				out = append(out, pr)
			}
		}
	}
	return out
}

// Validate checks specs for what would make a sweep unsafe or unservable: names that are not
// URL-safe or not unique, a retention below MinRetention (or a negative grace after an expiry), a
// missing table or age column, fields that do not fit the pass's mode, a where condition (a keep
// guard's too) that is not one boolean expression, a time zone that is no zone name, a child
// listed twice. It reports every problem at once, each a *Error without a file.
func Validate(specs []Spec) error {
	var errs []error
	for _, pr := range validateSpecs(specs) {
		errs = append(errs, &Error{Sweep: pr.sweep, Pass: pr.pass, Err: errors.New(pr.msg)})
	}
	return errors.Join(errs...)
}

// Problems is Validate's findings for the policy, each an *Error located at its field's line:
// what the live-schema check repeats before it sends any of the policy to the server.
func (p *Policy) Problems() []error {
	var errs []error
	for _, pr := range validateSpecs(p.Specs) {
		errs = append(errs, &Error{File: p.File, Line: p.Line(pr.sweep, pr.pass, pr.field), Sweep: pr.sweep, Pass: pr.pass, Err: errors.New(pr.msg)})
	}
	return errs
}

// Normalize returns a copy of specs with the defaults spelled out: an empty mode is batched, an
// empty time zone UTC, a keep guard's or child's empty references id. Everything downstream (the statements, the catalog answer,
// the policy check) reads the normalized form, so the defaults live here alone.
func Normalize(specs []Spec) []Spec {
	out := make([]Spec, len(specs))
	for i, s := range specs {
		out[i] = Spec{Name: s.Name, Passes: slices.Clone(s.Passes)}
		for j := range out[i].Passes {
			p := &out[i].Passes[j]
			if p.Mode == "" {
				p.Mode = ModeBatched
			}
			if p.TimeZone == "" {
				p.TimeZone = TimeZoneUTC
			}
			if p.Mode == ModePartitions && p.Boundary == "" {
				p.Boundary = BoundaryDelete
			}
			p.Guards = slices.Clone(p.Guards)
			for k := range p.Guards {
				if p.Guards[k].References == "" {
					p.Guards[k].References = "id"
				}
			}
			p.DeleteWith = slices.Clone(p.DeleteWith)
			for k := range p.DeleteWith {
				if p.DeleteWith[k].References == "" {
					p.DeleteWith[k].References = "id"
				}
			}
		}
	}
	return out
}

// WithRetention returns a copy of specs with the retentions of overrides, keyed "<sweep>.<pass>",
// and validates the result. An override naming no pass is an error, not ignored: a typo there
// would silently keep the default window.
func WithRetention(specs []Spec, overrides map[string]time.Duration) ([]Spec, error) {
	out := Normalize(specs)
	used := map[string]bool{}
	for i, s := range out {
		for j := range s.Passes {
			key := s.Name + "." + s.Passes[j].Name
			if d, ok := overrides[key]; ok {
				out[i].Passes[j].Retention = d
				used[key] = true
			}
		}
	}
	var errs []error
	for key := range overrides {
		if !used[key] {
			errs = append(errs, fmt.Errorf("retention override %q names no pass (want <sweep>.<pass>, one of: %s)", key, strings.Join(passKeys(specs), ", ")))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	if err := Validate(out); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func passKeys(specs []Spec) []string {
	var keys []string
	for _, s := range specs {
		for _, p := range s.Passes {
			keys = append(keys, s.Name+"."+p.Name)
		}
	}
	return keys
}

// FormatRetention writes a retention window as a policy would: "30d", "48h", "5m", "90s", "0".
func FormatRetention(d time.Duration) string { return formatDuration(d) }

func formatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// checkRelationName checks a table or function name: name or schema.name. Each part is quoted
// as written (pgx.Identifier), so it is case-sensitive and may not hold quotes of its own.
func checkRelationName(s string) error {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return errors.New("want name or schema.name")
	}
	for _, p := range parts {
		if err := checkIdentifier(p); err != nil {
			return err
		}
	}
	return nil
}

func checkColumnName(s string) error {
	if strings.Contains(s, ".") {
		return errors.New("name the column alone, without a table, schema or alias")
	}
	return checkIdentifier(s)
}

func checkIdentifier(s string) error {
	switch {
	case s == "" || strings.TrimSpace(s) != s:
		return errors.New("an empty name, or blanks around it: want name or schema.name")
	case strings.ContainsRune(s, '"'):
		return errors.New(`write the name without quotes: sweeprail quotes every identifier itself, exactly as written (so it is case-sensitive)`)
	case strings.ContainsFunc(s, unicode.IsControl):
		return errors.New("the name holds a control character")
	}
	return nil
}
