package statement

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// FingerprintForm reads a pass's fingerprint (sql/fingerprint.sql): the md5 of its facts, and
// the facts, sorted.
var FingerprintForm = Form{SQL: render("fingerprint", form{params: Params{Tables}}), Params: Params{Tables}}

// Fingerprint is the catalog facts a pass's proof rests on, as one catalog read finds them: the
// columns and types of the tables the pass touches, the foreign keys from and onto them with
// their ON DELETE actions, their triggers, rules and indexes.
type Fingerprint struct {
	// Sum is the md5 of Facts; two fingerprints with one Sum hold the same facts.
	Sum string
	// Facts are the facts, one line each ("foreign key … on …: FOREIGN KEY …"), sorted.
	Facts []string
}

// Changes names what differs from f to g: each fact g holds and f does not ("added: …"), then
// each f holds and g does not ("removed: …"); none when the sums agree.
func (f Fingerprint) Changes(g Fingerprint) []string {
	if f.Sum == g.Sum {
		return nil
	}
	var out []string
	for _, x := range g.Facts {
		if !slices.Contains(f.Facts, x) {
			out = append(out, "added: "+x)
		}
	}
	for _, x := range f.Facts {
		if !slices.Contains(g.Facts, x) {
			out = append(out, "removed: "+x)
		}
	}
	return out
}

// FingerprintTables are the tables pass p touches, as its statements name them: its own, its
// keep guards', its delete_with children's, its cascades' and its archive's, each once.
func FingerprintTables(p policy.Pass) []string {
	var names []string
	add := func(name string) {
		if q := QuoteName(name); name != "" && !slices.Contains(names, q) {
			names = append(names, q)
		}
	}
	add(p.Table)
	for _, g := range p.Guards {
		add(g.Table)
	}
	for _, c := range p.DeleteWith {
		add(c.Table)
	}
	for _, c := range p.Cascades {
		add(c)
	}
	add(p.ArchiveTo)
	return names
}

// Querier is what a catalog read runs on: a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ReadFingerprint reads pass p's fingerprint in one catalog read.
func ReadFingerprint(ctx context.Context, q Querier, p policy.Pass) (Fingerprint, error) {
	var f Fingerprint
	args := FingerprintForm.Params.Bind(Args{Tables: FingerprintTables(p)})
	if err := q.QueryRow(ctx, FingerprintForm.SQL, args...).Scan(&f.Sum, &f.Facts); err != nil {
		return Fingerprint{}, fmt.Errorf("read the schema's fingerprint: %w", err)
	}
	return f, nil
}
