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
// guard table, on each per-row function, pg_monitor when the replica-lag throttle or the
// active sessions' limit is set, and the right to set wal_compression when
// BATCH_WAL_COMPRESSION is. It needs no database: run its output as the objects' owner.
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
	fmt.Fprintf(stdout, "-- The least privileges of role %s for %s. Run as the owner of each object.\n", statement.OneLine(r), statement.OneLine(pol.File))
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
	lag := environ["MAX_REPLICA_LAG"] != "" || environ["MAX_REPLICA_LAG_BYTES"] != ""
	sessions := environ["MAX_ACTIVE_SESSIONS"] != "" || environ["MAX_ACTIVE_SESSIONS_CRITICAL"] != ""
	if lag {
		fmt.Fprintln(stdout, "-- MAX_REPLICA_LAG / MAX_REPLICA_LAG_BYTES: reading the standbys' lag on the primary.")
	}
	if sessions {
		fmt.Fprintln(stdout, "-- MAX_ACTIVE_SESSIONS(_CRITICAL): reading the other sessions' state in pg_stat_activity.")
	}
	if lag || sessions {
		fmt.Fprintf(stdout, "GRANT pg_monitor TO %s;\n", r)
	}
	if environ["BATCH_WAL_COMPRESSION"] != "" {
		fmt.Fprintln(stdout, "-- BATCH_WAL_COMPRESSION: setting wal_compression in each batch (PostgreSQL 15 and later; before, only a superuser may).")
		fmt.Fprintf(stdout, "GRANT SET ON PARAMETER wal_compression TO %s;\n", r)
	}
	return nil
}

// writeDefiners prints, for each table a partitions pass drops partitions of, the drop function
// that lets the role do it without owning the table: the table's owner runs it once, and again
// after a change of the pass's retention, min_retention, time_zone or age_unit, which the function
// holds (the policy check says when they differ), or a new sweeprail version, which may change it.
func writeDefiners(w io.Writer, specs []policy.Spec, role string) {
	seen := map[string]bool{}
	for _, s := range policy.Normalize(specs) {
		for _, p := range s.Passes {
			if p.Mode != policy.ModePartitions || seen[p.Table] {
				continue
			}
			seen[p.Table] = true
			win := partition.WindowOf(p)
			fmt.Fprintf(w, "-- mode partitions on %s: the function that detaches and drops its partitions ending at or before\n", statement.OneLine(p.Table))
			fmt.Fprintf(w, "-- the database clock minus %s (pass %s's retention, at least its min_retention), and nothing else, for the role alone.\n",
				policy.FormatRetention(win.Retention), statement.OneLine(p.Name))
			fmt.Fprintln(w, "-- Run by the table's owner (it runs as its creator); run it again after changing the pass's retention,")
			fmt.Fprintln(w, "-- min_retention, time_zone or age_unit: the function keeps the window it was created with.")
			fmt.Fprintln(w, partition.DefinerSQL(p.Table, role, win))
			if p.Boundary != policy.BoundaryKeep {
				fmt.Fprintf(w, "-- boundary: delete reads and deletes in the partition that holds the cutoff directly: grant each partition of %s,\n", statement.OneLine(p.Table))
				fmt.Fprintf(w, "-- as it is created (pg_partman: inherit_privileges), GRANT SELECT, UPDATE, DELETE ON <partition> TO %s;\n", statement.OneLine(pgx.Identifier{role}.Sanitize()))
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
			fmt.Fprintf(w, "-- archive_to %s, when it is a postgres_fdw foreign table: a user mapping for the role on its server,\n", statement.OneLine(statement.QuoteName(p.ArchiveTo)))
			fmt.Fprintln(w, "-- as the server's owner (psql's \\det+ names the server of each foreign table), with the remote role that may INSERT into the remote table:")
			fmt.Fprintf(w, "-- CREATE USER MAPPING FOR %s SERVER <server> OPTIONS (user '<remote role>', password '<its password>');\n", statement.OneLine(role))
		}
	}
}
