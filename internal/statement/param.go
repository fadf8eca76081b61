package statement

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Param is the role of one placeholder: what a run binds there, and how the listing names it.
// A form declares its parameters once, as an ordered list (Params); its template writes
// {{.Param "name"}}, which renders as that role's $n in the list, and a run binds its
// arguments from the same list (Params.Bind), so the order is decided in one place.
type Param int

// The roles. The cutoff is always first where a form binds it: the pass's conditions name it
// as $1 (policy.CutoffParam).
const (
	// Cutoff is the cutoff instant, a timestamptz.
	Cutoff Param = iota
	// Limit is the batch size in rows.
	Limit
	// After is the first age of an index-path batch by rows.
	After
	// Resume is the first age of a resumed batch's range, whose end Set.BoundAfter reads.
	Resume
	// From and Before are the first age of a range of ages and the age it ends before.
	From
	Before
	// FirstBlock and EndBlock are a heap range's first block and the block it ends before.
	FirstBlock
	EndBlock
	// Left is the rows max_rows leaves the pass.
	Left
	// HeldKeys are the keys of the rows a healing batch found in the archive.
	HeldKeys
	// DeletedKeys are the keys an archiving batch deleted, and Digests the md5 of each deleted
	// row's text, in the same order: what the archive proof compares the archive's rows with.
	DeletedKeys
	Digests
	// Tables are the tables a pass touches, as its statements name them (a fingerprint's).
	Tables
)

// paramRoles names each role as templates write it, and says it as the listing does.
var paramRoles = [...]struct{ name, text string }{
	Cutoff:      {"cutoff", "cutoff (timestamptz: the run's reference time minus the retention)"},
	Limit:       {"limit", "batch size (rows)"},
	After:       {"after", "first age of the batch"},
	Resume:      {"resume", "first age of the batch's range"},
	From:        {"from", "first age of the range"},
	Before:      {"before", "the age it ends before"},
	FirstBlock:  {"first-block", "first and end block of the range (tid '(b,0)')"},
	EndBlock:    {"end-block", "first and end block of the range (tid '(b,0)')"},
	Left:        {"left", "rows max_rows leaves"},
	HeldKeys:    {"held-keys", "their keys"},
	DeletedKeys: {"deleted-keys", "the keys deleted"},
	Tables:      {"tables", "the tables the pass touches (text[])"},
	Digests:     {"digests", "the md5 of each deleted row's text"},
}

// cutoffPlaceholder is the cutoff's placeholder, which a condition is rendered with before it
// is placed in a form (Cutoff comes first in every list that binds it).
const cutoffPlaceholder = "$1"

// Params are a form's parameters, in placeholder order: $1 is the first.
type Params []Param

// placeholder is the $n of the role named name in ps.
func (ps Params) placeholder(name string) (string, error) {
	for i, p := range ps {
		if paramRoles[p].name == name {
			return fmt.Sprintf("$%d", i+1), nil
		}
	}
	return "", fmt.Errorf("parameter %q is not declared by this form (%s)", name, ps)
}

// String says the parameters as the listing does: "$1 cutoff (…), $2 batch size (rows)"; two
// in a row that one phrase describes are said together ("$2 and $3 first and end block …").
func (ps Params) String() string {
	var parts []string
	for i := 0; i < len(ps); i++ {
		text := paramRoles[ps[i]].text
		if i+1 < len(ps) && paramRoles[ps[i+1]].text == text {
			parts = append(parts, fmt.Sprintf("$%d and $%d %s", i+1, i+2, text))
			i++
			continue
		}
		parts = append(parts, fmt.Sprintf("$%d %s", i+1, text))
	}
	return strings.Join(parts, ", ")
}

// Args are the values a run binds, by role.
type Args struct {
	Cutoff time.Time
	// Limit is the rows the batch may delete: its size, or what max_rows leaves (Limit, Left).
	Limit int
	// From is the age the batch or its range starts at (After, Resume, From); Before the one
	// its range ends before. Each is the age column's value as pgx reads it.
	From, Before any
	// FirstBlock and EndBlock are a heap range's blocks, bound as tids '(b,0)'.
	FirstBlock, EndBlock uint32
	// Keys are an archive's keys (HeldKeys, DeletedKeys); Digests the deleted rows' digests.
	Keys, Digests []string
	// Tables are the names a fingerprint reads (Tables).
	Tables []string
}

// Bind is a's values in ps's order: the arguments of a form that declares ps.
func (ps Params) Bind(a Args) []any {
	out := make([]any, len(ps))
	for i, p := range ps {
		switch p {
		case Cutoff:
			out[i] = a.Cutoff
		case Limit, Left:
			out[i] = a.Limit
		case After, Resume, From:
			out[i] = a.From
		case Before:
			out[i] = a.Before
		case FirstBlock:
			out[i] = pgtype.TID{BlockNumber: a.FirstBlock, Valid: true}
		case EndBlock:
			out[i] = pgtype.TID{BlockNumber: a.EndBlock, Valid: true}
		case HeldKeys, DeletedKeys:
			out[i] = a.Keys
		case Tables:
			out[i] = a.Tables
		case Digests:
			out[i] = a.Digests
		}
	}
	return out
}

// Form is one statement: its SQL, the parameters it declares, and what its row answers.
type Form struct {
	// SQL is the statement as sent; "" for one the pass does not have.
	SQL string
	// Params are its placeholders' roles, $1 first.
	Params Params
	// Answer is what its row holds, for a delete form.
	Answer Answer
}

// Answer is what a delete form's row holds, in order: the rows deleted, then each column this
// says it has. A form without Row answers no row: its count is the command tag's.
type Answer struct {
	// Row says the form answers a row (a bare DELETE answers none).
	Row bool
	// Newest is the newest age deleted, where an index-path batch by rows resumes.
	Newest bool
	// Archived is the rows a healing batch's insert reported taking; Held the keys and rows (as
	// text) of those it found there already; Digests the keys an archiving batch deleted and
	// the md5 of each deleted row's text, in key order, which the archive proof compares.
	Archived, Held, Digests bool
	// Children is how many delete_with children answer the rows they lost.
	Children int
}
