package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/policy"
)

// policyCheckTimeout bounds a whole policy check, connecting included: a CI job against an
// unreachable database should fail, not hang.
const policyCheckTimeout = 2 * time.Minute

const policyUsage = "usage: api policy check [file] | api policy sql [file]  (no file: SWEEP_POLICY_FILE, else the bundled catalog.yaml)"

// policyCmd runs `api policy check [file]` (default: what serve would load): the checks serve
// runs at boot, sweeprail's own schema included, so that an operator's CI refuses what a boot
// would. It prints OK and one line per sweep, or every problem on stderr (exit status 1);
// warnings (allow_unindexed passes) do not fail it.
func policyCmd(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" && args[0] != "sql" {
		return fmt.Errorf("policy: want a subcommand\n%s", policyUsage)
	}
	sub, args := args[0], args[1:]
	if len(args) > 1 || len(args) == 1 && strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, policyUsage)
		return fmt.Errorf("policy %s: unexpected arguments %q", sub, args)
	}
	path := environ["SWEEP_POLICY_FILE"]
	if len(args) == 1 {
		path = args[0]
	}
	if sub == "sql" {
		return policySQL(ctx, path, environ, stdout, stderr)
	}
	pol, err := policy.LoadFile(path)
	if err != nil {
		return reportProblems(stderr, path, err)
	}
	// The static checks ran without a database; the rest needs one.
	u, err := databaseURL(environ)
	if err != nil {
		return fmt.Errorf("policy check %s: the static checks passed; %w to check tables, columns, conditions and indexes", pol.File, err)
	}
	ctx, cancel := context.WithTimeout(ctx, policyCheckTimeout)
	defer cancel()
	pool, err := dbpool.NewPool(ctx, u)
	if err != nil {
		return fmt.Errorf("policy check: open database: %w", err)
	}
	defer pool.Close()
	own := checkOwnSchema(ctx, pool)
	warnings, err := check.Policy(ctx, pool, pol)
	for _, w := range warnings {
		fmt.Fprintln(stdout, "warning:", w)
	}
	if err != nil {
		// serve would refuse for both: say both.
		if isNotReady(own) {
			fmt.Fprintln(stderr, own)
		}
		return reportProblems(stderr, pol.File, err)
	}
	if own != nil {
		fmt.Fprintln(stderr, own)
		return fmt.Errorf("policy check %s: the policy passed, but serve would refuse this database: %w", pol.File, own)
	}
	passes := 0
	for _, s := range pol.Specs {
		passes += len(s.Passes)
	}
	fmt.Fprintf(stdout, "%s: OK: %d sweeps, %d passes, checked against the database\n", pol.File, len(pol.Specs), passes)
	for _, s := range pol.Specs {
		fmt.Fprintf(stdout, "  %s: %s\n", s.Name, describePasses(s.Passes))
	}
	return nil
}

// reportProblems prints each problem of a policy on a line of its own and returns a short error:
// the lines are what the operator reads, the error what the exit status and a CI log summarise.
// An error that is no policy problem (a file that cannot be read, a database that cannot be
// reached) is returned as it is.
func reportProblems(stderr io.Writer, file string, err error) error {
	problems := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		problems = j.Unwrap()
	}
	var pe *policy.Error
	if !errors.As(problems[0], &pe) {
		return fmt.Errorf("policy check: %w", err)
	}
	for _, p := range problems {
		fmt.Fprintln(stderr, p)
	}
	if file == "" {
		file = policy.DefaultFile
	}
	if len(problems) == 1 {
		return fmt.Errorf("policy check: 1 problem in %s", file)
	}
	return fmt.Errorf("policy check: %d problems in %s", len(problems), file)
}

// describePasses writes a sweep's passes on one line, every field of each (as the catalog
// answer has them): "read (notifications.read_at older than 30d, batched); …".
func describePasses(passes []policy.Pass) string {
	parts := make([]string, len(passes))
	for i, p := range passes {
		c := policy.CatalogPass(p)
		var b strings.Builder
		if c.Expiry {
			fmt.Fprintf(&b, "%s (%s.%s expired", c.Pass, c.Table, c.AgeColumn)
			if p.Retention > 0 {
				fmt.Fprintf(&b, " more than %s ago", policy.FormatRetention(p.Retention))
			}
		} else {
			fmt.Fprintf(&b, "%s (%s.%s older than %s", c.Pass, c.Table, c.AgeColumn, policy.FormatRetention(p.Retention))
		}
		if c.TimeZone != policy.TimeZoneUTC {
			fmt.Fprintf(&b, " on the %s calendar", c.TimeZone)
		}
		if c.Where != "" {
			b.WriteString(" where " + strings.Join(strings.Fields(c.Where), " "))
		}
		for _, g := range c.Guards {
			fmt.Fprintf(&b, ", kept while %s.%s references its %s", g.Table, keyText(g.Columns), keyText(g.ReferencesColumns))
			if g.Where != "" {
				b.WriteString(" where " + strings.Join(strings.Fields(g.Where), " "))
			}
			if g.WithoutForeignKey {
				b.WriteString(declaredText)
			}
		}
		for _, ch := range c.DeleteWith {
			fmt.Fprintf(&b, ", deleting the %s rows whose %s holds its %s", ch.Table, keyText(ch.Columns), keyText(ch.ReferencesColumns))
			if ch.WithoutForeignKey {
				b.WriteString(declaredText)
			}
		}
		fmt.Fprintf(&b, ", %s", c.Mode)
		if c.Function != "" {
			fmt.Fprintf(&b, " calling %s(%s)", c.Function, cmp.Or(c.KeyColumn, "id"))
		}
		if c.BatchSize > 0 {
			fmt.Fprintf(&b, ", batch_size %d", c.BatchSize)
		}
		if c.MaxBatches > 0 {
			fmt.Fprintf(&b, ", max_batches %d", c.MaxBatches)
		}
		if c.MaxRows > 0 {
			fmt.Fprintf(&b, ", max_rows %d", c.MaxRows)
		}
		if c.AllowUnindexed {
			b.WriteString(", unindexed allowed")
		}
		if c.AllowShortRetention {
			b.WriteString(", short retention allowed")
		}
		if c.ArchiveTo != "" {
			b.WriteString(", archived to " + c.ArchiveTo)
		}
		b.WriteString(")")
		parts[i] = b.String()
	}
	return strings.Join(parts, "; ")
}

// declaredText follows a keep guard or child declared without_foreign_key in the OK line: the
// check proved the swept row the one side, and trusts the rest to the policy.
const declaredText = " (a declared relation, trusted: no foreign key)"

// keyText writes a guard's or child's columns: the column alone, or (a, b) for a key of several.
func keyText(columns []string) string {
	if len(columns) == 1 {
		return columns[0]
	}
	return "(" + strings.Join(columns, ", ") + ")"
}
