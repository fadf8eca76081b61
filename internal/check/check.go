package check

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

const (
	// checkStatementTimeout bounds each statement of a policy check; checkLockTimeout keeps it
	// from queueing behind a migration's ACCESS EXCLUSIVE lock (EXPLAIN of a DELETE takes the
	// table's ROW EXCLUSIVE lock, as the DELETE would).
	checkStatementTimeout = 10 * time.Second
	checkLockTimeout      = 2 * time.Second
	// checkPlanBatchSize is the LIMIT the batch select is planned with: the default BATCH_SIZE.
	checkPlanBatchSize = 1000
)

// Specs checks specs against the live schema of pool's database; see Policy. Its messages name
// the sweep and pass but no file or line: it is for specs built in Go. For a loaded policy, call
// Policy.
func Specs(ctx context.Context, pool *pgxpool.Pool, specs []policy.Spec) (warnings []string, err error) {
	return Policy(ctx, pool, &policy.Policy{Specs: specs})
}

// Policy validates the policy against the live schema of pool's database, so that a policy that
// cannot run is refused at boot (or in CI, by api policy check) rather than failing its first
// batch. Nothing is executed: statements are only planned, in transactions always rolled back.
// Every refusal is a *policy.Error, all joined in err; warnings (an allow_unindexed pass, a
// trigger) are returned even when err is not nil. An error that is not the policy's (the
// database unreachable) ends the check and is returned alone. See the package doc for the steps.
func Policy(ctx context.Context, pool *pgxpool.Pool, p *policy.Policy) (warnings []string, err error) {
	_, warnings, err = Prove(ctx, pool, p)
	return warnings, err
}

// findings is what a step of the check found, in the order it found it.
type findings struct {
	problems []error
	warnings []string
	// unserved are the passes no index serves, advised together once every pass is checked
	// (adviseAgeIndexes); not refusals yet.
	unserved []ageRefusal
}

// refuse records a refusal.
func (f *findings) refuse(e *policy.Error) { f.problems = append(f.problems, e) }

// warn records a warning.
func (f *findings) warn(e *policy.Error) { f.warnings = append(f.warnings, e.Error()) }

// add appends what g found after what f found.
func (f *findings) add(g findings) {
	f.problems = append(f.problems, g.problems...)
	f.warnings = append(f.warnings, g.warnings...)
	f.unserved = append(f.unserved, g.unserved...)
}

// refused reports whether f holds a refusal; warnings and unserved passes are none.
func (f findings) refused() bool { return len(f.problems) > 0 }

// checker is one run of the check: the policy, the database, and what every pass shares.
type checker struct {
	pol    *policy.Policy
	pool   *pgxpool.Pool
	tables map[string]*tableInfo
	// suggested maps each lookup index suggested so far to the sweep and pass it was suggested
	// for, so that a later pass needing the same index names it instead.
	suggested map[string][2]string
}

// tableInfo is what the check knows of one table name.
type tableInfo struct {
	// problem says why the name is no table that can be swept ("does not exist …"); "" when it is.
	problem string
	oid     uint32
	columns []columnInfo
	// partitioned: a partitioned table (relkind p), whose rows' ctids repeat across partitions.
	partitioned bool
}

type columnInfo struct {
	name, typ string
	// temporal: a timestamp, timestamptz or date (or a domain over one), comparable with the cutoff.
	temporal bool
	// numeric: an integer or numeric type (or a domain over one), which can hold Unix time.
	numeric bool
	// kind is how the column compares with the cutoff, when temporal.
	kind statement.Kind
}

func (t *tableInfo) column(name string) (columnInfo, bool) {
	for _, c := range t.columns {
		if c.name == name {
			return c, true
		}
	}
	return columnInfo{}, false
}

// columnNames are the table's columns' names, in order.
func (t *tableInfo) columnNames() []string {
	names := make([]string, len(t.columns))
	for i, c := range t.columns {
		names[i] = c.name
	}
	return names
}

func (t *tableInfo) columnList() string { return strings.Join(t.columnNames(), ", ") }

func newChecker(pool *pgxpool.Pool, p *policy.Policy) *checker {
	return &checker{pol: p, pool: pool, tables: map[string]*tableInfo{}, suggested: map[string][2]string{}}
}

func (c *checker) problem(sweep, pass, field, format string, args ...any) *policy.Error {
	return &policy.Error{File: c.pol.File, Line: c.pol.Line(sweep, pass, field), Sweep: sweep, Pass: pass, Err: fmt.Errorf(format, args...)}
}

// static runs the checks of policy.Load that need no database and keep each where condition to
// one expression, which must hold before any of it reaches the server: specs built in Go have
// not been through Load.
func (c *checker) static() []error {
	return c.pol.Problems()
}

// pass checks one pass and returns what it found; the error it returns is the database's. The
// catalog comes first: what is missing from it would only make every statement fail to compile.
// The references between tables are then checked whatever the later steps find (a foreign key
// that would fail the delete is worth saying alongside a missing index); each later step runs
// only when the one before refused nothing, since a statement that does not compile has no plan.
func (c *checker) pass(ctx context.Context, sweep string, p policy.Pass, cutoff time.Time) (findings, error) {
	found, err := c.catalog(ctx, sweep, p)
	if err != nil || found.refused() {
		return found, err
	}
	for _, step := range []func() (findings, error){
		func() (findings, error) { return c.foreignKeys(ctx, sweep, p) },
		func() (findings, error) { return c.deleteWith(ctx, sweep, p) },
		func() (findings, error) { return c.cascades(ctx, sweep, p) },
		func() (findings, error) { return c.deleteTriggers(ctx, sweep, p) },
	} {
		f, err := step()
		if err != nil {
			return findings{}, err
		}
		found.add(f)
	}
	for _, step := range []func() (findings, error){
		func() (findings, error) { return c.partitions(ctx, sweep, p) },
		func() (findings, error) { return c.compile(ctx, sweep, p, cutoff) },
		func() (findings, error) { return c.indexes(ctx, sweep, p, cutoff) },
		func() (findings, error) { return c.archive(ctx, sweep, p, cutoff) },
	} {
		f, err := step()
		if err != nil {
			return findings{}, err
		}
		if found.add(f); f.refused() {
			break
		}
	}
	return found, nil
}
