// Package migrations embeds sweeprail's SQL migrations (goose format) and applies them, in two
// sets, each with a version table of its own so that one is installed, checked and upgraded
// without the other:
//
//	Sweeprail  sweeprail/: sweeprail's own objects in schema sweeprail (sweeprail.goose_db_version),
//	           installed alone by `api migrate up`; boot, /readyz and `api policy check` Check it
//	Demo       demo/: the bundled catalog's reference schema, in the search_path's first schema
//	           (goose's default goose_db_version), by `api migrate up --demo` and `api seed-demo`
//
// docs/DESIGN.md ("sweeprail's own objects") says how to add an object of sweeprail's own.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/sweeprail/sweeprail/internal/dbpool"
)

// FS holds every migration of both sets, each set in its own directory.
//
//go:embed sweeprail/*.sql demo/*.sql
var FS embed.FS

// Set is one migration set: a directory of FS and the version table that records it.
type Set struct {
	// Name is the set's directory in FS.
	Name string
	// Title names the set in messages: "sweeprail's own schema".
	Title string
	// Schema, when not empty, is created (when missing) before goose runs: the version table
	// lives in it.
	Schema string
	// VersionTable is where goose records the applied migrations of this set.
	VersionTable string
	// Required are tables the API cannot serve without; Check confirms that each exists.
	Required []string
	// Command is what installs the set, named in every message that says it is missing.
	Command string
	// lockID keys the PostgreSQL advisory lock that serialises migrations of this set (lockSet).
	lockID int64
	// exclusive refuses a version table that records migrations the set does not have: it is
	// someone else's.
	exclusive bool
}

// sweeprailLockID is the advisory lock key of sweeprail's own set. It is not goose's default, so
// that an application migrating its own schema with goose at the same time never waits for
// sweeprail, nor sweeprail for it.
const sweeprailLockID int64 = 0x73776565_7072_0001

// Sweeprail is sweeprail's own set: schema sweeprail and what lives in it.
var Sweeprail = &Set{
	Name:         "sweeprail",
	Title:        "sweeprail's own schema",
	Schema:       "sweeprail",
	VersionTable: "sweeprail.goose_db_version",
	Required:     []string{"sweeprail.sweep_lock", "sweeprail.run", "sweeprail.replay_nonce"},
	Command:      "api migrate up",
	lockID:       sweeprailLockID,
}

// Demo is the reference schema of the bundled catalog. It keeps goose's default version table
// and lock, where the databases that hold it record its versions.
var Demo = &Set{
	Name:         "demo",
	Title:        "the demo schema",
	VersionTable: "goose_db_version",
	Command:      "api migrate up --demo",
	lockID:       lock.DefaultLockID,
	exclusive:    true,
}

// Sets are both sets, in the order they are applied.
func Sets() []*Set { return []*Set{Sweeprail, Demo} }

// files returns the set's migrations as goose reads them.
func (s *Set) files() (fs.FS, error) {
	sub, err := fs.Sub(FS, s.Name)
	if err != nil {
		return nil, fmt.Errorf("migrations %s: %w", s.Name, err)
	}
	return sub, nil
}

// provider returns a goose provider of the set over db, without goose's session locker: that
// lock is a session's, which a transaction pooler does not keep between statements (the lock and
// the migrations land on different server connections, and the unlock on a third). Up holds a
// lock of its own instead (lockSet).
func (s *Set) provider(db *sql.DB) (*goose.Provider, error) {
	files, err := s.files()
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithTableName(s.VersionTable))
	if err != nil {
		return nil, fmt.Errorf("load %s migrations: %w", s.Name, err)
	}
	return p, nil
}

// lockWait bounds how long Up waits for another Up of the same set: replicas migrating at boot
// queue behind the first, which may run a long migration. lockPoll is how often a waiting Up
// tries again.
const (
	lockWait = 5 * time.Minute
	lockPoll = 500 * time.Millisecond
)

// lockSet takes the set's advisory lock in a transaction held open on a connection of its own
// (a transaction-level lock holds through a transaction pooler), and returns what commits it.
// Replicas migrating at once queue here, polling in short transactions so that waiters hold none
// of the pooler's connections; the holder idles meanwhile, so its idle timeout is lifted.
func (s *Set) lockSet(ctx context.Context, databaseURL string) (unlock func(), err error) {
	deadline := time.Now().Add(lockWait)
	for {
		conn, err := dbpool.Connect(ctx, databaseURL)
		if err != nil {
			return nil, fmt.Errorf("lock %s migrations: connect: %w", s.Name, err)
		}
		tx, got, err := tryLock(ctx, conn, s.lockID)
		if got {
			return func() {
				ctx := context.WithoutCancel(ctx)
				_ = tx.Commit(ctx)
				conn.Close(ctx)
			}, nil
		}
		// A waiter holds no connection between tries: in session mode a pooler gives each
		// client connection a server connection of its own, and waiters holding theirs would
		// starve the migrating Up of the one its migrations run on.
		conn.Close(context.WithoutCancel(ctx))
		switch {
		case err != nil:
			return nil, fmt.Errorf("lock %s migrations: %w", s.Name, err)
		case time.Now().After(deadline):
			return nil, fmt.Errorf("lock %s migrations: another migrate of this set held the lock for %s", s.Name, lockWait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lock %s migrations: %w", s.Name, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// tryLock opens a transaction and tries the advisory lock key in it: the open transaction when it
// got it, else none (rolled back).
func tryLock(ctx context.Context, conn *pgx.Conn, key int64) (pgx.Tx, bool, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, false, err
	}
	// In the simple protocol: an extended-protocol query leaves its portal, and the portal's
	// snapshot, open until the transaction ends, and CREATE INDEX CONCURRENTLY in a migration
	// waits for every transaction holding an older snapshot, this one included.
	var got bool
	err = tx.QueryRow(ctx, "SELECT set_config('idle_in_transaction_session_timeout', '0', true) IS NOT NULL AND pg_try_advisory_xact_lock($1)",
		pgx.QueryExecModeSimpleProtocol, key).Scan(&got)
	if err != nil || !got {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, false, err
	}
	return tx, true, nil
}

// openDB opens databaseURL for goose in dbpool's query mode, which a transaction pooler passes.
func openDB(databaseURL string) (*sql.DB, error) {
	cc, err := dbpool.ConnConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return stdlib.OpenDB(*cc), nil
}

// Up applies every pending migration of the set and writes one line per applied migration to w.
func (s *Set) Up(ctx context.Context, databaseURL string, w io.Writer) error {
	db, err := openDB(databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	unlock, err := s.lockSet(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer unlock()
	if s.Schema != "" {
		if err := s.ensureSchema(ctx, db); err != nil {
			return err
		}
	}
	if s.exclusive {
		if err := s.refuseForeign(ctx, db); err != nil {
			return err
		}
	}
	p, err := s.provider(db)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	for _, r := range results {
		fmt.Fprintf(w, "applied %s (%s)\n", path.Join(s.Name, r.Source.Path), r.Duration.Round(1e6))
	}
	if err != nil {
		return fmt.Errorf("apply %s migrations: %w", s.Name, err)
	}
	return nil
}

// sqlstateInsufficientPrivilege is what CREATE SCHEMA raises without CREATE on the database.
const sqlstateInsufficientPrivilege = "42501"

// ensureSchema creates the set's schema when it is missing; Up calls it under the set's lock, so
// that replicas migrating together do not race on it. It looks before it creates: CREATE SCHEMA
// IF NOT EXISTS checks the CREATE privilege on the database even when the schema exists, which
// would refuse a schema created beforehand by someone allowed to.
func (s *Set) ensureSchema(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema %s: %w", s.Schema, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	var exists bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s.Schema).Scan(&exists); err != nil {
		return fmt.Errorf("create schema %s: look it up: %w", s.Schema, err)
	}
	if !exists {
		if _, err := tx.ExecContext(ctx, "CREATE SCHEMA "+pgx.Identifier{s.Schema}.Sanitize()); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == sqlstateInsufficientPrivilege {
				return fmt.Errorf("create schema %s: %w (grant the migrating role CREATE on the database, or have its owner run CREATE SCHEMA %s AUTHORIZATION <that role> once)", s.Schema, err, s.Schema)
			}
			return fmt.Errorf("create schema %s: %w", s.Schema, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema %s: %w", s.Schema, err)
	}
	return nil
}

// refuseForeign refuses a version table that records versions the set does not have: goose's
// default table belongs to an application that migrates its own schema with goose, and applying
// the set over it would skip or interleave migrations.
func (s *Set) refuseForeign(ctx context.Context, db *sql.DB) error {
	exists, err := tableExists(ctx, db, s.VersionTable)
	if err != nil || !exists {
		return err
	}
	known, err := s.versions()
	if err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, "SELECT DISTINCT version_id FROM "+quoteQualified(s.VersionTable)+" WHERE version_id > 0 AND is_applied ORDER BY 1")
	if err != nil {
		return fmt.Errorf("read %s: %w", s.VersionTable, err)
	}
	defer rows.Close()
	var foreign []string
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return fmt.Errorf("read %s: %w", s.VersionTable, err)
		}
		if !slices.Contains(known, v) {
			foreign = append(foreign, strconv.FormatInt(v, 10))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", s.VersionTable, err)
	}
	if len(foreign) > 0 {
		return fmt.Errorf("%s records migrations that are not sweeprail's %s set (versions %s): it belongs to your own migrations; the %s schema is meant for a database of its own",
			s.VersionTable, s.Name, strings.Join(foreign, ", "), s.Name)
	}
	return nil
}

// Status writes each migration's state to w and reports how many are pending. It writes nothing
// to the database: without the version table, every migration is pending.
func (s *Set) Status(ctx context.Context, databaseURL string, w io.Writer) (pending int, err error) {
	db, err := openDB(databaseURL)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	p, err := s.provider(db)
	if err != nil {
		return 0, err
	}
	exists, err := tableExists(ctx, db, s.VersionTable)
	if err != nil {
		return 0, err
	}
	if !exists {
		for _, src := range p.ListSources() {
			fmt.Fprintf(w, "%-60s %s\n", path.Join(s.Name, src.Path), "pending")
		}
		return len(p.ListSources()), nil
	}
	statuses, err := p.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("read %s migration status: %w", s.Name, err)
	}
	for _, st := range statuses {
		applied := "pending"
		if st.State == goose.StateApplied {
			applied = "applied " + st.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
		} else {
			pending++
		}
		fmt.Fprintf(w, "%-60s %s\n", path.Join(s.Name, st.Source.Path), applied)
	}
	return pending, nil
}

func tableExists(ctx context.Context, db *sql.DB, name string) (bool, error) {
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
		return false, fmt.Errorf("look up %s: %w", name, err)
	}
	return exists, nil
}

// versions lists the set's migration numbers, in order.
func (s *Set) versions() ([]int64, error) {
	names, err := fs.Glob(FS, s.Name+"/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list %s migrations: %w", s.Name, err)
	}
	out := make([]int64, 0, len(names))
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(path.Base(n), "_", 2)[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migration %s: version: %w", n, err)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

// Latest returns the highest version among the set's embedded migrations, which a ready database
// has applied.
func (s *Set) Latest() (int64, error) {
	vs, err := s.versions()
	if err != nil {
		return 0, err
	}
	if len(vs) == 0 {
		return 0, fmt.Errorf("migrations %s: none embedded", s.Name)
	}
	return vs[len(vs)-1], nil
}

// Querier is what Check needs of a pool or a connection.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// NotReadyError says that a database lacks migrations or tables of a set that this build needs.
// Its message names the command that installs them.
type NotReadyError struct {
	Set *Set
	// Installed is false when the set's version table does not exist: nothing of it was applied.
	Installed bool
	// Applied is the newest version recorded, Latest the newest this build embeds.
	Applied, Latest int64
	// Missing are required tables that do not exist although every migration is recorded.
	Missing []string
}

func (e *NotReadyError) Error() string {
	switch {
	case !e.Installed:
		return fmt.Sprintf("%s is not installed (no table %s): run %s", e.Set.Title, e.Set.VersionTable, e.Set.Command)
	case e.Applied < e.Latest:
		return fmt.Sprintf("%s is at migration %d, this build needs %d: run %s", e.Set.Title, e.Applied, e.Latest, e.Set.Command)
	}
	return fmt.Sprintf("table %s does not exist although %s records every migration, so it was dropped by hand: drop what is left of it and run %s again (for sweeprail's own set, when no run is alive: DROP SCHEMA sweeprail CASCADE)",
		strings.Join(e.Missing, ", "), e.Set.VersionTable, e.Set.Command)
}

// Check confirms that the database holds every migration of the set this build embeds and each of
// its Required tables, and returns the newest version applied. A database ahead of the build (a
// newer replica migrated it) passes: migrations only add. What is missing comes back as a
// *NotReadyError; any other error is the database's.
func (s *Set) Check(ctx context.Context, db Querier) (int64, error) {
	latest, err := s.Latest()
	if err != nil {
		return 0, err
	}
	required := s.Required
	if required == nil {
		required = []string{}
	}
	var installed bool
	var missing []string
	// One round trip for whether the version table and each required table exist; to_regclass
	// answers NULL for a missing table (or schema) rather than failing.
	if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
       coalesce(array_agg(r ORDER BY r) FILTER (WHERE to_regclass(r) IS NULL), '{}')
  FROM unnest($2::text[]) r`, s.VersionTable, required).Scan(&installed, &missing); err != nil {
		return 0, fmt.Errorf("check %s migrations: %w", s.Name, err)
	}
	if !installed {
		return 0, &NotReadyError{Set: s, Latest: latest}
	}
	var applied int64
	if err := db.QueryRow(ctx, "SELECT coalesce(max(version_id), 0) FROM "+quoteQualified(s.VersionTable)+" WHERE is_applied").Scan(&applied); err != nil {
		return 0, fmt.Errorf("check %s migrations: %w", s.Name, err)
	}
	if applied < latest {
		return applied, &NotReadyError{Set: s, Installed: true, Applied: applied, Latest: latest}
	}
	if len(missing) > 0 {
		return applied, &NotReadyError{Set: s, Installed: true, Applied: applied, Latest: latest, Missing: missing}
	}
	return applied, nil
}

// quoteQualified quotes a possibly schema-qualified name ("sweeprail.goose_db_version").
func quoteQualified(name string) string {
	return pgx.Identifier(strings.Split(name, ".")).Sanitize()
}
