package sweep

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// A foreign archive commits on its own server as the local transaction commits: what its remote
// table does then (a deferred constraint trigger, say) comes after the batch's proof. So each
// committed batch is read back, by key and digest; rows missing or changed halt the sweep, in
// sweeprail.archive_halt, so that no later batch (of this run or any other) exposes more rows
// until an operator has looked.

// ArchiveLostError is a foreign archive that, read back after batch Batch of pass Pass
// committed, lacks rows the batch deleted (Missing) or holds them otherwise (Altered), or that
// could not be read back at all (Err). The rows are gone from the swept table.
type ArchiveLostError struct {
	Sweep, Pass, Archive, Table, Key string
	Batch                            int
	Missing, Altered                 []string
	Err                              error
}

func (e *ArchiveLostError) Error() string {
	what := fmt.Sprintf("foreign archive %q does not hold rows of %q that batch %d of pass %q deleted and committed", e.Archive, e.Table, e.Batch, e.Pass)
	switch {
	case e.Err != nil:
		what = fmt.Sprintf("foreign archive %q could not be read back after batch %d of pass %q committed (%v): the batch's rows of %q may be lost", e.Archive, e.Batch, e.Pass, e.Err, e.Table)
	case len(e.Missing) > 0 && len(e.Altered) > 0:
		what += fmt.Sprintf(": missing %s; changed %s", namedKeys(e.Key, e.Missing), namedKeys(e.Key, e.Altered))
	case len(e.Missing) > 0:
		what += ": missing " + namedKeys(e.Key, e.Missing)
	default:
		what += ": changed " + namedKeys(e.Key, e.Altered)
	}
	return what + fmt.Sprintf("; something on the remote table acted at its commit (a deferred trigger, say). Sweep %q is halted: "+
		"no batch of it runs until an operator restores the rows, removes the cause, and releases it: DELETE FROM sweeprail.archive_halt WHERE sweep = %s;",
		e.Sweep, "'"+strings.ReplaceAll(e.Sweep, "'", "''")+"'")
}

func (e *ArchiveLostError) Unwrap() error { return e.Err }

// HaltedError is a run of a halted sweep: it ran no batch.
type HaltedError struct{ Halt history.Halt }

func (e *HaltedError) Error() string {
	return fmt.Sprintf("sweep %q is halted since %s (run %s), no batch runs: %s", e.Halt.Sweep, e.Halt.At.UTC().Format("2006-01-02T15:04:05Z"), e.Halt.RunID, e.Halt.Message)
}

// readBack reads committed batch b back from a foreign archive, in a transaction of its own (a
// remote transaction begun after the batch's commit): nil when it holds every row as it left,
// an *ArchiveLostError otherwise, with b's lost rows counted (all of them when it could not be
// read). Any other archive (or a nil archiver) is proven in the batch.
func (pr *passRun) readBack(b *batchResult) error {
	a := pr.aids.arch
	if a == nil || !a.foreign || b.n == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(pr.db, pr.r.cfg.Settings.StatementTimeout)
	defer cancel()
	var missing, altered []string
	err := pgx.BeginTxFunc(ctx, pr.r.cfg.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		if err := (statement.Timeouts{Statement: pr.r.cfg.Settings.StatementTimeout}).Set(ctx, tx); err != nil {
			return err
		}
		missing, altered, err = a.readArchive(ctx, tx, *b)
		return err
	})
	if err == nil && len(missing) == 0 && len(altered) == 0 {
		return nil
	}
	b.lost = int64(len(missing) + len(altered))
	if err != nil {
		b.lost = b.n - b.recovered
	}
	return &ArchiveLostError{Sweep: pr.of.sweep, Pass: pr.p.Name, Archive: pr.p.ArchiveTo, Table: pr.p.Table, Key: a.key,
		Batch: pr.of.batchBase + pr.out.BatchCount, Missing: missing, Altered: altered, Err: err}
}

// halt keeps the halt of a sweep whose archive lost rows: in the history, or, when it has none
// or cannot be written, in the runner until a later run writes it.
func (r *Runner) halt(db context.Context, log *slog.Logger, runID string, lost *ArchiveLostError) {
	h := history.Halt{Sweep: lost.Sweep, Pass: lost.Pass, RunID: runID, Message: lost.Error(), At: r.cfg.Now()}
	log.Error("sweep halted: its archive lost a committed batch's rows", "pass", lost.Pass, "err", lost)
	r.haltMu.Lock()
	r.halts[h.Sweep] = h
	r.haltMu.Unlock()
	r.writeHalts(db, log, h.Sweep)
}

// writeHalts writes sweep's halt kept in the runner, if any, and forgets it once written.
func (r *Runner) writeHalts(db context.Context, log *slog.Logger, sweep string) {
	r.haltMu.Lock()
	h, ok := r.halts[sweep]
	r.haltMu.Unlock()
	if !ok || r.cfg.History == nil {
		return
	}
	if err := r.record(db, log, func(ctx context.Context) error { return r.cfg.History.WriteHalt(ctx, h) }); err == nil {
		r.haltMu.Lock()
		delete(r.halts, sweep)
		r.haltMu.Unlock()
	}
}

// halted returns the error a run of a halted sweep stops with before its first batch, nil for a
// sweep that may run; a halt that cannot be read stops it too.
func (r *Runner) halted(db context.Context, log *slog.Logger, sweep string) error {
	r.writeHalts(db, log, sweep)
	r.haltMu.Lock()
	h, ok := r.halts[sweep]
	r.haltMu.Unlock()
	if ok {
		return &HaltedError{Halt: h}
	}
	if r.cfg.History == nil {
		return nil
	}
	var read *history.Halt
	if err := r.record(db, log, func(ctx context.Context) (err error) {
		read, err = r.cfg.History.ReadHalt(ctx, sweep)
		return err
	}); err != nil {
		return fmt.Errorf("read whether the sweep is halted: %w", err)
	}
	if read != nil {
		return &HaltedError{Halt: *read}
	}
	return nil
}
