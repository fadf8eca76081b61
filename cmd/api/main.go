// Command api serves sweeprail's signed sweep routes and manages its database.
//
//	api [serve]                       serve the API (the default)
//	api migrate [up|status] [--demo]  apply sweeprail's own migrations (schema sweeprail), or show
//	                                  their state; --demo: the demo reference schema's too
//	api seed-demo --rows N            create the demo reference schema when missing, fill an empty
//	                                  one with demo data (never under APP_ENV=production)
//	api policy check [file]           validate a sweep policy file against the database
//	api policy sql [file]             print the statements each pass runs, rendered for the database
//	api grants [--role NAME] [file]   print the least privileges the API's role needs
package main

import (
	"cmp"
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
	"github.com/sweeprail/sweeprail/internal/dbpool"
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
		return migrate(ctx, rest, environ, stdout, stderr)
	case "seed-demo":
		return seedDemo(ctx, rest, environ, stdout, stderr)
	case "policy":
		return policyCmd(ctx, rest, environ, stdout, stderr)
	case "grants":
		return grants(rest, environ, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, "usage: api [serve | migrate [up|status] [--demo] | seed-demo --rows N [--if-empty | --force] | policy check|sql [file] | grants [--role NAME] [file]]")
		return nil
	}
	return fmt.Errorf("unknown command %q (want serve, migrate, seed-demo, policy or grants)", cmd)
}

func databaseURL(environ map[string]string) (string, error) {
	u := environ["DATABASE_URL"]
	if u == "" {
		return "", errors.New("DATABASE_URL is required")
	}
	return u, nil
}

// migrate runs `api migrate [up|status] [--demo]`. Without --demo it touches sweeprail's own set
// only (schema sweeprail), whatever else the database holds: it is safe on a database of the
// operator's. --demo adds the demo reference schema the bundled catalog sweeps.
func migrate(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	sub := "up"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	if sub != "up" && sub != "status" {
		return fmt.Errorf("migrate: unknown subcommand %q (want up or status)", sub)
	}
	fs := flag.NewFlagSet("migrate "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	demoSet := fs.Bool("demo", false, "the demo reference schema's migrations too (make run; never on a database of your own)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("migrate %s: unexpected arguments %q", sub, fs.Args())
	}
	u, err := databaseURL(environ)
	if err != nil {
		return err
	}
	sets := []*migrations.Set{migrations.Sweeprail}
	if *demoSet {
		sets = append(sets, migrations.Demo)
	}
	for _, set := range sets {
		switch sub {
		case "up":
			if err := set.Up(ctx, u, stdout); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s migrations: up to date\n", set.Name)
		case "status":
			pending, err := set.Status(ctx, u, stdout)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s migrations: %d pending\n", set.Name, pending)
		}
	}
	return nil
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
	if err := config.CheckAppEnv(cmp.Or(environ["APP_ENV"], config.EnvDevelopment)); err != nil {
		return fmt.Errorf("seed-demo refused: %w", err)
	}
	if env := environ["APP_ENV"]; config.Production(env) {
		return fmt.Errorf("seed-demo refused: APP_ENV=%s: demo rows look real and carry no marker to remove them by (--force does not override this)", env)
	}
	u, err := databaseURL(environ)
	if err != nil {
		return err
	}
	// The demo schema comes with its data: created when missing, brought up to date otherwise.
	if err := migrations.Demo.Up(ctx, u, stdout); err != nil {
		return err
	}
	pool, err := dbpool.NewPool(ctx, u)
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
