package sweep_test

import (
	"slices"
	"testing"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// quotedSchema holds names a policy cannot write but the catalog can hold, quotes and all: an
// archived table whose primary key (the heal's key) and another column have quotes in their
// names, and a cascade whose key columns do.
const quotedSchema = `
CREATE TABLE quoted ("the ""id""" bigint PRIMARY KEY, "say ""hi""" text NOT NULL, at timestamptz NOT NULL);
CREATE SCHEMA archive;
CREATE TABLE archive.quoted (LIKE quoted INCLUDING ALL);
CREATE TABLE qparents ("the ""id""" bigint PRIMARY KEY, at timestamptz NOT NULL);
CREATE TABLE qchildren (id bigint PRIMARY KEY, "parent ""ref""" bigint NOT NULL REFERENCES qparents ("the ""id""") ON DELETE CASCADE);
`

// TestQuotedCatalogNames: names read from the catalog go into the statements quoted, their own
// quotes escaped: the archive batch moves a column named say "hi", a healing batch compares by
// a key named the "id", and the dry run and the run count a cascade along keys named so.
func TestQuotedCatalogNames(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	exec(t, pool, quotedSchema)
	at := dbNow(t, pool)
	exec(t, pool, `INSERT INTO quoted SELECT i, 'row "' || i || '"', $1::timestamptz - CASE WHEN i <= 20 THEN interval '40 days' ELSE interval '1 day' END
		FROM generate_series(1, 30) i`, at)
	exec(t, pool, `INSERT INTO qparents SELECT i, $1::timestamptz - CASE WHEN i <= 20 THEN interval '40 days' ELSE interval '1 day' END FROM generate_series(1, 30) i`, at)
	exec(t, pool, `INSERT INTO qchildren SELECT i * 2 + k, i FROM generate_series(1, 30) i, generate_series(0, 1) k`)
	// The crash window: row 1 reached the archive, and the commit that deleted it was lost.
	exec(t, pool, `INSERT INTO archive.quoted SELECT * FROM quoted WHERE "the ""id""" = 1`)
	pol, err := policy.Load("p.yaml", []byte(`sweeps:
  - name: archived
    passes:
      - {name: p, table: quoted, age_column: at, retention: 30d, archive_to: archive.quoted}
  - name: cascaded
    passes:
      - {name: p, table: qparents, age_column: at, retention: 30d, cascades: [qchildren]}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: fixed(settings(), 7), AsOf: fixedAsOf(at)})

	t.Run("archived and healed", func(t *testing.T) {
		t.Parallel()
		res := run(t, r, "archived")
		if res.Error != nil || res.Deleted != 20 || res.Archived != 19 || res.Passes[0].Recovered != 1 {
			t.Fatalf("run %+v (error %+v): want 20 deleted, 19 archived, 1 recovered", res, res.Error)
		}
		if n := count(t, pool, `SELECT count(*) FROM archive.quoted WHERE "say ""hi""" = 'row "' || "the ""id""" || '"' AND "the ""id""" <= 20`); n != 20 {
			t.Errorf("the archive holds %d of the 20 old rows with their say \"hi\", want 20", n)
		}
	})
	t.Run("cascaded", func(t *testing.T) {
		t.Parallel()
		want := []wire.CascadeRows{{Table: "qchildren", Deleted: 40}}
		dry, err := r.DryRun(ctx, "cascaded")
		if err != nil {
			t.Fatal(err)
		}
		if dp := dry.Passes[0]; dp.Eligible == nil || *dp.Eligible != 20 || !slices.Equal(dp.Cascades, want) {
			t.Errorf("dry run: eligible %v, cascades %+v; want 20 and %+v", dp.Eligible, dp.Cascades, want)
		}
		res := run(t, r, "cascaded")
		if res.Error != nil || res.Deleted != 20 || !slices.Equal(res.Passes[0].Cascades, want) {
			t.Errorf("run %+v (error %+v): want 20 deleted, cascades %+v", res, res.Error, want)
		}
	})
}
