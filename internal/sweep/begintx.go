package sweep

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pendingTx is a batch's transaction whose begin (statement.BatchTransaction.Begin) has not been
// sent: it goes out in one pipeline with the transaction's first statement, so a batch spends no
// round trip on it, which on a network between the API and the server is a round trip's time
// of every batch. From then on it is pgx's transaction. An error of the begin's statements is
// the first statement's error.
type pendingTx struct {
	conn  *pgx.Conn
	begin []string
	// tx is pgx's transaction once the begin went out; nil before.
	tx pgx.Tx
}

var _ pgx.Tx = (*pendingTx)(nil)

// newPendingTx returns the transaction that begin begins on conn, not yet sent.
func newPendingTx(conn *pgx.Conn, begin []string) *pendingTx {
	return &pendingTx{conn: conn, begin: begin}
}

// send sends the begin and then b's queries in one pipeline, reads the begin's results, and
// returns the rest, b's. An error of the begin stays with them (pgx's batch results keep their
// first error), so the first read of b's reports it.
func (t *pendingTx) send(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	all := &pgx.Batch{}
	all.BeginTx(pgx.TxOptions{BeginQuery: t.begin[0]})
	for _, s := range t.begin[1:] {
		all.Queue(s)
	}
	all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
	br := t.conn.SendBatch(ctx, all)
	t.tx = br.Tx()
	for range t.begin {
		if _, err := br.Exec(); err != nil {
			break
		}
	}
	return br
}

// open sends the begin alone, for the calls that cannot ride with it.
func (t *pendingTx) open(ctx context.Context) error {
	if t.tx != nil {
		return nil
	}
	return t.send(ctx, &pgx.Batch{}).Close()
}

// Exec runs sql, behind the begin if it is the transaction's first statement.
func (t *pendingTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.tx != nil {
		return t.tx.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.send(ctx, b)
	tag, err := br.Exec()
	return tag, errors.Join(err, closeAfter(err, br))
}

// Query runs sql, behind the begin if it is the transaction's first statement.
func (t *pendingTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.tx != nil {
		return t.tx.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.send(ctx, b)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return rows, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs sql, behind the begin if it is the transaction's first statement.
func (t *pendingTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.tx != nil {
		return t.tx.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.send(ctx, b)
	return batchRow{row: br.QueryRow(), br: br}
}

// SendBatch sends b, behind the begin if it holds the transaction's first statements.
func (t *pendingTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.tx != nil {
		return t.tx.SendBatch(ctx, b)
	}
	return t.send(ctx, b)
}

// Commit commits the transaction; one that never began has nothing to commit.
func (t *pendingTx) Commit(ctx context.Context) error {
	if t.tx == nil {
		return errors.New("commit: the transaction never began")
	}
	return t.tx.Commit(ctx)
}

// Rollback rolls the transaction back; one that never began has nothing to undo.
func (t *pendingTx) Rollback(ctx context.Context) error {
	if t.tx == nil {
		return nil
	}
	return t.tx.Rollback(ctx)
}

// Begin starts a savepoint, after the begin.
func (t *pendingTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.open(ctx); err != nil {
		return nil, err
	}
	return t.tx.Begin(ctx)
}

// CopyFrom copies rows in, after the begin.
func (t *pendingTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.open(ctx); err != nil {
		return 0, err
	}
	return t.tx.CopyFrom(ctx, table, columns, src)
}

// Prepare prepares a statement, after the begin.
func (t *pendingTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.open(ctx); err != nil {
		return nil, err
	}
	return t.tx.Prepare(ctx, name, sql)
}

// LargeObjects is the connection's large objects, in the transaction once it began.
func (t *pendingTx) LargeObjects() pgx.LargeObjects {
	if t.tx == nil {
		if err := t.open(context.Background()); err != nil {
			return pgx.LargeObjects{}
		}
	}
	return t.tx.LargeObjects()
}

// Conn is the connection the transaction runs on, begun or not.
func (t *pendingTx) Conn() *pgx.Conn { return t.conn }

// closeAfter closes br and returns its error, unless err, the read's, already reports it.
func closeAfter(err error, br pgx.BatchResults) error {
	cerr := br.Close()
	if err != nil {
		return nil
	}
	return cerr
}

// batchRow is the row of a statement sent behind the begin: scanning it ends the pipeline.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	return errors.Join(err, closeAfter(err, r.br))
}

// batchRows are the rows of a statement sent behind the begin: closing them ends the pipeline.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

// Next moves to the next row; past the last it ends the pipeline, so the transaction's next
// statement finds the connection free.
func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = closeAfter(r.Rows.Err(), r.br)
		r.br = nil
	}
}

func (r *batchRows) Err() error { return errors.Join(r.Rows.Err(), r.err) }
