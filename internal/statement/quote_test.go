package statement

import (
	"context"
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbtest"
)

// TestQuotedNames: a name with quotes of its own, as the catalog may hold one (an archive's
// column, a key's), goes into a statement that runs: the archive insert and a column list name
// the columns they mean.
func TestQuotedNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE "my ""quoted"" table" ("the ""id""" bigint, "say ""hi""" text, plain text)`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		columns []string
	}{
		{"quotes in a name", []string{`the "id"`, `say "hi"`}},
		{"one quoted name of two", []string{`say "hi"`, `plain`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck
			insert := ArchiveInsert(`my "quoted" table`, tc.columns, `SELECT 7, 'x'`)
			if _, err := tx.Exec(ctx, insert); err != nil {
				t.Fatalf("%s: %v", insert, err)
			}
			var first, second string
			if err := tx.QueryRow(ctx, `SELECT `+ColumnList("t", tc.columns)+` FROM `+QuoteName(`my "quoted" table`)+` AS t`).Scan(&first, &second); err != nil {
				t.Fatal(err)
			}
			if first != "7" || second != "x" {
				t.Errorf("read back %q, %q: want 7, x", first, second)
			}
		})
	}
}
