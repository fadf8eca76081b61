package sweep_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/explain"
	"github.com/sweeprail/sweeprail/internal/statement"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// keysSchema is a media store's: thumbnails that belong to their media by its key with no
// foreign key saying so, and remote media keyed by two columns, whose thumbnails reference them
// by both (remote_keyed_thumbs through a declared two-column key, remote_thumbs without one),
// kept while a pin names them. Each child has an id, so the oracle can name every row.
const keysSchema = `
CREATE TABLE media (media_id text PRIMARY KEY, created_at timestamptz NOT NULL);
CREATE INDEX media_created_at ON media (created_at);
CREATE TABLE thumbs (id bigserial PRIMARY KEY, media_id text NOT NULL);
CREATE INDEX thumbs_media_id ON thumbs (media_id);
CREATE TABLE remote_media (media_origin text, media_id text, created_at timestamptz NOT NULL, PRIMARY KEY (media_origin, media_id));
CREATE INDEX remote_media_created_at ON remote_media (created_at);
CREATE TABLE remote_thumbs (id bigserial PRIMARY KEY, media_origin text NOT NULL, media_id text NOT NULL);
CREATE INDEX remote_thumbs_key ON remote_thumbs (media_id, media_origin);
CREATE TABLE remote_keyed_thumbs (id bigserial PRIMARY KEY, origin text NOT NULL, media text NOT NULL,
    FOREIGN KEY (origin, media) REFERENCES remote_media (media_origin, media_id));
CREATE INDEX remote_keyed_thumbs_key ON remote_keyed_thumbs (origin, media);
CREATE TABLE remote_pins (origin text NOT NULL, media text NOT NULL);
CREATE INDEX remote_pins_key ON remote_pins (origin, media);
`

// keysData fills keysSchema relative to $1, the reference time: ages of 0 to 59 days (30 is
// exactly the cutoff, kept), one to three thumbnails a medium, thumbnails of no medium, pins
// that hold every seventh remote medium, and pins and thumbnails that match a remote medium on
// one column of its key but not the other, which must neither hold it nor go with it.
const keysData = `
INSERT INTO media SELECT 'm' || i, $1::timestamptz - (i % 60) * interval '1 day' FROM generate_series(1, 240) AS i;
INSERT INTO thumbs (media_id) SELECT 'm' || i FROM generate_series(1, 240) AS i, generate_series(0, i % 3) AS k;
INSERT INTO thumbs (media_id) SELECT 'orphan' || i FROM generate_series(1, 20) AS i;
INSERT INTO remote_media SELECT 'o' || (i % 4), 'r' || i, $1::timestamptz - (i % 60) * interval '1 day' FROM generate_series(1, 240) AS i;
INSERT INTO remote_thumbs (media_origin, media_id) SELECT 'o' || (i % 4), 'r' || i FROM generate_series(1, 240) AS i, generate_series(0, i % 2) AS k;
INSERT INTO remote_thumbs (media_origin, media_id) SELECT 'o' || ((i + 1) % 4), 'r' || i FROM generate_series(1, 240, 5) AS i;
INSERT INTO remote_keyed_thumbs (origin, media) SELECT 'o' || (i % 4), 'r' || i FROM generate_series(1, 240) AS i, generate_series(0, i % 3) AS k;
INSERT INTO remote_pins SELECT 'o' || (i % 4), 'r' || i FROM generate_series(7, 240, 7) AS i;
INSERT INTO remote_pins SELECT 'o' || ((i + 1) % 4), 'r' || i FROM generate_series(11, 240, 11) AS i;
`

// keysOracle writes down, from the rule and before the run, what each table keeps ($1 the
// cutoff): a medium older than the cutoff goes, unless a pin names both columns of its key, and
// a thumbnail goes exactly when the medium its columns name goes.
const keysOracle = `
CREATE TABLE gone_media AS SELECT media_id FROM media WHERE created_at < $1;
CREATE TABLE gone_remote AS SELECT media_origin, media_id FROM remote_media r WHERE created_at < $1
    AND NOT EXISTS (SELECT 1 FROM remote_pins p WHERE p.origin = r.media_origin AND p.media = r.media_id);
CREATE TABLE want_media AS SELECT media_id AS id FROM media EXCEPT SELECT media_id FROM gone_media;
CREATE TABLE want_thumbs AS SELECT id FROM thumbs WHERE media_id NOT IN (SELECT media_id FROM gone_media);
CREATE TABLE want_remote AS SELECT media_origin || '/' || media_id AS id FROM remote_media
    EXCEPT SELECT media_origin || '/' || media_id FROM gone_remote;
CREATE TABLE want_remote_thumbs AS SELECT id FROM remote_thumbs c
    WHERE NOT EXISTS (SELECT 1 FROM gone_remote g WHERE g.media_origin = c.media_origin AND g.media_id = c.media_id);
CREATE TABLE want_remote_keyed_thumbs AS SELECT id FROM remote_keyed_thumbs c
    WHERE NOT EXISTS (SELECT 1 FROM gone_remote g WHERE g.media_origin = c.origin AND g.media_id = c.media);
`

const keysPolicy = `sweeps:
  - name: media
    passes:
      - name: local
        table: media
        age_column: created_at
        retention: 30d
        delete_with:
          - {table: thumbs, column: media_id, references: media_id, without_foreign_key: true}
      - name: remote
        table: remote_media
        age_column: created_at
        retention: 30d
        keep_while_referenced_by:
          - {table: remote_pins, column: [origin, media], references: [media_origin, media_id]}
        delete_with:
          - table: remote_thumbs
            column: [media_id, media_origin]
            references: [media_id, media_origin]
            without_foreign_key: true
          - {table: remote_keyed_thumbs, column: [media, origin], references: [media_id, media_origin]}
`

// TestKeys sweeps children without a foreign key and keys of two columns, with and without one,
// on every path: every row left is the oracle's, every count the rows it lost, and the dry run
// foresaw them.
func TestKeys(t *testing.T) {
	t.Parallel()
	for _, tp := range testPaths {
		t.Run(tp.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			exec(t, pool, keysSchema)
			at := dbNow(t, pool)
			execEach(t, pool, keysData, at)
			execEach(t, pool, keysOracle, at.Add(-30*24*time.Hour))
			gone := map[string]int64{}
			for table, want := range map[string]string{"media": "want_media", "thumbs": "want_thumbs", "remote_media": "want_remote",
				"remote_thumbs": "want_remote_thumbs", "remote_keyed_thumbs": "want_remote_keyed_thumbs"} {
				gone[table] = count(t, pool, "SELECT count(*) FROM "+table) - count(t, pool, "SELECT count(*) FROM "+want)
			}
			if gone["media"] == 0 || gone["remote_media"] == 0 || gone["remote_thumbs"] == 0 || gone["remote_keyed_thumbs"] == 0 {
				t.Fatalf("oracle: %v; the test would prove nothing", gone)
			}
			t.Logf("oracle: rows gone per table %v", gone)
			pol := load(t, keysPolicy)
			r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: pol.Specs, Settings: fixed(settings(), 7), AsOf: fixedAsOf(at)}, 7))
			dry, err := r.DryRun(ctx, "media")
			if err != nil {
				t.Fatal(err)
			}
			res := run(t, r, "media")
			if res.Error != nil || len(res.Passes) != 2 {
				t.Fatalf("run %+v: error %+v", res, res.Error)
			}
			want := [][]int64{{gone["media"], gone["thumbs"]}, {gone["remote_media"], gone["remote_thumbs"], gone["remote_keyed_thumbs"]}}
			for i, p := range res.Passes {
				got := []int64{p.Deleted}
				for _, c := range p.Children {
					got = append(got, c.Rows)
				}
				foreseen := []int64{*dry.Passes[i].Eligible}
				for _, c := range dry.Passes[i].Children {
					foreseen = append(foreseen, c.Rows)
				}
				if fmt.Sprint(got) != fmt.Sprint(want[i]) || fmt.Sprint(foreseen) != fmt.Sprint(want[i]) {
					t.Errorf("pass %s: counted %v, dry run %v, want %v (own rows, then each child's)", p.Pass, got, foreseen, want[i])
				}
			}
			sameRows(t, pool, "media", "SELECT media_id FROM media", "want_media")
			sameRows(t, pool, "thumbs", "SELECT id::text FROM thumbs", "want_thumbs")
			sameRows(t, pool, "remote_media", "SELECT media_origin || '/' || media_id FROM remote_media", "want_remote")
			sameRows(t, pool, "remote_thumbs", "SELECT id::text FROM remote_thumbs", "want_remote_thumbs")
			sameRows(t, pool, "remote_keyed_thumbs", "SELECT id::text FROM remote_keyed_thumbs", "want_remote_keyed_thumbs")
		})
	}
}

// execEach runs each statement of sql (one per ";" at a line's end), with arg as $1 in those
// that take it.
func execEach(t *testing.T, pool *pgxpool.Pool, sql string, arg any) {
	t.Helper()
	for _, q := range strings.Split(sql, ";\n") {
		switch {
		case strings.Contains(q, "$1"):
			exec(t, pool, q, arg)
		case strings.TrimSpace(q) != "":
			exec(t, pool, q)
		}
	}
}

// sameRows fails unless the rows left (left, a select of one text column) are exactly the
// oracle's table want (column id), row by row.
func sameRows(t *testing.T, pool *pgxpool.Pool, what, left, want string) {
	t.Helper()
	q := fmt.Sprintf(`SELECT (SELECT count(*) FROM (%[1]s EXCEPT SELECT id::text FROM %[2]s) AS x),
	                         (SELECT count(*) FROM (SELECT id::text FROM %[2]s EXCEPT %[1]s) AS x)`, left, want)
	var extra, missing int64
	if err := pool.QueryRow(ctx, q).Scan(&extra, &missing); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	if extra != 0 || missing != 0 {
		t.Errorf("%s: %d rows left that should have gone, %d gone that should have stayed", what, extra, missing)
	}
}

// TestKeysPlan plans a batch of a two-column child on a table too large to read whole: the
// child's rows are looked up, per deleted key, in its two-column index (both columns in the
// index condition), never read by a sequential scan or a hash of the whole table.
func TestKeysPlan(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	exec(t, pool, keysSchema)
	at := dbNow(t, pool)
	exec(t, pool, `INSERT INTO remote_media SELECT 'o' || (i % 4), 'r' || i, $1::timestamptz - (i % 60) * interval '1 day' FROM generate_series(1, 20000) AS i`, at)
	exec(t, pool, `INSERT INTO remote_thumbs (media_origin, media_id) SELECT 'o' || (i % 4), 'r' || i FROM generate_series(1, 20000) AS i, generate_series(1, 5)`)
	exec(t, pool, `ANALYZE remote_media; ANALYZE remote_thumbs`)
	p := load(t, keysPolicy).Specs[0].Passes[1]
	p.Guards, p.DeleteWith = nil, p.DeleteWith[:1]
	f := statement.Build(p, statement.Instant).Unlocked.Range
	from, before := at.Add(-45*24*time.Hour), at.Add(-44*24*time.Hour)
	raw, err := explain.JSON(ctx, pool, 10*time.Second, 2*time.Second, false, f.SQL, at.Add(-30*24*time.Hour), from, before)
	if err != nil {
		t.Fatalf("%v\n%s", err, f.SQL)
	}
	plan := string(raw)
	for _, want := range []string{`"Index Name": "remote_thumbs_key"`, `"Nested Loop"`} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan lacks %s:\n%s", want, plan)
		}
	}
	if !strings.Contains(plan, `"Index Cond": "((media_id = d.r0_0) AND (media_origin = d.r0_1))"`) {
		t.Errorf("the index condition holds not both columns:\n%s", plan)
	}
	if strings.Contains(plan, `"Seq Scan"`) || strings.Contains(plan, `"Hash Join"`) {
		t.Errorf("the child is read whole:\n%s", plan)
	}
}
