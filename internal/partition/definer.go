package partition

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/policy"
)

// A drop function (DefinerSQL, SECURITY DEFINER, created by the table's owner from `api grants`)
// lets a role that does not own a partitioned table drop that table's expired partitions and
// nothing else. It runs in the caller's transaction, so its DETACH is plain, under the caller's
// SET LOCAL lock_timeout: DETACH … CONCURRENTLY cannot run in a transaction block.

// definerPrefix begins the name of every drop function; the rest is the table's name.
const definerPrefix = "sweeprail_drop_"

// DefinerName is the name of the drop function of table relname (unqualified, as the catalog
// spells it), which lives in the table's schema. A name that would pass PostgreSQL's 63 bytes
// keeps its start and ends in a hash of the whole, so that two long names do not collide.
func DefinerName(relname string) string {
	const maxIdent = 63
	name := definerPrefix + relname
	if len(name) <= maxIdent {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(relname))
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	keep := maxIdent - len(definerPrefix) - len(suffix)
	for keep > 0 && !utf8.RuneStart(relname[keep]) {
		keep--
	}
	return definerPrefix + relname[:keep] + suffix
}

// Definer is what the catalog says of a table's drop function.
type Definer struct {
	// Function is its schema-qualified name, quoted where needed, whether it exists or not.
	Function string
	// Usable: it exists with the expected signature, is SECURITY DEFINER, its owner may drop
	// the table's partitions (owns the table or is a member of its owner), and the current role
	// may execute it. Drop may then go through it.
	Usable bool
	// Why says what is wrong with a function that exists but is not usable; empty otherwise.
	Why string
	// Owns: the current role owns the table or is a member of its owner, and may detach directly.
	Owns bool
	// Window is what the function was created with (zero when it does not exist); SessionTimeZone
	// is the current session's TimeZone, which a window of the database's zone is compared with.
	Window          Window
	SessionTimeZone string
}

// FindDefiner reads table's drop function (table as a policy names it) and whether the current
// role owns the table.
func FindDefiner(ctx context.Context, q Querier, table string) (Definer, error) {
	var d Definer
	var exists, secdef, ownerOK, exec bool
	var config []string
	err := q.QueryRow(ctx, `
WITH t AS (
  SELECT c.oid, c.relowner, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.oid = to_regclass($1)),
f AS (
  SELECT to_regprocedure(format('%I.%I(regclass, boolean)', t.nspname, $2::text)) AS oid FROM t)
SELECT format('%I.%I', t.nspname, $2::text), pg_has_role(t.relowner, 'USAGE'), f.oid IS NOT NULL,
       COALESCE(p.prosecdef, false), COALESCE(pg_has_role(p.proowner, t.relowner, 'USAGE'), false),
       COALESCE(has_function_privilege(f.oid, 'EXECUTE'), false), COALESCE(p.proconfig, '{}'), current_setting('TimeZone')
FROM t CROSS JOIN f LEFT JOIN pg_proc p ON p.oid = f.oid`, quoteQualified(table), DefinerName(lastPart(table))).
		Scan(&d.Function, &d.Owns, &exists, &secdef, &ownerOK, &exec, &config, &d.SessionTimeZone)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("look up the drop function of %s: %w", table, err)
	}
	d.Window = windowOf(config)
	switch {
	case !exists:
	case !secdef:
		d.Why = "is not SECURITY DEFINER"
	case !ownerOK:
		d.Why = "is not owned by the table's owner"
	case !exec:
		d.Why = "may not be executed by the current role (GRANT EXECUTE)"
	default:
		d.Usable = true
	}
	return d, nil
}

// windowOf reads a drop function's window from its settings (pg_proc.proconfig).
func windowOf(config []string) Window {
	var w Window
	for _, c := range config {
		k, v, _ := strings.Cut(c, "=")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "sweeprail.drop_retention_seconds":
			w.Retention = time.Duration(n) * time.Second
		case "sweeprail.drop_time_zone":
			w.TimeZone = v
		case "sweeprail.drop_units_per_second":
			w.UnitsPerSecond = n
		}
	}
	return w
}

// Window is what a drop function computes its cutoff from, baked in when it is created: the
// database clock at the start of the caller's transaction minus Retention, read as the key reads it.
type Window struct {
	// Retention is the pass's retention (its grace after an expiry), at least its min_retention.
	Retention time.Duration
	// TimeZone is the zone whose wall clock a timestamp or date key is read in; "" takes the
	// creating session's TimeZone.
	TimeZone string
	// UnitsPerSecond is 1, 1000 or 1000000 for an integer key of Unix time; 0 for a time key.
	UnitsPerSecond int64
}

// WindowOf is the window of pass p: its retention, raised to its min_retention floor, its time
// zone and its age unit.
func WindowOf(p policy.Pass) Window {
	w := Window{Retention: max(p.Retention, p.MinRetention), TimeZone: p.TimeZone}
	switch p.TimeZone {
	case "", policy.TimeZoneUTC:
		w.TimeZone = "UTC"
	case policy.TimeZoneDatabase:
		w.TimeZone = ""
	}
	switch p.AgeUnit {
	case policy.AgeSeconds:
		w.UnitsPerSecond = 1
	case policy.AgeMilliseconds:
		w.UnitsPerSecond = 1000
	case policy.AgeMicroseconds:
		w.UnitsPerSecond = 1000000
	}
	return w
}

// WindowDiffers says how a drop function's window (got) differs from the pass's (want), "" when
// it does not; shorter says the function's cutoff is the later one, so that through it the role
// may drop what the policy keeps. A want of the database's zone is compared with sessionZone.
func WindowDiffers(got, want Window, sessionZone string) (msg string, shorter bool) {
	if want.TimeZone == "" {
		want.TimeZone = sessionZone
	}
	switch {
	case got.Retention < want.Retention:
		return fmt.Sprintf("a retention of %s, shorter than the pass's %s", policy.FormatRetention(got.Retention), policy.FormatRetention(want.Retention)), true
	case got.Retention > want.Retention:
		return fmt.Sprintf("a retention of %s, longer than the pass's %s (it refuses the partitions between)", policy.FormatRetention(got.Retention), policy.FormatRetention(want.Retention)), false
	case got.TimeZone != want.TimeZone:
		return fmt.Sprintf("time zone %q, not the pass's %q", got.TimeZone, want.TimeZone), true
	case got.UnitsPerSecond != want.UnitsPerSecond:
		return fmt.Sprintf("%d units of Unix time a second, not the pass's %d", got.UnitsPerSecond, want.UnitsPerSecond), true
	}
	return "", false
}

// DefinerSQL is the script that creates (or replaces) the drop function of table (as a policy
// names it) in the table's schema, with window w, and lets role, alone, execute it: to be run by
// the table's owner, which the function then acts as. The schema is the table's as the running
// session finds it, which is how the API's statements find it too. Every name goes in as a quoted
// identifier (SET LOCAL … = "name"), never inside a literal or the block's body.
func DefinerSQL(table, role string, w Window) string {
	var b strings.Builder
	b.WriteString("BEGIN;\n")
	schema, _, qualified := strings.Cut(table, ".")
	if qualified {
		fmt.Fprintf(&b, "SET LOCAL sweeprail.grant_schema = %s;\n", ident(schema))
	} else {
		b.WriteString("SET LOCAL sweeprail.grant_schema TO DEFAULT;\n")
	}
	fmt.Fprintf(&b, "SET LOCAL sweeprail.grant_table = %s;\n", ident(lastPart(table)))
	fmt.Fprintf(&b, "SET LOCAL sweeprail.grant_function = %s;\n", ident(DefinerName(lastPart(table))))
	fmt.Fprintf(&b, "SET LOCAL sweeprail.grant_role = %s;\n", ident(role))
	fmt.Fprintf(&b, "SET LOCAL sweeprail.grant_retention_seconds = %d;\n", int64(w.Retention/time.Second))
	fmt.Fprintf(&b, "SET LOCAL sweeprail.grant_time_zone = %s;\n", quoteLiteral(w.TimeZone))
	fmt.Fprintf(&b, "SET LOCAL sweeprail.grant_units_per_second = %d;\n", w.UnitsPerSecond)
	b.WriteString(definerGrant)
	b.WriteString("\nCOMMIT;")
	return b.String()
}

// ident quotes one identifier as the rest of the project does.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func lastPart(table string) string {
	if i := strings.LastIndex(table, "."); i >= 0 {
		return table[i+1:]
	}
	return table
}

func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
