// Command api serves sweeprail's signed sweep routes and manages its database.
//
//	api [serve]              serve the API (the default)
//	api migrate [up|status]  apply the migrations, or show their state
//	api seed-demo --rows N   fill the reference schema with demo data
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
		return migrate(ctx, rest, environ, stdout)
	case "seed-demo":
		return seedDemo(ctx, rest, environ, stdout, stderr)
	case "policy":
		return policy(ctx, rest, environ, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, "usage: api [serve | migrate [up|status] | seed-demo --rows N [--if-empty] | policy check [file]]")
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
