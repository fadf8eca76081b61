package sweep

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sweeprail/sweeprail/internal/explain"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// Path is how a pass reaches its eligible rows, chosen per pass and per run (batched passes) or
// fixed by the pass's mode. The answer of a run and of a dry run say which (wire's "path").
type Path string

// The access paths.
const (
	// PathIndex is the keyset on the age index: each batch deletes the oldest rows from the
	// newest age the previous batch deleted, a batch of rows at a time. It reads only eligible
	// rows' index entries and pages: the path where eligible rows are sparse.
	PathIndex Path = "index"
	// PathHeap is heap order: each batch deletes the eligible rows of a range of blocks
	// (t.ctid >= '(b,0)' AND t.ctid < '(b+k,0)', a TID Range Scan), from the first block to the
	// table's size at the pass's start. It reads every block once, in file order, and deletes
	// from each page it reads: the path where eligible rows are dense.
	PathHeap Path = "heap"
	// PathSingle, PathPerRow and PathPartitions are the paths of the modes of those names.
	PathSingle     Path = "single"
	PathPerRow     Path = "per-row"
	PathPartitions Path = "partitions"
)

// The eligible share from which a batched pass takes the heap path depends on how the age follows
// the heap (pg_stats.correlation): in heap order the index path reads pages in file order too and
// the heap path wins only from about half the table; scattered, each row is a random page and the
// heap path wins from 2% (both measured: docs/bench/crossover.md). Between them the threshold
// moves with the correlation's square, as the planner's index scan cost does.
const (
	// HeapShareOrdered is the threshold at |correlation| 1.
	HeapShareOrdered = 0.55
	// HeapShareScattered is the threshold at correlation 0.
	HeapShareScattered = 0.02
)

// heapShare is the threshold at correlation: see HeapShareOrdered. Without statistics the
// correlation is taken as 1, which favours the index path.
func heapShare(correlation float64) float64 {
	c2 := min(correlation*correlation, 1)
	return HeapShareScattered + (HeapShareOrdered-HeapShareScattered)*c2
}

// rowLockTimeout is the lock timeout of a batch's first attempt, which takes no row locks of its
// own before deleting (capped by Settings.LockTimeout). A row another transaction holds makes that
// attempt wait; past this it fails with 55P03 and the batch is retried once in the locking form,
// which skips held rows instead. Short, because a wait here holds the batch's own row locks
// (every row it already deleted) for as long: a foreground write to one of them would queue
// behind it.
const rowLockTimeout = 50 * time.Millisecond

// position is where a batched pass stands on its access path, and the size of its next batch:
// in rows, adapted after each full batch (on the heap path, the rows its next range is expected
// to hold).
type position struct {
	path  Path
	size  int
	index keyset
	heap  heapRange
}

// survey is what a batched pass's path is chosen from, read at the pass's start.
type survey struct {
	// kind is the table's relkind ('r' a plain table, 'p' partitioned, …).
	kind string
	// blocks is the table's size in blocks: the heap path's end. Rows that reach a later block
	// during the run (inserted, or moved there by an update) are left for the next run.
	blocks uint32
	// eligible and total are the planner's estimates of the eligible rows and of all rows.
	eligible, total float64
	// correlation is the age column's, between its order and the heap's (pg_stats; 1 when
	// unknown).
	correlation float64
	// tidRange is whether the server plans TID Range Scans (PostgreSQL 14 and later).
	tidRange bool
	// unindexed is whether no index serves the pass's age condition (a pass with allow_unindexed):
	// the index path's every batch would then read the whole table, the heap path reads it once.
	unindexed bool
	// analyzed is whether the age column has statistics that still describe the table. Without
	// them the planner's estimate of the eligible rows is a default selectivity (a third of the
	// table for an age test), not an estimate; and statistics taken before more than staleShare
	// of the table changed (a drain by the previous run, most often) still count the rows it
	// deleted. Either way the pass keeps to the index path, bounded whatever the share, until
	// autovacuum (or ANALYZE) has looked again.
	analyzed bool
}

// staleShare is the share of a table's rows that may have changed since its last ANALYZE
// (pg_stat_get_mod_since_analyze against reltuples) before its statistics are called stale.
// Autovacuum analyzes a table past 10% by default; twice that means it is behind.
const staleShare = 0.2

// share is the eligible share of the table as the planner sees it.
func (sv survey) share() float64 {
	if sv.total < 1 {
		return 0
	}
	return min(sv.eligible/sv.total, 1)
}

// heapCapable reports whether the heap path can run on the table: a plain table (a partitioned
// one numbers blocks per partition), on a server with TID Range Scans.
func (sv survey) heapCapable() bool { return sv.kind == "r" && sv.tidRange }

// choose is the path of a batched pass over a table surveyed as sv: heap where no index serves the
// age condition or where the planner expects at least heapShare of the table eligible, index
// elsewhere. forced, when set, wins wherever it can run (tests and make bench force each path in
// turn).
func (sv survey) choose(forced Path) Path {
	switch {
	case !sv.heapCapable():
		return PathIndex
	case forced == PathHeap || forced == PathIndex:
		return forced
	case sv.unindexed:
		return PathHeap
	case sv.analyzed && sv.blocks > 0 && sv.share() >= heapShare(sv.correlation):
		return PathHeap
	}
	return PathIndex
}

// pathOf is the path pass p takes now, for a run and for the dry run alike: its mode's, or for a
// batched pass (or a leaf partition of a partitions pass's boundary, which runs as one) the one
// its table's survey calls for (survey.choose), with the survey, from which the heap path sizes
// its first range. A partitions pass's own path is PathPartitions, set where it runs. Only a pass
// with allow_unindexed is asked whether an index serves it: the policy check refused the others
// without one.
func (r *Runner) pathOf(ctx context.Context, p policy.Pass, st statement.Set, cutoff any) (Path, survey, error) {
	switch p.Mode {
	case policy.ModeSingle:
		return PathSingle, survey{}, nil
	case policy.ModePerRow:
		return PathPerRow, survey{}, nil
	}
	sv, err := r.surveyTable(ctx, p, st, cutoff)
	if err != nil {
		return "", survey{}, fmt.Errorf("choose access path: %w", err)
	}
	if p.AllowUnindexed && sv.heapCapable() {
		indexed, err := r.indexServes(ctx, p, st, cutoff, r.cfg.Settings.StatementTimeout)
		if err != nil {
			return "", survey{}, fmt.Errorf("choose access path: plan the batch select: %w", err)
		}
		sv.unindexed = !indexed
	}
	return sv.choose(r.cfg.AccessPath), sv, nil
}

// surveyTable reads, in one read-only transaction, what choose needs: the table's kind and size
// in blocks, and the planner's estimates of its eligible rows (the estimate statement, guards
// included) and of all its rows (which the planner scales from reltuples to the table's current
// size, and guesses from its width when it was never analyzed).
func (r *Runner) surveyTable(ctx context.Context, p policy.Pass, st statement.Set, cutoff any) (survey, error) {
	var sv survey
	s := r.cfg.Settings
	err := pgx.BeginTxFunc(ctx, r.cfg.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := (statement.Timeouts{Statement: s.StatementTimeout, Lock: s.LockTimeout}).Set(ctx, tx); err != nil {
			return err
		}
		var blocks int64
		var version int
		var hasStats bool
		var correlation *float64
		var reltuples, mods float64
		if err := tx.QueryRow(ctx, statement.SurveySQL, statement.QuoteName(p.Table), p.AgeColumn).
			Scan(&sv.kind, &blocks, &version, &hasStats, &correlation, &reltuples, &mods); err != nil {
			return fmt.Errorf("read table size: %w", err)
		}
		sv.analyzed = hasStats && mods <= staleShare*max(reltuples, 1)
		sv.correlation = 1
		if correlation != nil {
			sv.correlation = *correlation
		}
		sv.blocks = uint32(min(max(blocks, 0), math.MaxUint32))
		sv.tidRange = version >= 140000
		var err error
		if sv.eligible, err = planRows(ctx, tx, st.Estimate.SQL, cutoff); err != nil {
			return fmt.Errorf("estimate eligible rows: %w", err)
		}
		if sv.total, err = planRows(ctx, tx, st.Total.SQL); err != nil {
			return fmt.Errorf("estimate rows: %w", err)
		}
		return nil
	})
	return sv, err
}

// planRows is the planner's row estimate of query's top node.
func planRows(ctx context.Context, tx pgx.Tx, query string, args ...any) (float64, error) {
	var raw []byte
	if err := tx.QueryRow(ctx, explain.Prefix+query, args...).Scan(&raw); err != nil {
		return 0, err
	}
	n, err := explain.TopRows(raw)
	return float64(n), err
}

// isRowLockConflict reports whether err is a batch's first attempt meeting a row lock held by
// another transaction: lock_not_available (the short lock timeout), or deadlock_detected (the
// holder waits on a row the batch already deleted).
func isRowLockConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01")
}
