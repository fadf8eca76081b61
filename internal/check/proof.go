package check

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// Proofs are the fingerprints of the passes a check proved: the catalog facts each proof rests
// on (statement.Fingerprint), read before the pass was checked, so a change made during the
// check shows at the next comparison. A run compares them with the live catalog and re-proves a
// pass whose facts changed (Reprove). Safe for concurrent use.
type Proofs struct {
	pool *pgxpool.Pool
	pol  *policy.Policy

	mu     sync.Mutex
	byPass map[[2]string]statement.Fingerprint
}

// Prove validates the policy as Policy does, and returns the fingerprint of every pass it
// proved. A refused pass has none; warnings and err are Policy's.
func Prove(ctx context.Context, pool *pgxpool.Pool, p *policy.Policy) (*Proofs, []string, error) {
	ps := &Proofs{pool: pool, pol: p, byPass: map[[2]string]statement.Fingerprint{}}
	warnings, err := ps.prove(ctx)
	return ps, warnings, err
}

// Of is the fingerprint pass of sweep was last proven under; false when it never was.
func (ps *Proofs) Of(sweep, pass string) (statement.Fingerprint, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	f, ok := ps.byPass[[2]string{sweep, pass}]
	return f, ok
}

func (ps *Proofs) adopt(sweep, pass string, f statement.Fingerprint) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.byPass[[2]string{sweep, pass}] = f
}

// Reproof is what a pass's check found against the live schema, run again.
type Reproof struct {
	// Proven is the fingerprint the check read before it ran: adopted when Refusal is nil.
	Proven statement.Fingerprint
	// Warnings are the check's warnings for the pass.
	Warnings []string
	// Refusal joins the check's refusals of the pass (each a *policy.Error, its message the way
	// out); nil when the pass is proven again.
	Refusal error
}

// Reprove runs pass p's check of sweep again against the live schema, the cutoff its run would
// delete by, and adopts the fingerprint it read first when the pass is proven. The error is the
// database's, which leaves the fingerprint as it was.
func (ps *Proofs) Reprove(ctx context.Context, sweep string, p policy.Pass, cutoff time.Time) (Reproof, error) {
	c := newChecker(ps.pool, ps.pol)
	fp, found, err := c.provePass(ctx, sweep, p, cutoff)
	if err != nil {
		return Reproof{}, fmt.Errorf("re-prove sweep %q pass %q: %w", sweep, p.Name, err)
	}
	r := Reproof{Proven: fp, Warnings: found.warnings, Refusal: errors.Join(found.problems...)}
	if r.Refusal == nil {
		ps.adopt(sweep, p.Name, fp)
	}
	return r, nil
}

// prove checks every pass of the policy, keeping the fingerprint of each it proves.
func (ps *Proofs) prove(ctx context.Context) ([]string, error) {
	c := newChecker(ps.pool, ps.pol)
	if errs := c.static(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var now time.Time
	if err := ps.pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return nil, fmt.Errorf("check policy: read database clock: %w", err)
	}
	var found findings
	var proven []provenPass
	for _, s := range policy.Normalize(ps.pol.Specs) {
		for _, p := range s.Passes {
			// The cutoff comes from the database clock, as a run's does; the plan hardly depends
			// on it, but a realistic value keeps the planner's estimates honest.
			fp, f, err := c.checkPass(ctx, s.Name, p, now.Add(-p.Retention))
			if err != nil {
				return nil, fmt.Errorf("check policy: sweep %q pass %q: %w", s.Name, p.Name, err)
			}
			found.add(f)
			if !f.refused() {
				proven = append(proven, provenPass{s.Name, p.Name, fp})
			}
		}
	}
	advice, err := c.adviseAgeIndexes(ctx, found.unserved)
	if err != nil {
		return nil, fmt.Errorf("check policy: %w", err)
	}
	found.add(advice)
	for _, pp := range proven {
		if !advised(advice, pp.sweep, pp.pass) {
			ps.adopt(pp.sweep, pp.pass, pp.fp)
		}
	}
	return found.warnings, errors.Join(found.problems...)
}

type provenPass struct {
	sweep, pass string
	fp          statement.Fingerprint
}

// checkPass reads pass p's fingerprint, then checks it; the fingerprint comes first, so a
// change made while the check runs is a change at the next comparison.
func (c *checker) checkPass(ctx context.Context, sweep string, p policy.Pass, cutoff time.Time) (statement.Fingerprint, findings, error) {
	fp, err := statement.ReadFingerprint(ctx, c.pool, p)
	if err != nil {
		return statement.Fingerprint{}, findings{}, err
	}
	f, err := c.pass(ctx, sweep, p, cutoff)
	return fp, f, err
}

// provePass is checkPass for one pass on its own: the advice on an unserved age index, which
// the whole policy's check gives once for all passes, refuses it here.
func (c *checker) provePass(ctx context.Context, sweep string, p policy.Pass, cutoff time.Time) (statement.Fingerprint, findings, error) {
	fp, found, err := c.checkPass(ctx, sweep, p, cutoff)
	if err != nil {
		return statement.Fingerprint{}, findings{}, err
	}
	advice, err := c.adviseAgeIndexes(ctx, found.unserved)
	if err != nil {
		return statement.Fingerprint{}, findings{}, err
	}
	found.add(advice)
	return fp, found, nil
}

// advised reports whether the advice refused pass of sweep.
func advised(advice findings, sweep, pass string) bool {
	for _, e := range advice.problems {
		var pe *policy.Error
		if errors.As(e, &pe) && pe.Sweep == sweep && pe.Pass == pass {
			return true
		}
	}
	return false
}
