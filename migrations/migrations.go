// Package migrations embeds the SQL migrations (goose format) of the reference schema and applies
// them.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS holds every migration, applied in the order of their numbers.
//
//go:embed *.sql
var FS embed.FS

// open returns a goose provider over its own database/sql handle. The session locker (a
// PostgreSQL advisory lock) lets several replicas run migrate at boot without racing.
func open(databaseURL string) (*goose.Provider, *sql.DB, error) {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("open database: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("make migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS, goose.WithSessionLocker(locker))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, db, nil
}

// Up applies every pending migration and writes one line per applied migration to w.
func Up(ctx context.Context, databaseURL string, w io.Writer) error {
	p, db, err := open(databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	results, err := p.Up(ctx)
	for _, r := range results {
		fmt.Fprintf(w, "applied %s (%s)\n", r.Source.Path, r.Duration.Round(1e6))
	}
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// Status writes each migration's state to w and reports how many are pending.
func Status(ctx context.Context, databaseURL string, w io.Writer) (pending int, err error) {
	p, db, err := open(databaseURL)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	statuses, err := p.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("read migration status: %w", err)
	}
	for _, s := range statuses {
		applied := "pending"
		if s.State == goose.StateApplied {
			applied = "applied " + s.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
		} else {
			pending++
		}
		fmt.Fprintf(w, "%-60s %s\n", s.Source.Path, applied)
	}
	return pending, nil
}

// Latest returns the highest version among the embedded migrations, which a ready database has
// applied (goose records it in goose_db_version).
func Latest() (int64, error) {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		return 0, fmt.Errorf("list migrations: %w", err)
	}
	var latest int64
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(n, "_", 2)[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migration %s: version: %w", n, err)
		}
		latest = max(latest, v)
	}
	return latest, nil
}
