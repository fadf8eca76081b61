package sweep_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/demo"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// poolWith opens a pool on u whose sessions carry params (TimeZone, planner settings).
func poolWith(t *testing.T, u string, params map[string]string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestIndexVerdict checks that a pass is accepted only when an index bounds its age column, and
// that the verdict is the schema's, not the statistics': the same on an empty, a tiny and a large
// table, and after a sweep.
func TestIndexVerdict(t *testing.T) {
	t.Parallel()

	t.Run("an index on the where alone is refused, with the partial index that serves it", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		// Oban's shape: completed jobs age by scheduled_at, and the only index is on state.
		exec(t, pool, `CREATE TABLE jobs (id bigserial PRIMARY KEY, state text NOT NULL, scheduled_at timestamptz NOT NULL)`)
		exec(t, pool, `CREATE INDEX jobs_state ON jobs (state)`)
		exec(t, pool, `INSERT INTO jobs (state, scheduled_at) SELECT CASE WHEN i % 10 = 0 THEN 'available' ELSE 'completed' END,
			now() - i * interval '1 second' FROM generate_series(1, 20000) i`)
		analyze(t, pool, `ANALYZE jobs`)
		pol, err := policy.Load("jobs.yaml", []byte(`sweeps:
  - name: jobs
    passes:
      - name: completed
        table: jobs
        age_column: scheduled_at
        retention: 1h
        where: t.state = 'completed'
`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = check.Policy(ctx, pool, pol)
		want := `CREATE INDEX CONCURRENTLY ON jobs (scheduled_at) WHERE state = 'completed';`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("check: %v\nwant a refusal suggesting %s", err, want)
		}
		r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings()})
		if dr, err := r.DryRun(ctx, "jobs"); err != nil || dr.Passes[0].Indexed {
			t.Fatalf("dry run: %+v %v, want indexed false", dr, err)
		}
		exec(t, pool, strings.TrimSuffix(strings.Replace(want, " CONCURRENTLY", "", 1), ";"))
		if _, err := check.Policy(ctx, pool, pol); err != nil {
			t.Fatalf("check with the suggested index: %v", err)
		}
		if dr, err := r.DryRun(ctx, "jobs"); err != nil || !dr.Passes[0].Indexed {
			t.Fatalf("dry run: %+v %v, want indexed true", dr, err)
		}
	})

	t.Run("the bundled passes get one verdict on an empty, a 200-row and a 1M-row database, and after a sweep", func(t *testing.T) {
		t.Parallel()
		verdicts := func(t *testing.T, pool *pgxpool.Pool) string {
			t.Helper()
			_, checkErr := check.Policy(ctx, pool, policy.Default())
			r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings()})
			var b strings.Builder
			fmt.Fprintf(&b, "check: %v\n", checkErr)
			for _, s := range policy.Catalog() {
				dr, err := r.DryRun(ctx, s.Name)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range dr.Passes {
					fmt.Fprintf(&b, "%s/%s indexed=%t\n", s.Name, p.Pass, p.Indexed)
				}
			}
			return b.String()
		}
		empty := verdicts(t, dbtest.Pool(t))
		if strings.Contains(empty, "indexed=false") || !strings.HasPrefix(empty, "check: <nil>") {
			t.Fatalf("empty database:\n%s", empty)
		}
		for _, rows := range []int{200, 1_000_000} {
			pool := dbtest.Pool(t)
			if err := demo.Seed(ctx, pool, rows, io.Discard); err != nil {
				t.Fatal(err)
			}
			analyze(t, pool, "ANALYZE")
			if got := verdicts(t, pool); got != empty {
				t.Errorf("%d rows:\n%s\nwant as on the empty database:\n%s", rows, got, empty)
			}
			if rows > 200 {
				continue
			}
			r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings()})
			for _, s := range policy.Catalog() {
				run(t, r, s.Name)
			}
			analyze(t, pool, "ANALYZE")
			if got := verdicts(t, pool); got != empty {
				t.Errorf("after a sweep of %d rows:\n%s\nwant as on the empty database:\n%s", rows, got, empty)
			}
		}
	})
}

// TestDryRunEstimate checks the estimate under a parallel plan, where the count's aggregate sits
// above a Gather of partial aggregates.
func TestDryRunEstimate(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t)
	pool := poolWith(t, u, map[string]string{
		"parallel_setup_cost": "0", "parallel_tuple_cost": "0", "min_parallel_table_scan_size": "0",
		"max_parallel_workers_per_gather": "2",
	})
	exec(t, pool, `CREATE TABLE events (id bigint, created_at timestamptz NOT NULL)`)
	exec(t, pool, `INSERT INTO events SELECT i, now() - (i % 100) * interval '1 day' FROM generate_series(1, 200000) i`)
	analyze(t, pool, `ANALYZE events`)
	var plan string
	if err := pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) SELECT count(*) FROM events t WHERE t.created_at < now() - interval '30 days'`).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "Gather") {
		t.Fatalf("precondition: want a parallel plan, got %s", plan)
	}
	spec := policy.Spec{Name: "events", Passes: []policy.Pass{{Name: "old", Table: "events", AgeColumn: "created_at",
		Retention: 30 * 24 * time.Hour, AllowUnindexed: true}}}
	r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec}, Settings: settings()})
	dr, err := r.DryRun(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	p := dr.Passes[0]
	if p.Eligible == nil || p.Estimate < *p.Eligible/2 || p.Estimate > *p.Eligible*2 {
		t.Fatalf("estimate %d for %v eligible: want within a factor of two", p.Estimate, p.Eligible)
	}
}

// TestShortRetention checks the opt-in below the 1h floor.
func TestShortRetention(t *testing.T) {
	t.Parallel()
	policyYAML := func(extra string) string {
		return `sweeps:
  - name: jobs
    passes:
      - name: done
        table: jobs
        age_column: finished_at
        retention: 60s
` + extra
	}
	t.Run("refused without the opt-in", func(t *testing.T) {
		_, err := policy.Load("p.yaml", []byte(policyYAML("")))
		if err == nil || !strings.Contains(err.Error(), "p.yaml:7: pass \"done\" of sweep \"jobs\": retention 1m is below the floor of 1h") ||
			!strings.Contains(err.Error(), "allow_short_retention") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("below a minute refused even with it", func(t *testing.T) {
		_, err := policy.Load("p.yaml", []byte(strings.Replace(policyYAML("        allow_short_retention: true\n"), "60s", "30s", 1)))
		if err == nil || !strings.Contains(err.Error(), "below the floor of 1m") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("exact with it", func(t *testing.T) {
		t.Parallel()
		pol, err := policy.Load("p.yaml", []byte(policyYAML("        allow_short_retention: true\n")))
		if err != nil {
			t.Fatal(err)
		}
		pool := dbtest.Pool(t)
		exec(t, pool, `CREATE TABLE jobs (id int, finished_at timestamptz NOT NULL)`)
		exec(t, pool, `CREATE INDEX ON jobs (finished_at)`)
		at := dbNow(t, pool)
		// 59s, exactly 60s (at the cutoff: kept) and 61s old; 10 minutes old.
		exec(t, pool, `INSERT INTO jobs VALUES (1, $1::timestamptz - interval '59 seconds'), (2, $1::timestamptz - interval '60 seconds'),
			(3, $1::timestamptz - interval '61 seconds'), (4, $1::timestamptz - interval '10 minutes')`, at)
		r := newRunner(t, sweep.Config{Pool: pool, Specs: pol.Specs, Settings: settings(), AsOf: fixedAsOf(at)})
		if res := run(t, r, "jobs"); res.Deleted != 2 {
			t.Fatalf("deleted %d, want the 2 rows older than 60s", res.Deleted)
		}
		if n := count(t, pool, `SELECT count(*) FROM jobs WHERE id IN (1, 2)`); n != 2 {
			t.Fatal("a row within 60s was deleted")
		}
	})
}

// TestOneCutoff checks that a dry run counts what the run then deletes when the API's zone is not
// UTC (its reference time arrives in Asia/Tokyo) and the database's is America/Los_Angeles, on
// timestamp and timestamptz columns.
func TestOneCutoff(t *testing.T) {
	t.Parallel()
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	for _, typ := range []string{"timestamp", "timestamptz"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			pool := poolWith(t, dbtest.URL(t), map[string]string{"timezone": "America/Los_Angeles"})
			exec(t, pool, fmt.Sprintf(`CREATE TABLE stamps (id int, at %s NOT NULL)`, typ))
			exec(t, pool, `CREATE INDEX ON stamps (at)`)
			// Every 10 minutes over two days around the cutoff (now - 1d), naive values in UTC.
			exec(t, pool, fmt.Sprintf(`INSERT INTO stamps SELECT i, (now() AT TIME ZONE 'UTC')::%[1]s - interval '1 day' + i * interval '10 minutes'
				FROM generate_series(-144, 144) i`, typ))
			if typ == "timestamptz" {
				exec(t, pool, `UPDATE stamps SET at = (now() - interval '1 day' + id * interval '10 minutes')`)
			}
			asOf := func(ctx context.Context) (time.Time, error) {
				var now time.Time
				err := pool.QueryRow(ctx, "SELECT now()").Scan(&now)
				return now.In(tokyo), err // as pgx hands it to a process whose zone is Asia/Tokyo
			}
			spec := policy.Spec{Name: "stamps", Passes: []policy.Pass{{Name: "old", Table: "stamps", AgeColumn: "at", Retention: 24 * time.Hour}}}
			r := newRunner(t, sweep.Config{Pool: pool, Specs: []policy.Spec{spec}, Settings: settings(), AsOf: asOf})
			dr, err := r.DryRun(ctx, "stamps")
			if err != nil {
				t.Fatal(err)
			}
			res := run(t, r, "stamps")
			if dr.Passes[0].Eligible == nil || *dr.Passes[0].Eligible != res.Deleted {
				t.Fatalf("dry run counted %v, the run deleted %d", dr.Passes[0].Eligible, res.Deleted)
			}
			if res.Deleted < 140 || res.Deleted > 146 {
				t.Fatalf("deleted %d of 289 rows, want the ~145 older than a day", res.Deleted)
			}
		})
	}
}
