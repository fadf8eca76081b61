package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

const grantsUsage = "usage: api grants [--role NAME] [file]  (no file: SWEEP_POLICY_FILE, else the bundled catalog.yaml)"

// grants runs `api grants [--role NAME] [file]`: it prints the least privileges the API's role
// needs for the policy serve would load (or file): on sweeprail's own objects, on each swept and
// guard table, on each per-row function, and pg_monitor when the replica-lag throttle is set. It
// needs no database: run its output as the objects' owner.
func grants(args []string, environ map[string]string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("grants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "sweeprail_api", "the API's database role")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(stderr, grantsUsage)
		return fmt.Errorf("grants: %w", err)
	}
	if fs.NArg() > 1 || strings.TrimSpace(*role) == "" {
		fmt.Fprintln(stderr, grantsUsage)
		return fmt.Errorf("grants: unexpected arguments %q", fs.Args())
	}
	path := environ["SWEEP_POLICY_FILE"]
	if fs.NArg() == 1 {
		path = fs.Arg(0)
	}
	pol, err := policy.LoadFile(path)
	if err != nil {
		return reportProblems(stderr, path, err)
	}
	r := pgx.Identifier{*role}.Sanitize()
	fmt.Fprintf(stdout, "-- The least privileges of role %s for %s. Run as the owner of each object.\n", r, pol.File)
	fmt.Fprintln(stdout, "-- sweeprail's own objects (api migrate up installs them): the lease, the run history.")
	fmt.Fprintf(stdout, "GRANT USAGE ON SCHEMA sweeprail TO %s;\n", r)
	fmt.Fprintf(stdout, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA sweeprail TO %s;\n", r)
	fmt.Fprintln(stdout, "-- The policy's tables and functions.")
	for _, g := range statement.Grants(pol.Specs, *role) {
		fmt.Fprintln(stdout, g)
	}
	if environ["MAX_REPLICA_LAG"] != "" || environ["MAX_REPLICA_LAG_BYTES"] != "" {
		fmt.Fprintln(stdout, "-- MAX_REPLICA_LAG / MAX_REPLICA_LAG_BYTES: reading the standbys' lag on the primary.")
		fmt.Fprintf(stdout, "GRANT pg_monitor TO %s;\n", r)
	}
	return nil
}
