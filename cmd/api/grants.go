package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/partition"
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
	fmt.Fprintln(stdout, "-- The tables and sequences later migrations add to it: run these as the role that runs api migrate up.")
	fmt.Fprintf(stdout, "ALTER DEFAULT PRIVILEGES IN SCHEMA sweeprail GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %s;\n", r)
	fmt.Fprintf(stdout, "ALTER DEFAULT PRIVILEGES IN SCHEMA sweeprail GRANT USAGE, SELECT ON SEQUENCES TO %s;\n", r)
	fmt.Fprintln(stdout, "-- The policy's tables and functions.")
	for _, g := range statement.Grants(pol.Specs, *role) {
		fmt.Fprintln(stdout, g)
	}
	writeUserMappings(stdout, pol.Specs, r)
	writeDefiners(stdout, pol.Specs, *role)
	if environ["MAX_REPLICA_LAG"] != "" || environ["MAX_REPLICA_LAG_BYTES"] != "" {
		fmt.Fprintln(stdout, "-- MAX_REPLICA_LAG / MAX_REPLICA_LAG_BYTES: reading the standbys' lag on the primary.")
		fmt.Fprintf(stdout, "GRANT pg_monitor TO %s;\n", r)
	}
	return nil
}

// writeDefiners prints, for each table a partitions pass drops partitions of, the drop function
// that lets the role do it without owning the table: the table's owner runs it once (again after
// a new sweeprail version, which may change it; CREATE OR REPLACE keeps the grant).
func writeDefiners(w io.Writer, specs []policy.Spec, role string) {
	seen := map[string]bool{}
	for _, s := range policy.Normalize(specs) {
		for _, p := range s.Passes {
			if p.Mode != policy.ModePartitions || seen[p.Table] {
				continue
			}
			seen[p.Table] = true
			fmt.Fprintf(w, "-- mode partitions on %s: the function that detaches and drops its partitions ending at or before a cutoff,\n", p.Table)
			fmt.Fprintln(w, "-- and nothing else, for the role alone. Run by the table's owner (it runs as its creator).")
			fmt.Fprintln(w, partition.DefinerSQL(p.Table, role))
			if p.Boundary != policy.BoundaryKeep {
				fmt.Fprintf(w, "-- boundary: delete reads and deletes in the partition that holds the cutoff directly: grant each partition of %s,\n", p.Table)
				fmt.Fprintf(w, "-- as it is created (pg_partman: inherit_privileges), GRANT SELECT, UPDATE, DELETE ON <partition> TO %s;\n", pgx.Identifier{role}.Sanitize())
			}
		}
	}
}

// writeUserMappings prints, for each archive_to table, the user mapping the role needs when that
// table is a postgres_fdw foreign table: without one every batch fails on the remote connection.
// Whether it is foreign, and on which server, only the database knows, and the remote role's
// credentials only the operator: the statement is printed as a comment to complete, with the
// query that names the server.
func writeUserMappings(w io.Writer, specs []policy.Spec, role string) {
	seen := map[string]bool{}
	for _, s := range specs {
		for _, p := range s.Passes {
			if p.ArchiveTo == "" || seen[p.ArchiveTo] {
				continue
			}
			seen[p.ArchiveTo] = true
			name := pgx.Identifier(strings.Split(p.ArchiveTo, ".")).Sanitize()
			fmt.Fprintf(w, "-- archive_to %s, when it is a postgres_fdw foreign table: a user mapping for the role on its server,\n", p.ArchiveTo)
			fmt.Fprintf(w, "-- as the server's owner (SELECT srvname FROM pg_foreign_table JOIN pg_foreign_server s ON s.oid = ftserver\n")
			fmt.Fprintf(w, "--   WHERE ftrelid = '%s'::regclass names it), with the remote role that may INSERT into the remote table:\n", strings.ReplaceAll(name, "'", "''"))
			fmt.Fprintf(w, "-- CREATE USER MAPPING FOR %s SERVER <server> OPTIONS (user '<remote role>', password '<its password>');\n", role)
		}
	}
}
