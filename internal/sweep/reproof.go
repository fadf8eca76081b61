package sweep

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// SchemaChangedCode is the answer's error code for a pass stopped by schema-changed.
const SchemaChangedCode = string(wire.StopSchemaChanged)

// SchemaChangedError is a pass whose catalog facts changed since it was proven and whose check,
// run again against the live schema, refuses it: it deleted nothing.
type SchemaChangedError struct {
	Change wire.SchemaChange
}

func (e *SchemaChangedError) Error() string {
	return fmt.Sprintf("the schema changed since the pass was proven (%s), and its check refuses it now, so it deleted nothing: %s",
		strings.Join(e.Change.Changed, "; "), e.Change.Refusal)
}

// reprove compares the catalog facts the pass was proven under with the live catalog's, in one
// read, before its first batch. Unchanged, or changed and proven again by the check (whose
// fingerprint it then adopts), the pass goes on: nil. Changed and refused, it is a
// *SchemaChangedError. A pass never proven (a Runner without Proofs, or a pass the boot refused,
// which never runs) is not compared.
func (pr *passRun) reprove() error {
	proofs := pr.r.cfg.Proofs
	if proofs == nil {
		return nil
	}
	was, ok := proofs.Of(pr.of.sweep, pr.p.Name)
	if !ok {
		return nil
	}
	now, err := pr.readFingerprint()
	if err != nil {
		return err
	}
	if now.Sum == was.Sum {
		return nil
	}
	changed := was.Changes(now)
	// The check plans every statement of the pass, each under its own timeouts, within what is
	// left of the run's budget (a statement timeout at least, so a spent budget still answers).
	left := max(pr.deadline.Sub(pr.r.cfg.Now()), pr.r.cfg.Settings.StatementTimeout)
	ctx, cancel := context.WithTimeout(pr.db, left)
	defer cancel()
	r, err := proofs.Reprove(ctx, pr.of.sweep, pr.p, pr.cutoff)
	if err != nil {
		return err
	}
	for _, w := range r.Warnings {
		pr.log.Warn("sweep policy, re-proved", "pass", pr.p.Name, "warning", w)
	}
	if r.Refusal == nil {
		pr.r.cfg.Metrics.Reproof(pr.of.sweep, pr.p.Name, false)
		pr.log.Info("schema changed since the pass was proven; proven again", "pass", pr.p.Name, "changed", changed)
		return nil
	}
	pr.r.cfg.Metrics.Reproof(pr.of.sweep, pr.p.Name, true)
	// What changed is named against the fingerprint the refused check read, which is the
	// schema it refused.
	if c := was.Changes(r.Proven); len(c) > 0 {
		changed = c
	}
	return &SchemaChangedError{Change: wire.SchemaChange{Changed: changed, Refusal: r.Refusal.Error()}}
}

// proven runs the pass by run once reprove lets it: a pass its check now refuses stops with
// schema-changed, and one whose catalog cannot be read with batch-error, neither deleting a row.
func (pr *passRun) proven(run func() (wire.PassResult, error)) (wire.PassResult, error) {
	err := pr.reprove()
	if err == nil {
		return run()
	}
	out := wire.PassResult{Pass: pr.p.Name, Children: childRows(pr.p.DeleteWith, make([]int64, len(pr.p.DeleteWith))), StopReason: wire.StopBatchError}
	var changed *SchemaChangedError
	if errors.As(err, &changed) {
		out.StopReason, out.SchemaChanged = wire.StopSchemaChanged, &changed.Change
		return out, err
	}
	return out, fmt.Errorf("compare the schema with the pass's proof: %w", err)
}

// readFingerprint reads the pass's fingerprint in a read-only transaction under the batch's
// timeouts and search_path: reading a table's definitions waits on a lock held on it (a
// migration's ACCESS EXCLUSIVE), and that wait gives up as a batch's would, with 55P03 after
// the lock timeout, not after the statement timeout.
func (pr *passRun) readFingerprint() (statement.Fingerprint, error) {
	s := pr.r.cfg.Settings
	ctx, cancel := context.WithTimeout(pr.db, s.StatementTimeout)
	defer cancel()
	return readFingerprint(ctx, pr.r.cfg.Pool, statement.Timeouts{Statement: s.StatementTimeout, Lock: s.LockTimeout}, pr.p)
}

// readFingerprint is passRun.readFingerprint on db, under timeouts t.
func readFingerprint(ctx context.Context, db txBeginner, t statement.Timeouts, p policy.Pass) (statement.Fingerprint, error) {
	var f statement.Fingerprint
	err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := t.Set(ctx, tx); err != nil {
			return err
		}
		var err error
		f, err = statement.ReadFingerprint(ctx, tx, p)
		return err
	})
	return f, err
}

// txBeginner is what a transaction begins on: a pool or one of its connections.
type txBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}
