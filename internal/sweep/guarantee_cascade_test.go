package sweep_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// cascadeCountCase is one schema whose keys change more than the pass's own table, and what a
// run must count of it: in the answer, the run history and the row metric, and in the dry run.
type cascadeCountCase struct {
	name string
	// schema makes the tables; seed fills them, as of $1 in the statements that name it (the
	// old rows 40 days before it).
	schema   string
	seed     []string
	table    string
	extra    []string
	deleted  int64
	children []wire.ChildRows
	cascades []wire.CascadeRows
	// uncounted says the dry run cannot count the cascades (a key onto the swept table).
	uncounted bool
	// metric is sweeprail_rows_deleted_total per table, updated sweeprail_rows_updated_total;
	// lost the rows each table lost, and changed a query counting the rows a SET NULL or SET
	// DEFAULT key changed.
	metric  map[string]float64
	updated map[string]float64
	lost    map[string]int64
	changed string
}

// oneToOneSchema has members each with a profile of its own, one-to-one, whose keys change more:
// two photos each (CASCADE, as the member's own key onto it), a view each (SET NULL).
const oneToOneSchema = `CREATE TABLE profiles (id bigint PRIMARY KEY);
CREATE TABLE members (id bigint PRIMARY KEY, profile_id bigint UNIQUE REFERENCES profiles (id) ON DELETE CASCADE, at timestamptz NOT NULL);
CREATE TABLE profile_photos (id bigint PRIMARY KEY, profile_id bigint NOT NULL REFERENCES profiles (id) ON DELETE CASCADE);
CREATE INDEX profile_photos_profile_id ON profile_photos (profile_id);
CREATE TABLE profile_views (id bigint PRIMARY KEY, profile_id bigint REFERENCES profiles (id) ON DELETE SET NULL);
CREATE INDEX profile_views_profile_id ON profile_views (profile_id)`

// oneToOneSeed makes 50 members, 1 to 30 old, member i with profile i.
var oneToOneSeed = []string{`INSERT INTO profiles SELECT i FROM generate_series(1, 50) i`,
	`INSERT INTO members SELECT i, i, $1::timestamptz - CASE WHEN i <= 30 THEN interval '40 days' ELSE interval '1 day' END FROM generate_series(1, 50) i`,
	`INSERT INTO profile_photos SELECT i * 2 + k, i FROM generate_series(1, 50) i, generate_series(0, 1) k`,
	`INSERT INTO profile_views SELECT i, i FROM generate_series(1, 50) i`}

var cascadeCountCases = []cascadeCountCase{
	{
		name: "a SET DEFAULT key",
		schema: `CREATE TABLE devices (id bigint PRIMARY KEY, seen_at timestamptz NOT NULL);
CREATE TABLE device_slots (id bigint PRIMARY KEY, device_id bigint DEFAULT NULL REFERENCES devices (id) ON DELETE SET DEFAULT)`,
		seed: []string{`INSERT INTO devices SELECT i, $1::timestamptz - CASE WHEN i <= 30 THEN interval '40 days' ELSE interval '1 day' END FROM generate_series(1, 50) i`,
			`INSERT INTO device_slots SELECT i, i FROM generate_series(1, 50) i`},
		table: "devices", extra: []string{"age_column: seen_at", "cascades: [device_slots]"},
		deleted:  30,
		cascades: []wire.CascadeRows{{Table: "device_slots", Updated: 30}},
		metric:   map[string]float64{"devices": 30, "device_slots": 0},
		updated:  map[string]float64{"device_slots": 30},
		lost:     map[string]int64{"devices": 30, "device_slots": 0},
		changed:  `SELECT count(*) FROM device_slots WHERE device_id IS NULL`,
	},
	{
		name: "a partitioned cascade table, counted through its partitions",
		schema: `CREATE TABLE apps (id bigint PRIMARY KEY, seen_at timestamptz NOT NULL);
CREATE TABLE app_events (id bigint, app_id bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE, at timestamptz NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE app_events_old PARTITION OF app_events FOR VALUES FROM (MINVALUE) TO ('2000-01-01');
CREATE TABLE app_events_new PARTITION OF app_events FOR VALUES FROM ('2000-01-01') TO (MAXVALUE)`,
		seed: []string{`INSERT INTO apps SELECT i, $1::timestamptz - CASE WHEN i <= 30 THEN interval '40 days' ELSE interval '1 day' END FROM generate_series(1, 50) i`,
			`INSERT INTO app_events SELECT i * 2 + k, i, CASE k WHEN 0 THEN timestamptz '1999-06-01' ELSE $1::timestamptz END FROM generate_series(1, 50) i, generate_series(0, 1) k`},
		table: "apps", extra: []string{"age_column: seen_at", "cascades: [app_events]"},
		deleted:  30,
		cascades: []wire.CascadeRows{{Table: "app_events", Deleted: 60}},
		metric:   map[string]float64{"apps": 30, "app_events": 60},
		lost:     map[string]int64{"apps": 30, "app_events": 60, "app_events_old": 30, "app_events_new": 30},
	},
	{
		// Ten old comments with two young replies each: the statement deletes the ten, the key
		// onto the table the twenty replies.
		name: "a key of the swept table onto itself",
		schema: `CREATE TABLE comments (id bigint PRIMARY KEY, parent_id bigint REFERENCES comments (id) ON DELETE CASCADE, at timestamptz NOT NULL);
CREATE INDEX comments_parent_id ON comments (parent_id)`,
		seed: []string{`INSERT INTO comments SELECT i, NULL, $1::timestamptz - CASE WHEN i <= 10 THEN interval '40 days' ELSE interval '1 day' END FROM generate_series(1, 20) i`,
			`INSERT INTO comments SELECT 100 + i * 2 + k, i, $1::timestamptz FROM generate_series(1, 20) i, generate_series(0, 1) k`},
		table: "comments", extra: []string{"age_column: at", "cascades: [comments]"},
		deleted:   10,
		cascades:  []wire.CascadeRows{{Table: "comments", Deleted: 20}},
		uncounted: true,
		metric:    map[string]float64{"comments": 30},
		lost:      map[string]int64{"comments": 30},
	},
	{
		// Each old post has a file of its own (the delete_with key) and a token; a file of a
		// young post referencing an old post's token goes by the keys alone. Its own file is
		// the child's, the other the cascade's: each counted once.
		name: "a delete_with child a cascade also reaches",
		schema: `CREATE TABLE posts (id bigint PRIMARY KEY, at timestamptz NOT NULL);
CREATE TABLE post_tokens (id bigint PRIMARY KEY, post_id bigint NOT NULL REFERENCES posts (id) ON DELETE CASCADE);
CREATE TABLE post_files (id bigint PRIMARY KEY, post_id bigint NOT NULL REFERENCES posts (id),
    token_id bigint REFERENCES post_tokens (id) ON DELETE CASCADE);
CREATE INDEX post_files_post_id ON post_files (post_id)`,
		seed: []string{`INSERT INTO posts SELECT i, $1::timestamptz - CASE WHEN i <= 30 THEN interval '40 days' ELSE interval '1 day' END FROM generate_series(1, 50) i`,
			`INSERT INTO post_tokens SELECT i, i FROM generate_series(1, 50) i`,
			`INSERT INTO post_files SELECT i, i, i FROM generate_series(1, 50) i`,
			`INSERT INTO post_files SELECT 100 + i, 31 + (i - 1) % 20, i FROM generate_series(1, 30) i`},
		table: "posts", extra: []string{"age_column: at", "delete_with:", "  - {table: post_files, column: post_id}", "cascades: [post_tokens, post_files]"},
		deleted:  30,
		children: []wire.ChildRows{{Table: "post_files", Column: "post_id", Rows: 30}},
		cascades: []wire.CascadeRows{{Table: "post_tokens", Deleted: 30}, {Table: "post_files", Deleted: 30}},
		metric:   map[string]float64{"posts": 30, "post_tokens": 30, "post_files": 60},
		lost:     map[string]int64{"posts": 30, "post_tokens": 30, "post_files": 60},
	},
	{
		// Each old member's profile goes with it (delete_with a one-to-one parent), and by the
		// profile's own keys its photos and its views' reference; its key back onto members
		// finds only the members the statement deletes itself.
		name:   "a one-to-one parent with its own CASCADE keys",
		schema: oneToOneSchema, seed: oneToOneSeed,
		table: "members", extra: []string{"age_column: at", "delete_with:", "  - {table: profiles, column: id, references: profile_id}",
			"cascades: [members, profile_photos, profile_views]"},
		deleted:  30,
		children: []wire.ChildRows{{Table: "profiles", Column: "id", Rows: 30}},
		cascades: []wire.CascadeRows{{Table: "members"}, {Table: "profile_photos", Deleted: 60}, {Table: "profile_views", Updated: 30}},
		metric:   map[string]float64{"members": 30, "profiles": 30, "profile_photos": 60, "profile_views": 0},
		updated:  map[string]float64{"members": 0, "profile_photos": 0, "profile_views": 30},
		lost:     map[string]int64{"members": 30, "profiles": 30, "profile_photos": 60, "profile_views": 0},
		changed:  `SELECT count(*) FROM profile_views WHERE profile_id IS NULL`,
	},
	{
		// Old members 1 to 5 sponsor the profiles of young members 31 to 35, which their keys
		// delete, and so those members: a cycle through the parent, which the dry run cannot
		// follow, and the run counts.
		name: "a one-to-one parent a cascade deletes more of",
		schema: oneToOneSchema + `;
ALTER TABLE profiles ADD sponsor_id bigint REFERENCES members (id) ON DELETE CASCADE`,
		seed:  append(slices.Clone(oneToOneSeed), `UPDATE profiles SET sponsor_id = id - 30 WHERE id BETWEEN 31 AND 35`),
		table: "members", extra: []string{"age_column: at", "delete_with:", "  - {table: profiles, column: id, references: profile_id}",
			"cascades: [profiles, members, profile_photos, profile_views]"},
		deleted:  30,
		children: []wire.ChildRows{{Table: "profiles", Column: "id", Rows: 30}},
		cascades: []wire.CascadeRows{{Table: "profiles", Deleted: 5}, {Table: "members", Deleted: 5},
			{Table: "profile_photos", Deleted: 70}, {Table: "profile_views", Updated: 35}},
		uncounted: true,
		metric:    map[string]float64{"members": 35, "profiles": 35, "profile_photos": 70, "profile_views": 0},
		updated:   map[string]float64{"profile_views": 35},
		lost:      map[string]int64{"members": 35, "profiles": 35, "profile_photos": 70, "profile_views": 0},
	},
}

// TestCascadeCounts holds what a run counts of the rows the schema's keys change, case by case:
// the answer, the history, the metric and the dry run each say what the tables lost, once.
func TestCascadeCounts(t *testing.T) {
	t.Parallel()
	for _, tc := range cascadeCountCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			exec(t, pool, tc.schema)
			at := dbNow(t, pool)
			for _, sql := range tc.seed {
				if strings.Contains(sql, "$1") {
					exec(t, pool, sql, at)
				} else {
					exec(t, pool, sql)
				}
			}
			yaml := "sweeps:\n  - name: s\n    passes:\n      - name: p\n        table: " + tc.table + "\n        retention: 30d\n"
			for _, e := range tc.extra {
				yaml += "        " + e + "\n"
			}
			pol, err := policy.Load("p.yaml", []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			met, err := metrics.New(reg, httpapi.MetricLabels(pol.Specs))
			if err != nil {
				t.Fatal(err)
			}
			store := history.New(pool, 30*24*time.Hour)
			r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: fixed(settings(), 7), AsOf: fixedAsOf(at), Metrics: met, History: store})

			dry, err := r.DryRun(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			dp := dry.Passes[0]
			switch {
			case tc.uncounted && !dp.CascadesUncounted:
				t.Errorf("dry run: cascades %+v, want them uncounted (a key onto the swept table)", dp.Cascades)
			case !tc.uncounted && (!slices.Equal(dp.Cascades, tc.cascades) || !slices.Equal(dp.Children, tc.children)):
				t.Errorf("dry run: children %+v, cascades %+v; want %+v and %+v", dp.Children, dp.Cascades, tc.children, tc.cascades)
			}
			before := map[string]int64{}
			for tbl := range tc.lost {
				before[tbl] = count(t, pool, "SELECT count(*) FROM "+tbl)
			}
			res := run(t, r, "s")
			if res.Error != nil {
				t.Fatalf("run: %+v", res.Error)
			}
			rp := res.Passes[0]
			if rp.Deleted != tc.deleted || !slices.Equal(rp.Children, tc.children) || !slices.Equal(rp.Cascades, tc.cascades) {
				t.Errorf("run: deleted %d, children %+v, cascades %+v; want %d, %+v and %+v", rp.Deleted, rp.Children, rp.Cascades, tc.deleted, tc.children, tc.cascades)
			}
			for tbl, lost := range tc.lost {
				if got := before[tbl] - count(t, pool, "SELECT count(*) FROM "+tbl); got != lost {
					t.Errorf("table %s lost %d rows, want %d", tbl, got, lost)
				}
			}
			if tc.changed != "" {
				if n := count(t, pool, tc.changed); n != 30 {
					t.Errorf("%d rows changed by the key, want 30", n)
				}
			}
			runs, err := store.List(ctx, "s", 1)
			if err != nil || len(runs) != 1 || !slices.Equal(runs[0].Passes[0].Cascades, tc.cascades) {
				t.Errorf("history %+v (%v): want cascades %+v", runs, err, tc.cascades)
			}
			for tbl, n := range tc.metric {
				if got := counterValue(t, reg, "sweeprail_rows_deleted_total", map[string]string{"sweep": "s", "pass": "p", "table": tbl}); got != n {
					t.Errorf("sweeprail_rows_deleted_total{table=%q} = %v, want %v", tbl, got, n)
				}
			}
			for tbl, n := range tc.updated {
				if got := counterValue(t, reg, "sweeprail_rows_updated_total", map[string]string{"sweep": "s", "pass": "p", "table": tbl}); got != n {
					t.Errorf("sweeprail_rows_updated_total{table=%q} = %v, want %v", tbl, got, n)
				}
			}
		})
	}
}
