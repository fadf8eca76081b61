package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// policySQL runs `api policy sql [file]`: it prints, pass by pass, the exact statements a run and
// a dry run of the policy would execute against DATABASE_URL, each under a comment naming it and
// its placeholders, so that an operator or a DBA reviews what will run before it runs. The
// statements are rendered as a run renders them: for each age column's type as the catalog has
// it, and an archiving pass's for the swept table's columns as they are now. It reads the
// catalog only; it checks nothing (that is `api policy check`).
func policySQL(ctx context.Context, path string, environ map[string]string, stdout, stderr io.Writer) error {
	pol, err := policy.LoadFile(path)
	if err != nil {
		return reportProblems(stderr, path, err)
	}
	u, err := databaseURL(environ)
	if err != nil {
		return fmt.Errorf("policy sql %s: %w to read the age columns' types the statements depend on", pol.File, err)
	}
	ctx, cancel := context.WithTimeout(ctx, policyCheckTimeout)
	defer cancel()
	pool, err := dbpool.NewPool(ctx, u)
	if err != nil {
		return fmt.Errorf("policy sql: open database: %w", err)
	}
	defer pool.Close()
	fmt.Fprintf(stdout, "-- %s: the statements each pass runs, rendered for this database's schema\n", pol.File)
	for _, s := range pol.Specs {
		kinds, err := statement.ReadKinds(ctx, pool, s.Passes)
		if err != nil {
			return fmt.Errorf("policy sql: sweep %q: %w", s.Name, err)
		}
		for i, p := range s.Passes {
			var arch *statement.Archive
			if p.ArchiveTo != "" {
				cols, err := statement.ReadColumns(ctx, pool, p.Table)
				if err != nil {
					return fmt.Errorf("policy sql: pass %q of sweep %q: read the columns to archive: %w", p.Name, s.Name, err)
				}
				key, keyType, err := statement.ReadPrimaryKey(ctx, pool, p.Table)
				if err != nil {
					return fmt.Errorf("policy sql: pass %q of sweep %q: read the primary key the archive proof reads by: %w", p.Name, s.Name, err)
				}
				if len(key) == 1 {
					a := statement.BuildArchive(p, kinds[i], cols, key[0], keyType[0])
					arch = &a
				} else {
					fmt.Fprintf(stdout, "\n-- pass %s of sweep %s: archive_to needs a primary key of one column on %s, which each batch proves its archive by: its runs refuse to start\n",
						p.Name, s.Name, statement.OneLine(p.Table))
				}
			}
			fmt.Fprintln(stdout)
			list := statement.List(p, statement.Build(p, kinds[i]), arch)
			if err := statement.Write(stdout, statement.Title(s.Name, p, kinds[i]), list); err != nil {
				return fmt.Errorf("policy sql: write: %w", err)
			}
		}
	}
	return nil
}
