package sweep

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// CommitLostCode is the answer's error code when the reply to a batch's COMMIT was lost: the
// pass's lostCommit says whether the batch committed.
const CommitLostCode = "commit-lost"

// CommitLostError is a batch whose COMMIT was sent and whose reply never came back: the
// connection died (a cut, a reset, a pooler's restart) or stopped answering within the batch's
// deadline. Lost is what the runner then learned, on a fresh connection.
type CommitLostError struct {
	Lost wire.LostCommit
	Err  error
}

func (e *CommitLostError) Error() string {
	return fmt.Sprintf("the reply to batch %d's commit was lost (%v): the batch %s", e.Lost.Batch, e.Err, e.describe())
}

func (e *CommitLostError) describe() string {
	switch e.Lost.Outcome {
	case wire.BatchCommitted:
		return "committed, and its rows are counted"
	case wire.BatchRolledBack:
		return "rolled back"
	}
	return "outcome is unknown until the sweep's next run settles it"
}

func (e *CommitLostError) Unwrap() error { return e.Err }

// batchNumber is the number of the batch the pass runs now, from 1, in its record.
func (pr *passRun) batchNumber() int { return pr.of.batchBase + pr.out.BatchCount + 1 }

// lostCommit turns a failed COMMIT of batch b into the error the pass stops with. The server's
// own refusal (a deferred constraint, a serialization failure) rolled the batch back; any other
// failure left the outcome with the server, and the runner asks it, on a connection of the
// pool's own, whether the batch's record is there. That question is bounded by the statement
// timeout: when it cannot be answered, the outcome is unknown, and the next run settles it.
func (pr *passRun) lostCommit(b batchResult, cerr *history.CommitError) error {
	var pgErr *pgconn.PgError
	if errors.As(cerr, &pgErr) || pr.r.cfg.History == nil {
		return cerr
	}
	err := cerr.Err
	lost := wire.LostCommit{Batch: pr.batchNumber(), Rows: b.n}
	ctx, cancel := context.WithTimeout(pr.db, pr.r.cfg.Settings.StatementTimeout)
	defer cancel()
	o, serr := pr.r.cfg.History.Outcome(ctx, pr.of.id, pr.p.Name, lost.Batch, lost.Rows)
	if serr != nil {
		pr.log.Error("settle a batch whose commit's reply was lost", "pass", pr.p.Name, "batch", lost.Batch, "err", serr)
	}
	lost.Outcome = o
	return &CommitLostError{Lost: lost, Err: err}
}

// settled takes the batch b that ended the pass with err into the pass's answer when err says
// its commit's reply was lost: counted when it committed, named in LostCommit either way.
func (pr *passRun) settled(b batchResult, err error) {
	var lost *CommitLostError
	if !errors.As(err, &lost) {
		return
	}
	l := lost.Lost
	pr.out.LostCommit = &l
	if l.Outcome == wire.BatchCommitted {
		pr.tally(b)
	}
}
