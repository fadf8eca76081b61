// Command api serves sweeprail's signed sweep routes and manages its database.
//
//	api [serve]                       serve the API (the default)
//	api migrate [up|status] [--demo]  apply sweeprail's own migrations (schema sweeprail), or show
//	                                  their state; --demo: the demo reference schema's too
//	api seed-demo --rows N            create the demo reference schema when missing, fill it
//	api policy check [file]           validate a sweep policy file against the database
//	api grants [--role NAME] [file]   print the least privileges the API's role needs
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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/config"
	"github.com/sweeprail/sweeprail/internal/demo"
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
func run(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
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
		return policy(ctx, rest, environ, stdout, stderr)
	case "grants":
		return grants(rest, environ, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, "usage: api [serve | migrate [up|status] [--demo] | seed-demo --rows N [--if-empty] | policy check [file] | grants [--role NAME] [file]]")
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

func seedDemo(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("seed-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rows := fs.Int("rows", 100_000, "about how many rows to add across the reference schema")
	ifEmpty := fs.Bool("if-empty", false, "seed only when the schema holds no accounts yet (make run, run twice)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := databaseURL(environ)
	if err != nil {
		return err
	}
	// The demo schema comes with its data: created when missing, brought up to date otherwise.
	if err := migrations.Demo.Up(ctx, u, stdout); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer pool.Close()
	if *ifEmpty {
		var seeded bool
		if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM accounts)").Scan(&seeded); err != nil {
			return fmt.Errorf("look for demo data: %w", err)
		}
		if seeded {
			fmt.Fprintln(stdout, "seed-demo: the database holds data already; not seeding again")
			return nil
		}
	}
	return demo.Seed(ctx, pool, *rows, stdout)
}
