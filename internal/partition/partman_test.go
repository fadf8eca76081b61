package partition_test

import (
	"os"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/partition"
)

// requirePartman skips the test when the server lacks pg_partman, or fails it under CI=true,
// where .ci/run installs it (scripts/pg ensure-ext partman) for Debian's server. The other
// versions of make test-matrix (PG_VERSION) come without it, and skip.
func requirePartman(t *testing.T, d *db) {
	t.Helper()
	if d.int("SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_partman'") == 1 {
		return
	}
	msg := "pg_partman is not installed on the test server: run scripts/pg ensure-ext partman (Debian's postgresql-15-partman)"
	if v := os.Getenv("PG_VERSION"); os.Getenv("CI") == "true" && (v == "" || v == "15") {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// TestPartman runs the rail over a set pg_partman (v4, Debian's postgresql-15-partman) manages:
// daily partitions made ahead, partman's own retention off. The rail drops the expired ones exactly,
// and partman's maintenance goes on working after it: it makes the partitions ahead, no error.
func TestPartman(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	requirePartman(t, d)
	d.exec("CREATE SCHEMA partman")
	d.exec("CREATE EXTENSION pg_partman SCHEMA partman")
	d.exec("CREATE TABLE public.events (id bigint GENERATED ALWAYS AS IDENTITY, at timestamptz NOT NULL, note text) PARTITION BY RANGE (at)")
	// v4's signature: p_type 'native' (v5 dropped it), p_interval a word or an interval.
	d.exec(`SELECT partman.create_parent(p_parent_table := 'public.events', p_control := 'at', p_type := 'native',
	           p_interval := 'daily', p_premake := 3, p_start_partition := (current_date - 10)::text)`)
	if n := d.int("SELECT count(*) FROM partman.part_config WHERE parent_table = 'public.events' AND retention IS NULL"); n != 1 {
		t.Fatal("partman's retention is not off")
	}
	// A row every 10 minutes from 10 days ago to 2 days ahead, and one long ago, in the default
	// partition (partman made one).
	d.exec(`INSERT INTO events (at, note)
SELECT date_trunc('day', now()) - interval '10 days' + i * interval '10 minutes', 'row'
FROM generate_series(0, 12 * 24 * 6 - 1) i`)
	d.exec("INSERT INTO events (at, note) VALUES (now() - interval '100 days', 'in the default partition')")
	d.exec("CREATE TABLE oracle_events AS SELECT id, at, tableoid::regclass::text AS part FROM events")

	var now time.Time
	if err := d.pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	cutoff := now.Add(-5 * 24 * time.Hour).UTC() // as the runner computes it: reference minus retention

	info, err := partition.Describe(ctx, d.pool, "events", "at")
	if err != nil {
		t.Fatal(err)
	}
	if !info.HasDefault || info.Key != partition.KeyTimestamptz {
		t.Errorf("describe: %+v", info)
	}
	cut := partition.Expired(d.list("events"), cutoff)
	if len(cut.Expired) != 5 || cut.Straddle == nil || cut.Default == nil || cut.Default.Name != "public.events_default" {
		t.Fatalf("cut at %v: %d expired, straddle %s, default %s", cutoff, len(cut.Expired), nameOf(cut.Straddle), nameOf(cut.Default))
	}
	for _, p := range cut.Expired {
		out := d.drop(p, opts())
		// partman made a default partition: the server refuses CONCURRENTLY, Drop detaches plainly.
		if !out.Dropped || out.Concurrently {
			t.Errorf("%s: %+v", p.Name, out)
		}
	}

	// The oracle, by partman's rule rather than ours: a row goes when its whole day (in the
	// session's time zone, as partman cut the days) ended by the cutoff; the default's rows stay.
	var missing, extra int64
	if err := d.pool.QueryRow(ctx, `
WITH want AS (SELECT id FROM oracle_events WHERE part = 'events_default' OR date_trunc('day', at) + interval '1 day' > $1),
     got AS (SELECT id FROM events)
SELECT (SELECT count(*) FROM (SELECT id FROM want EXCEPT SELECT id FROM got) m),
       (SELECT count(*) FROM (SELECT id FROM got EXCEPT SELECT id FROM want) e)`, cutoff).Scan(&missing, &extra); err != nil {
		t.Fatal(err)
	}
	gone := d.int("SELECT count(*) FROM oracle_events") - d.int("SELECT count(*) FROM events")
	if missing != 0 || extra != 0 || gone != 5*24*6 {
		t.Errorf("%d rows missing, %d that should be gone; %d gone, want 5 days of 144", missing, extra, gone)
	}
	if again := partition.Expired(d.list("events"), cutoff); len(again.Expired) != 0 {
		t.Errorf("a second pass finds %d expired partitions", len(again.Expired))
	}

	// partman's maintenance after the rail: no error, and it makes the partitions ahead when asked
	// for more of them.
	d.exec("SELECT partman.run_maintenance('public.events')")
	d.exec("UPDATE partman.part_config SET premake = 6 WHERE parent_table = 'public.events'")
	d.exec("SELECT partman.run_maintenance()")
	ahead := now.Add(6 * 24 * time.Hour)
	found := false
	for _, p := range d.list("events") {
		if !p.Default && !p.Lower.Time.After(ahead) && p.Upper.Time.After(ahead) {
			found = true
		}
	}
	if !found {
		t.Errorf("run_maintenance made no partition for %v (premake 6)", ahead)
	}
}
