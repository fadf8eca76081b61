package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/partition"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// quotingPolicy sweeps table %[1]s, partitioned by day, in batches (archiving into %[2]s, the
// table guarding itself) and by dropping partitions: every statement and grant that names it.
const quotingPolicy = `sweeps:
  - name: batched
    passes:
      - name: old
        table: %[1]s
        age_column: at
        retention: 30d
        archive_to: %[2]s
        keep_while_referenced_by:
          - table: %[1]s
            column: parent_id
  - name: dropped
    passes:
      - name: old
        table: %[1]s
        age_column: at
        retention: 30d
        mode: partitions
`

// quotingObjects lists every object of the database by kind and name: what a grant script or a
// statement must not add to, beyond what it is for.
const quotingObjects = `
SELECT 'relation ' || oid::regclass::text FROM pg_class WHERE relnamespace <> 'pg_toast'::regnamespace AND NOT relisshared
UNION ALL SELECT 'function ' || oid::regprocedure::text FROM pg_proc
UNION ALL SELECT 'schema ' || nspname FROM pg_namespace
UNION ALL SELECT 'type ' || oid::regtype::text FROM pg_type
ORDER BY 1`

// FuzzQuotedNames renders, for a table of any name the policy loader accepts, `api grants`, `api
// policy sql` and every statement of its passes, and has PostgreSQL run the grants (as the
// table's owner) and prepare each statement: each must do what it is for on that table, and
// the database must hold no object but the drop function afterwards. A name that left its
// quotes would fail to parse, name another table, or leave an object of its own behind.
func FuzzQuotedNames(f *testing.F) {
	for _, seed := range []string{
		"events", "Events", "select", "a b", "ev'x", `ev\x`, "ЖЖ", "e%s%I%L",
		`ev$do$;CREATE TABLE pw();--`,
		`ev$body$;CREATE TABLE pw();--`,
		`x$sweeprail_grant$;CREATE TABLE pw();--`,
		`x$sweeprail_body$');CREATE TABLE pw();--`,
		`ev');CREATE TABLE pw();--`,
		`ev";CREATE TABLE pw();--`,
		"ev\nCREATE TABLE pw();--",
		"ev*/;CREATE TABLE pw();/*",
	} {
		f.Add(seed)
	}
	u := dbtest.URL(f)
	ctx := context.Background()
	conn := dbtest.Conn(f, u)
	pool, err := dbpool.NewPool(ctx, u)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(pool.Close)
	role := `fuzz o'grantee "` + fmt.Sprint(time.Now().UnixNano()) + `"`
	if _, err := conn.Exec(ctx, `CREATE ROLE `+pgx.Identifier{role}.Sanitize()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, `DROP OWNED BY `+pgx.Identifier{role}.Sanitize()+`; DROP ROLE `+pgx.Identifier{role}.Sanitize())
	})
	dir := f.TempDir()

	f.Fuzz(func(t *testing.T, name string) {
		// Longer names are cut at 63 bytes by the server, a name with a dot is schema.name: both
		// would name another table than the one made here.
		if len(name) > 40 || !utf8.ValidString(name) || strings.Contains(name, ".") {
			t.Skip()
		}
		archive := name + "_arch"
		file := filepath.Join(dir, "p.yaml")
		yamlName := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		if err := os.WriteFile(file, []byte(fmt.Sprintf(quotingPolicy, yamlName(name), yamlName(archive))), 0o600); err != nil {
			t.Fatal(err)
		}
		pol, err := policy.LoadFile(file)
		if err != nil {
			return // refused by the loader: never printed or run
		}
		q, qa := pgx.Identifier{name}.Sanitize(), pgx.Identifier{archive}.Sanitize()
		exec := func(sql string) {
			t.Helper()
			if _, err := conn.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		exec(`CREATE TABLE ` + q + ` (id bigint, parent_id bigint, at timestamptz NOT NULL) PARTITION BY RANGE (at)`)
		exec(`CREATE TABLE fuzz_part PARTITION OF ` + q + ` FOR VALUES FROM ('2000-01-01') TO ('2000-01-02')`)
		exec(`CREATE TABLE ` + qa + ` (id bigint, parent_id bigint, at timestamptz NOT NULL)`)
		defer exec(`DROP TABLE ` + q + `, ` + qa + ` CASCADE; DROP FUNCTION IF EXISTS ` +
			pgx.Identifier{"public", partition.DefinerName(name)}.Sanitize() + `(regclass, boolean)`)
		before := objects(t, conn)

		var out, errOut bytes.Buffer
		if err := run(ctx, []string{"api", "grants", "--role", role, file}, map[string]string{}, &out, &errOut); err != nil {
			t.Fatalf("api grants: %v\n%s", err, errOut.String())
		}
		if _, err := conn.Exec(ctx, out.String()); err != nil {
			t.Fatalf("the grants of table %q as its owner: %v\n%s", name, err, out.String())
		}
		fn := pgx.Identifier{"public", partition.DefinerName(name)}.Sanitize() + "(regclass, boolean)"
		var may bool
		if err := conn.QueryRow(ctx, `SELECT has_function_privilege($1, $2, 'EXECUTE') AND has_table_privilege($1, $3, 'DELETE')
			AND has_table_privilege($1, $4, 'INSERT')`, role, fn, q, qa).Scan(&may); err != nil || !may {
			t.Fatalf("table %q: the role may not run the drop function or delete: %v, %v\n%s", name, may, err, out.String())
		}
		var fnText string
		if err := conn.QueryRow(ctx, `SELECT $1::regprocedure::text`, fn).Scan(&fnText); err != nil {
			t.Fatal(err)
		}
		after := objects(t, conn)
		if added := newObjects(before, after); !slices.Equal(added, []string{"function " + fnText}) {
			t.Fatalf("table %q: the grants added %q, want the drop function alone\n%s", name, added, out.String())
		}

		out.Reset()
		if err := run(ctx, []string{"api", "policy", "sql", file}, map[string]string{"DATABASE_URL": u}, &out, &errOut); err != nil {
			t.Fatalf("api policy sql: %v\n%s", err, errOut.String())
		}
		for _, s := range pol.Specs {
			kinds, err := statement.ReadKinds(ctx, pool, s.Passes)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range s.Passes {
				var arch *statement.Archive
				if p.ArchiveTo != "" {
					cols, err := statement.ReadColumns(ctx, pool, p.Table)
					if err != nil {
						t.Fatal(err)
					}
					// The partitioned table has no primary key of one column (a run refuses it):
					// its id column stands in, so that the archive's statements are prepared too.
					a := statement.BuildArchive(p, kinds[i], cols, "id", "bigint")
					arch = &a
				}
				for _, st := range statement.List(p, statement.Build(p, kinds[i]), arch) {
					prepare(t, conn, name, st)
				}
			}
		}
		if added := newObjects(after, objects(t, conn)); len(added) > 0 {
			t.Fatalf("table %q: preparing the statements added %q", name, added)
		}
	})
}

// prepare has the server parse and plan st inside a transaction it rolls back.
func prepare(t *testing.T, conn *pgx.Conn, name string, st statement.Statement) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Prepare(ctx, "", st.SQL); err != nil {
		t.Fatalf("table %q: %s: %v\n%s", name, st.Name, err, st.SQL)
	}
}

func objects(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), quotingObjects)
	if err != nil {
		t.Fatal(err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func newObjects(before, after []string) []string {
	var added []string
	for _, o := range after {
		if _, found := slices.BinarySearch(before, o); !found {
			added = append(added, o)
		}
	}
	return added
}
