package partition

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// DropOptions bound and shape one Drop.
type DropOptions struct {
	// LockTimeout bounds every lock wait of every statement (required): a partition someone holds
	// costs an error (SQLSTATE 55P03), never a hang.
	LockTimeout time.Duration
	// StatementTimeout bounds each statement; zero leaves the server's setting.
	StatementTimeout time.Duration
	// KeepDetached detaches the partition and keeps it as a table of its own.
	KeepDetached bool
	// NoConcurrently detaches plainly even where DETACH … CONCURRENTLY is allowed.
	NoConcurrently bool
	// Definer, when set, is the table's drop function (FindDefiner): Drop calls it, in one
	// transaction under the timeouts, instead of running DETACH and DROP itself, so a role that
	// does not own the table needs only EXECUTE on it. Its detach is plain, never CONCURRENTLY,
	// and the cutoff is its own (Window), not the caller's.
	Definer string
}

// Outcome says what Drop did.
type Outcome struct {
	// Partition is the partition's name when Drop came to it.
	Partition string
	// Gone: the partition was no longer a partition of its table (dropped or detached by someone
	// else since it was listed), and Drop did nothing.
	Gone bool
	// Finalized: an interrupted DETACH … CONCURRENTLY was finished with DETACH … FINALIZE.
	Finalized bool
	// Concurrently: the partition was detached with DETACH … CONCURRENTLY.
	Concurrently bool
	// Detached and Dropped say what became of it; Dropped is false with KeepDetached.
	Detached bool
	Dropped  bool
}

// IncompleteError is Drop's error when the partition was left between states: detach-pending (a
// DETACH … CONCURRENTLY interrupted in its second transaction, and the FINALIZE that followed
// failed too) or detached but not dropped. Statement finishes the job; Err is the failure, a
// *pgconn.PgError when the server's.
type IncompleteError struct {
	Partition string
	// State is "detach-pending" or "detached, not dropped".
	State     string
	Statement string
	Err       error
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("partition %s left %s (finish with: %s): %v", e.Partition, e.State, e.Statement, e.Err)
}

func (e *IncompleteError) Unwrap() error { return e.Err }

// ErrDefaultPartition is returned by Drop for the DEFAULT partition, which holds rows of any age.
var ErrDefaultPartition = errors.New("the default partition is never dropped")

// Drop detaches partition p from its table and drops it (or keeps it detached), each statement
// under opts.LockTimeout, on one connection of pool, by the partition's state (by OID) as Drop
// finds it:
//
//	gone from its table   nothing to do (Outcome.Gone)
//	opts.Definer          the drop function, which refuses (42501) a partition past its own cutoff
//	detach-pending        DETACH … FINALIZE, then DROP TABLE, in one transaction
//	concurrent allowed    a lock probe, DETACH … CONCURRENTLY (finalized if cut), DROP TABLE
//	else                  DETACH PARTITION and DROP TABLE in one transaction: both or neither
//
// CONCURRENTLY is allowed with no default partition, no other detach pending and, for a drop,
// nothing outside the table depending on the partition. Errors name the partition and wrap the
// server's *pgconn.PgError; one left between states is an *IncompleteError naming the statement
// that finishes it.
func Drop(ctx context.Context, pool *pgxpool.Pool, p Partition, opts DropOptions) (out Outcome, err error) {
	verb := "drop"
	if opts.KeepDetached {
		verb = "detach"
	}
	out.Partition = p.Name
	defer func() {
		var inc *IncompleteError
		if err != nil && !errors.As(err, &inc) {
			err = fmt.Errorf("%s partition %s: %w", verb, out.Partition, err)
		}
	}()
	switch {
	case p.Default:
		return out, ErrDefaultPartition
	case opts.LockTimeout <= 0:
		return out, errors.New("a lock timeout is required")
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return out, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	d := dropper{conn: conn.Conn(), keep: opts.KeepDetached, opts: opts}
	st, err := d.state(ctx, p)
	if err != nil || st.gone {
		out.Gone = st.gone
		return out, err
	}
	out.Partition = st.name
	d.st = st

	if opts.Definer != "" {
		// The function finalizes a detach-pending partition itself.
		if err := d.viaDefiner(ctx, p); err != nil {
			return out, err
		}
		out.Finalized, out.Detached, out.Dropped = st.pending, true, !d.keep
		return out, nil
	}
	if st.pending {
		if err := d.finalize(ctx); err != nil {
			return out, &IncompleteError{Partition: st.name, State: "detach-pending", Statement: st.finalize(), Err: err}
		}
		out.Finalized, out.Detached, out.Dropped = true, true, !d.keep
		return out, nil
	}
	if opts.NoConcurrently || st.hasDefault || st.otherPending || !d.keep && len(st.dependents) > 0 {
		if err := d.plain(ctx); err != nil {
			return out, err
		}
		out.Detached, out.Dropped = true, !d.keep
		return out, nil
	}

	if err := d.probe(ctx); err != nil {
		return out, err
	}
	if err := d.concurrently(ctx); err != nil {
		// The first transaction may have committed: the partition is then detach-pending.
		after, serr := d.stateAfter(ctx, pool, p)
		if serr != nil {
			return out, errors.Join(err, serr)
		}
		if !after.pending {
			// A default partition created, or another partition left detach-pending, since the
			// state was read: the server refuses CONCURRENTLY (55000), and plainly is the way.
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == sqlstateNotInPrerequisiteState && !after.gone && !d.conn.IsClosed() {
				if err := d.plain(ctx); err != nil {
					return out, err
				}
				out.Detached, out.Dropped = true, !d.keep
				return out, nil
			}
			return out, err
		}
		if ferr := d.finalize(ctx); ferr != nil {
			// The detach's error first: errors.As finds its *pgconn.PgError.
			return out, &IncompleteError{Partition: st.name, State: "detach-pending", Statement: st.finalize(),
				Err: errors.Join(err, fmt.Errorf("finalize: %w", ferr))}
		}
		out.Finalized, out.Detached, out.Dropped = true, true, !d.keep
		return out, nil
	}
	out.Concurrently, out.Detached = true, true
	if d.keep {
		return out, nil
	}
	if err := d.inTx(ctx, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, "DROP TABLE "+st.name); return err }); err != nil {
		return out, &IncompleteError{Partition: st.name, State: "detached, not dropped", Statement: "DROP TABLE " + st.name, Err: err}
	}
	out.Dropped = true
	return out, nil
}

// dropper runs the statements of one Drop on one connection. Its timeouts are never the
// session's: every statement but the concurrent detach runs in a transaction under SET LOCAL
// (inTx), and the concurrent detach, which no transaction may hold, is bounded by a cancel
// request (concurrently). Behind a transaction pooler a session setting stays on a server
// connection that other clients are handed next.
type dropper struct {
	conn *pgx.Conn
	keep bool
	opts DropOptions
	st   state
	// cancelSent: concurrently sent a cancel request, whose signal may reach the server after
	// the detach it was meant for has ended, and cut the next statement instead.
	cancelSent bool
}

// inTx runs f in a transaction under the lock timeout, and the statement timeout when one is set.
func (d *dropper) inTx(ctx context.Context, f func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, d.conn, func(tx pgx.Tx) error {
		if err := (statement.Timeouts{Statement: d.opts.StatementTimeout, Lock: d.opts.LockTimeout}).Set(ctx, tx); err != nil {
			return err
		}
		return f(tx)
	})
}

// concurrentBound is how long a DETACH … CONCURRENTLY may take before it is cancelled: its two
// lock waits (the table's lock, then every transaction that may still see the partition), each
// under the lock timeout; the catalog changes between them take no time.
func (d *dropper) concurrentBound() time.Duration {
	b := 2 * d.opts.LockTimeout
	if d.opts.StatementTimeout > 0 {
		b = min(b, d.opts.StatementTimeout)
	}
	return b
}

// concurrently runs the DETACH … CONCURRENTLY with no setting of its own, and sends the server a
// cancel request (which a pooler forwards to the server connection running it) when it runs past
// concurrentBound: a detach that waits behind a long reader then fails as under a lock timeout,
// and may leave the partition detach-pending, which Drop finalizes.
func (d *dropper) concurrently(ctx context.Context) error {
	var fired atomic.Bool
	sent := make(chan struct{})
	bound := d.concurrentBound()
	timer := time.AfterFunc(bound, func() {
		defer close(sent)
		fired.Store(true)
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = d.conn.PgConn().CancelRequest(cctx)
	})
	_, err := d.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DETACH PARTITION %s CONCURRENTLY", d.st.parent, d.st.name))
	if !timer.Stop() {
		// The cancel was sent, or is on its way: let it land before the next statement.
		<-sent
		d.cancelSent = true
	}
	if err != nil && fired.Load() {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == sqlstateQueryCanceled {
			return fmt.Errorf("DETACH … CONCURRENTLY cancelled after %s waiting for locks (twice the lock timeout): %w", bound, err)
		}
	}
	return err
}

// sqlstateQueryCanceled is what a cancel request makes the statement it cut raise.
const sqlstateQueryCanceled = "57014"

// state is a partition as the catalog has it when Drop comes to it.
type state struct {
	gone         bool
	name, parent string
	pending      bool
	hasDefault   bool
	otherPending bool
	dependents   []string
}

func (s state) finalize() string {
	return fmt.Sprintf("ALTER TABLE %s DETACH PARTITION %s FINALIZE", s.parent, s.name)
}

// stateSQL reads partition $1 of table $2. dependents are the objects outside the partition that
// a DROP TABLE … RESTRICT refuses to drop it under: foreign keys referencing the partition itself
// and views on it, but not the foreign keys the server cloned from one referencing the whole
// table (conparentid set), which the detach removes.
const stateSQL = `
SELECT format('%I.%I', n.nspname, c.relname), format('%I.%I', pn.nspname, pc.relname), i.inhdetachpending,
       pt.partdefid <> 0 AND pt.partdefid <> c.oid,
       EXISTS (SELECT 1 FROM pg_inherits o WHERE o.inhparent = i.inhparent AND o.inhdetachpending AND o.inhrelid <> c.oid),
       ARRAY(SELECT DISTINCT pg_describe_object(d.classid, d.objid, 0) FROM pg_depend d
             WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = c.oid AND d.deptype = 'n'
               AND NOT (d.classid = 'pg_constraint'::regclass AND EXISTS (
                     SELECT 1 FROM pg_constraint k WHERE k.oid = d.objid AND (k.conparentid <> 0 OR k.conrelid = c.oid)))
               AND NOT (d.classid = 'pg_rewrite'::regclass AND EXISTS (
                     SELECT 1 FROM pg_rewrite r WHERE r.oid = d.objid AND r.ev_class = c.oid))
             ORDER BY 1)
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_class pc ON pc.oid = i.inhparent
JOIN pg_namespace pn ON pn.oid = pc.relnamespace
JOIN pg_partitioned_table pt ON pt.partrelid = i.inhparent
WHERE i.inhrelid = $1 AND i.inhparent = $2`

func readState(ctx context.Context, q Querier, p Partition) (state, error) {
	var s state
	err := q.QueryRow(ctx, stateSQL, p.OID, p.ParentOID).Scan(&s.name, &s.parent, &s.pending, &s.hasDefault, &s.otherPending, &s.dependents)
	if errors.Is(err, pgx.ErrNoRows) {
		return state{gone: true}, nil
	}
	if err != nil {
		return s, fmt.Errorf("read partition state: %w", err)
	}
	return s, nil
}

func (d *dropper) state(ctx context.Context, p Partition) (state, error) {
	return readState(ctx, d.conn, p)
}

// stateAfter reads the state after a failed statement: on the connection when it survived, else
// on another (a cancelled statement closes pgx's connection).
func (d *dropper) stateAfter(ctx context.Context, pool *pgxpool.Pool, p Partition) (state, error) {
	ctx = context.WithoutCancel(ctx)
	if !d.conn.IsClosed() {
		return readState(ctx, d.conn, p)
	}
	return readState(ctx, pool, p)
}

// finalize finishes an interrupted DETACH … CONCURRENTLY and drops the partition, in one
// transaction. It reconnects when the connection is gone (the interrupted detach took it).
func (d *dropper) finalize(ctx context.Context) error {
	if d.conn.IsClosed() {
		return errors.New("connection lost")
	}
	err := d.finalizeOnce(ctx)
	var pgErr *pgconn.PgError
	if d.cancelSent && errors.As(err, &pgErr) && pgErr.Code == sqlstateQueryCanceled {
		// The late signal of concurrently's cancel, not a failure of the finalize: once more.
		d.cancelSent = false
		err = d.finalizeOnce(ctx)
	}
	return err
}

func (d *dropper) finalizeOnce(ctx context.Context) error {
	return d.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, d.st.finalize()); err != nil {
			return err
		}
		return d.dropIn(ctx, tx)
	})
}

// viaDefiner has the table's drop function detach and drop the partition, in one transaction.
func (d *dropper) viaDefiner(ctx context.Context, p Partition) error {
	return d.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT "+d.opts.Definer+"($1::oid::regclass, $2)", p.OID, d.keep)
		return err
	})
}

// plain detaches and drops in one transaction.
func (d *dropper) plain(ctx context.Context) error {
	return d.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DETACH PARTITION %s", d.st.parent, d.st.name)); err != nil {
			return err
		}
		return d.dropIn(ctx, tx)
	})
}

func (d *dropper) dropIn(ctx context.Context, tx pgx.Tx) error {
	if d.keep {
		return nil
	}
	_, err := tx.Exec(ctx, "DROP TABLE "+d.st.name)
	return err
}

// probe takes the partition's ACCESS EXCLUSIVE lock, which the detach's second transaction needs,
// and rolls back at once: a session holding the partition fails the drop here, before the first
// transaction marks it detach-pending.
func (d *dropper) probe(ctx context.Context) error {
	err := d.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("LOCK TABLE %s IN ACCESS EXCLUSIVE MODE", d.st.name)); err != nil {
			return err
		}
		return errProbed
	})
	if errors.Is(err, errProbed) {
		return nil
	}
	return err
}

// errProbed rolls the probe's transaction back once it holds the lock.
var errProbed = errors.New("probed")

// sqlstateNotInPrerequisiteState is what the server raises for a DETACH … CONCURRENTLY it refuses.
const sqlstateNotInPrerequisiteState = "55000"
