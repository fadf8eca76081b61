package sweep

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/statement"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// cascadeCounter counts what the schema's ON DELETE keys did to each table of a pass's
// cascades, batch by batch, from the batch transaction's own statistics
// (statement.CascadeStats): read before and after the batch statement, in its transaction, the
// difference is the rows each table lost (and, for SET NULL and SET DEFAULT, had changed),
// whichever key and however deep. No table is scanned a second time.
type cascadeCounter struct {
	// oids are the leaf partitions of every table (a plain table is its own leaf), and tables
	// the index into p.Cascades each belongs to.
	oids   []uint32
	tables []int32
	// own says, per table, what the batch statement deletes from it itself, to leave out of its
	// cascade count: ownNone, ownSwept (the swept table, by a key onto itself), or i+1 for
	// delete_with child i.
	own []int
	// deleted and updated are the last batch's counts, per table.
	deleted, updated []int64
}

const (
	ownNone  = -1
	ownSwept = 0
)

// prepareCascades reads the leaf partitions of each table of the pass's cascades
// (statement.ReadLeaves), once per run: a partition attached since the last run is counted from
// this one on.
func (pr *passRun) prepareCascades() error {
	if len(pr.p.Cascades) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(pr.db, pr.r.cfg.Settings.StatementTimeout)
	defer cancel()
	oidOf := func(name string) (oid uint32, leaves []uint32, err error) {
		oid, leaves, err = statement.ReadLeaves(ctx, pr.r.cfg.Pool, name)
		if err != nil {
			return 0, nil, fmt.Errorf("look up table %q: %w", name, err)
		}
		return oid, leaves, nil
	}
	swept, _, err := oidOf(pr.sql.Table)
	if err != nil {
		return err
	}
	children := make([]uint32, len(pr.sql.DeleteWith))
	for i, c := range pr.sql.DeleteWith {
		if children[i], _, err = oidOf(c.Table); err != nil {
			return err
		}
	}
	cc := &cascadeCounter{}
	for i, name := range pr.sql.Cascades {
		oid, leaves, err := oidOf(name)
		if err != nil {
			return err
		}
		own := ownNone
		if oid == swept {
			own = ownSwept
		}
		for j, c := range children {
			if c == oid {
				own = j + 1
			}
		}
		cc.own = append(cc.own, own)
		for _, l := range leaves {
			cc.oids, cc.tables = append(cc.oids, l), append(cc.tables, int32(i))
		}
	}
	pr.aids.cascade = cc
	pr.out.Cascades = make([]wire.CascadeRows, len(pr.p.Cascades))
	for i, name := range pr.p.Cascades {
		pr.out.Cascades[i].Table = name
	}
	return nil
}

// stats reads what tx deleted and updated in each table so far.
func (cc *cascadeCounter) stats(ctx context.Context, tx pgx.Tx) (deleted, updated []int64, err error) {
	if err := tx.QueryRow(ctx, statement.CascadeStats, cc.oids, cc.tables).Scan(&deleted, &updated); err != nil {
		return nil, nil, fmt.Errorf("read the transaction's statistics: %w", err)
	}
	if len(deleted) != len(cc.own) || len(updated) != len(cc.own) {
		return nil, nil, fmt.Errorf("read the transaction's statistics: %d tables answered, want %d", len(deleted), len(cc.own))
	}
	return deleted, updated, nil
}

// measure runs fn, the batch statement, between two reads of tx's statistics, and keeps the
// difference; a pass without cascades just runs fn.
func (pr *passRun) measure(ctx context.Context, tx pgx.Tx, fn func(context.Context, pgx.Tx) error) error {
	cc := pr.aids.cascade
	if cc == nil {
		return fn(ctx, tx)
	}
	d0, u0, err := cc.stats(ctx, tx)
	if err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	d1, u1, err := cc.stats(ctx, tx)
	if err != nil {
		return err
	}
	cc.deleted, cc.updated = make([]int64, len(d1)), make([]int64, len(u1))
	for i := range d1 {
		cc.deleted[i], cc.updated[i] = d1[i]-d0[i], u1[i]-u0[i]
	}
	return nil
}

// countRows adds a committed batch's rows to the answer and the row metrics, per table: n of
// the pass's own, each child's (children), and what the cascades deleted, less what the
// statement deleted from the same table itself, and updated.
func (pr *passRun) countRows(n int64, children []int64) {
	m := pr.r.cfg.Metrics
	m.RowsDeleted(pr.of.sweep, pr.p.Name, pr.p.Table, n)
	for i, c := range children {
		m.RowsDeleted(pr.of.sweep, pr.p.Name, pr.p.DeleteWith[i].Table, c)
	}
	cc := pr.aids.cascade
	if cc == nil {
		return
	}
	for i, d := range cc.deleted {
		switch own := cc.own[i]; {
		case own == ownSwept:
			d -= n
		case own > 0:
			d -= children[own-1]
		}
		pr.out.Cascades[i].Deleted += d
		pr.out.Cascades[i].Updated += cc.updated[i]
		m.RowsDeleted(pr.of.sweep, pr.p.Name, pr.p.Cascades[i], d)
		m.RowsUpdated(pr.of.sweep, pr.p.Name, pr.p.Cascades[i], cc.updated[i])
	}
	cc.deleted, cc.updated = nil, nil
}
