// Command api serves sweeprail's signed sweep routes and manages its database.
//
//	api [serve]              serve the API (the default)
//	api migrate [up|status]  apply the migrations, or show their state
//	api seed-demo --rows N   fill an empty reference schema with demo data (never in production)
//	api policy check [file]  validate a sweep policy file against the database
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/config"
	"github.com/sweeprail/sweeprail/internal/demo"
	"github.com/sweeprail/sweeprail/internal/redact"
	"github.com/sweeprail/sweeprail/migrations"
)

func main() {
	if err := run(context.Background(), os.Args, config.Environ(os.Environ()), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

// run is the whole program, with its environment injected as a map so that tests run it
// in-process. A map rather than a getenv func: a variable set to "" must be told from one unset,
// since an empty value is refused rather than replaced by a default.
//
// Its error is masked (see redactor): main prints it, and pgx quotes connection strings in its
// own, with a masking of passwords that misses some forms libpq accepts.
func run(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	return redactor(environ).Error(dispatch(ctx, args, environ, stdout, stderr))
}

// redactor masks what the process must never print: DATABASE_URL's password, in whatever form it
// was written, and the signing keys.
func redactor(environ map[string]string) *redact.Redactor {
	return redact.New(append(redact.Passwords(environ["DATABASE_URL"]),
		environ["INTERNAL_SIGNING_KEY"], environ["INTERNAL_SIGNING_KEY_PREVIOUS"])...)
}

// dispatch runs the subcommand args name.
func dispatch(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	cmd, rest := "serve", []string{}
	if len(args) > 1 {
		cmd, rest = args[1], args[2:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, rest, environ, stdout, stderr)
	case "migrate":
		return migrate(ctx, rest, environ, stdout)
	case "seed-demo":
		return seedDemo(ctx, rest, environ, stdout, stderr)
	case "policy":
		return policy(ctx, rest, environ, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, "usage: api [serve | migrate [up|status] | seed-demo --rows N [--if-empty | --force] | policy check [file]]")
		return nil
	}
	return fmt.Errorf("unknown command %q (want serve, migrate, seed-demo or policy)", cmd)
}

func databaseURL(environ map[string]string) (string, error) {
	u := environ["DATABASE_URL"]
	if u == "" {
		return "", errors.New("DATABASE_URL is required")
	}
	return u, nil
}

func migrate(ctx context.Context, args []string, environ map[string]string, stdout io.Writer) error {
	u, err := databaseURL(environ)
	if err != nil {
		return err
	}
	sub := "up"
	if len(args) > 0 {
		sub = args[0]
	}
	switch sub {
	case "up":
		if err := migrations.Up(ctx, u, stdout); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "migrations: up to date")
		return nil
	case "status":
		pending, err := migrations.Status(ctx, u, stdout)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "migrations: %d pending\n", pending)
		return nil
	}
	return fmt.Errorf("migrate: unknown subcommand %q (want up or status)", sub)
}

// seedDemo fills the reference schema with demo data. The rows look real and carry no marker, so
// it refuses APP_ENV=production outright, and a database where any table it writes holds rows
// already unless --force: mixed into real data, they could not be told apart or removed.
func seedDemo(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("seed-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rows := fs.Int("rows", 100_000, "about how many rows to add across the reference schema")
	ifEmpty := fs.Bool("if-empty", false, "when a table holds rows already, seed nothing and succeed (make run, run twice)")
	force := fs.Bool("force", false, "seed even when tables hold rows already (never under APP_ENV=production)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("seed-demo: unexpected arguments %q", fs.Args())
	}
	if *force && *ifEmpty {
		return errors.New("seed-demo: --force and --if-empty contradict each other: choose one")
	}
	if env := environ["APP_ENV"]; config.Production(env) {
		return fmt.Errorf("seed-demo refused: APP_ENV=%s: demo rows look real and carry no marker to remove them by (--force does not override this)", env)
	}
	u, err := databaseURL(environ)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer pool.Close()
	populated, err := populatedTables(ctx, pool)
	if err != nil {
		return err
	}
	switch {
	case len(populated) == 0 || *force:
	case *ifEmpty:
		fmt.Fprintf(stdout, "seed-demo: %s hold rows already; not seeding\n", strings.Join(populated, ", "))
		return nil
	default:
		return fmt.Errorf("seed-demo refused: %s hold rows already, and demo rows mixed into them could not be told apart: "+
			"seed an empty database (--force seeds anyway)", strings.Join(populated, ", "))
	}
	return demo.Seed(ctx, pool, *rows, stdout)
}

// populatedTables returns the tables demo.Seed writes that hold at least one row.
func populatedTables(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	var out []string
	for _, table := range demo.Tables() {
		var found bool
		if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+pgx.Identifier{table}.Sanitize()+")").Scan(&found); err != nil {
			return nil, fmt.Errorf("look for rows in %s: %w", table, err)
		}
		if found {
			out = append(out, table)
		}
	}
	return out, nil
}
