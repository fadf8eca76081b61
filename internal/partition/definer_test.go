package partition_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/partition"
)

// asRole creates a login role that owns nothing and holds only what grants give it, and a pool
// connected as it.
func (d *db) asRole(grants ...string) (string, *db) {
	d.t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		d.t.Fatal(err)
	}
	role := "sweeper_" + hex.EncodeToString(b)
	d.exec(`CREATE ROLE ` + role + ` LOGIN PASSWORD 'change-me' NOSUPERUSER NOCREATEDB NOCREATEROLE`)
	d.t.Cleanup(func() {
		_, _ = d.pool.Exec(ctx, `DROP OWNED BY `+role)
		_, _ = d.pool.Exec(ctx, `DROP ROLE `+role)
	})
	for _, g := range grants {
		d.exec(strings.ReplaceAll(g, "@ROLE@", role))
	}
	u, err := url.Parse(d.url)
	if err != nil {
		d.t.Fatal(err)
	}
	u.User = url.UserPassword(role, "change-me")
	pool, err := dbpool.NewPool(ctx, u.String())
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(pool.Close)
	return role, &db{t: d.t, url: u.String(), pool: pool}
}

// windowTo is a window whose cutoff, on the database clock now, is at: the retention from at to now.
func windowTo(at time.Time) partition.Window {
	return partition.Window{Retention: time.Since(at).Truncate(time.Second), TimeZone: "UTC"}
}

// callAs calls the drop function as pool's role on rel, in a transaction under lockTimeout.
func callAs(t *testing.T, r *db, fn, rel, lockTimeout string) error {
	t.Helper()
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, lockTimeout); err != nil {
		t.Fatal(err)
	}
	if _, err = tx.Exec(ctx, `SELECT `+fn+`($1::regclass)`, rel); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func TestDefiner(t *testing.T) {
	t.Parallel()

	t.Run("a role with EXECUTE alone drops the expired partitions and nothing else", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		d.daily("events", "timestamptz", 6, 4, true)
		d.exec(`CREATE TABLE other (id int)`)
		role, r := d.asRole(`GRANT SELECT, UPDATE, DELETE ON "events" TO @ROLE@`)
		// The function's cutoff falls inside day 3: days 0–2 end at or before it, day 3 holds it.
		cutoff := day(3).Add(6 * time.Hour)
		d.exec(partition.DefinerSQL("events", role, windowTo(cutoff)))

		info, err := partition.Describe(ctx, r.pool, "events", "at")
		if err != nil || info.Definer != `public.sweeprail_drop_events` || info.Owns {
			t.Fatalf("Describe as the role: %+v, %v; want the drop function, not ownership", info, err)
		}
		cut := partition.Expired(r.list("events"), cutoff)
		if len(cut.Expired) != 3 || nameOf(cut.Straddle) != "public.events_d3" {
			t.Fatalf("expired %d, straddle %s; want 3 and events_d3", len(cut.Expired), nameOf(cut.Straddle))
		}
		o := opts()
		o.Definer = info.Definer
		for _, p := range cut.Expired {
			out, err := partition.Drop(ctx, r.pool, p, o)
			if err != nil || !out.Dropped || out.Concurrently {
				t.Fatalf("drop %s through the function: %+v, %v", p.Name, out, err)
			}
		}
		for i, want := range []string{"gone", "gone", "gone", "attached", "attached", "attached"} {
			if got := d.attached("events_d" + string(rune('0'+i))); got != want {
				t.Errorf("events_d%d is %s, want %s", i, got, want)
			}
		}

		// Every refusal, calling the function as the role would: whatever the caller's clock or
		// settings, the cutoff is the function's own.
		for _, c := range []struct{ name, rel, lock, want, code string }{
			{"the partition that holds the cutoff", "events_d3", "200ms", "after the cutoff", "42501"},
			{"a partition past the cutoff", "events_d5", "200ms", "after the cutoff", "42501"},
			{"the default partition", "events_default", "200ms", "default partition", "42501"},
			{"the table itself", "events", "200ms", "is not a partition of", "42501"},
			{"another table", "other", "200ms", "is not a partition of", "42501"},
			{"no lock timeout", "events_d4", "0", "lock_timeout of 0 ms", "55000"},
			{"a lock timeout above a minute", "events_d4", "2147483647", "lock_timeout of 2147483647 ms", "55000"},
			{"a lock timeout just above a minute", "events_d4", "60001ms", "lock_timeout of 60001 ms", "55000"},
		} {
			err := callAs(t, r, "public.sweeprail_drop_events", c.rel, c.lock)
			if pgCode(err) != c.code || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %s %q", c.name, err, c.code, c.want)
			}
			if got := d.attached(c.rel); got == "gone" {
				t.Errorf("%s: %s went", c.name, c.rel)
			}
		}
		// The signature that took the caller's cutoff is gone: no function answers it.
		if _, err := r.pool.Exec(ctx, `SELECT public.sweeprail_drop_events('events_d5', 'infinity', false)`); pgCode(err) != "42883" {
			t.Errorf("a call with a cutoff of its own: %v, want 42883 (no such function)", err)
		}
		for _, stmt := range []string{`DROP TABLE events`, `DROP TABLE events_d4`, `ALTER TABLE events DETACH PARTITION events_d4`, `TRUNCATE events`} {
			if _, err := r.pool.Exec(ctx, stmt); pgCode(err) != "42501" {
				t.Errorf("%s as the role: %v, want 42501", stmt, err)
			}
		}
		if n := d.int(`SELECT count(*) FROM events`); n != 3*4+2 {
			t.Errorf("%d rows left, want days 3–5 and the default partition's 2", n)
		}
	})

	t.Run("granting again replaces the function that took the caller's cutoff", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		d.daily("events", "timestamptz", 3, 0, false)
		role, r := d.asRole(`GRANT SELECT, UPDATE, DELETE ON "events" TO @ROLE@`)
		d.exec(`CREATE FUNCTION public.sweeprail_drop_events(part regclass, cutoff text, keep boolean DEFAULT false)
RETURNS text LANGUAGE sql SECURITY DEFINER AS 'SELECT 1::text'`)
		d.exec(partition.DefinerSQL("events", role, windowTo(day(1))))
		if n := d.int(`SELECT count(*) FROM pg_proc WHERE proname = 'sweeprail_drop_events'`); n != 1 {
			t.Errorf("%d drop functions, want the new one alone", n)
		}
		if err := callAs(t, r, "public.sweeprail_drop_events", "events_d0", "1min"); err != nil {
			t.Errorf("a lock timeout of a minute exactly: %v", err)
		}
		def, err := partition.FindDefiner(ctx, r.pool, "events")
		if err != nil || !def.Usable || def.Window.TimeZone != "UTC" || def.Window.Retention < time.Hour {
			t.Errorf("FindDefiner: %+v, %v", def, err)
		}
	})

	t.Run("an integer key of Unix time, and keep_detached", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		now := time.Now().Unix()
		d.exec(`CREATE TABLE ticks (id bigint, at bigint NOT NULL) PARTITION BY RANGE (at)`)
		d.exec(fmt.Sprintf(`CREATE TABLE ticks_a PARTITION OF ticks FOR VALUES FROM (0) TO (%d)`, now-7200))
		d.exec(fmt.Sprintf(`CREATE TABLE ticks_b PARTITION OF ticks FOR VALUES FROM (%d) TO (%d)`, now-7200, now+7200))
		role, r := d.asRole(`GRANT SELECT, UPDATE, DELETE ON ticks TO @ROLE@`)
		d.exec(partition.DefinerSQL("public.ticks", role, partition.Window{Retention: time.Hour, UnitsPerSecond: 1}))
		info, err := partition.Describe(ctx, r.pool, "public.ticks", "at")
		if err != nil || info.Definer == "" {
			t.Fatalf("Describe: %+v, %v", info, err)
		}
		o := opts()
		o.Definer, o.KeepDetached = info.Definer, true
		parts := r.list("public.ticks")
		if out, err := partition.Drop(ctx, r.pool, byName(parts, "public.ticks_a"), o); err != nil || !out.Detached || out.Dropped {
			t.Fatalf("detach through the function: %+v, %v", out, err)
		}
		if got := d.attached("ticks_a"); got != "detached" {
			t.Errorf("ticks_a is %s, want detached", got)
		}
		if _, err := partition.Drop(ctx, r.pool, byName(parts, "public.ticks_b"), o); pgCode(err) != "42501" {
			t.Errorf("ticks_b, ending two hours from now, with a retention of an hour: %v, want refused", err)
		}
	})

	t.Run("without ownership or the function the check refuses naming the fix", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		d.daily("events", "timestamptz", 2, 0, false)
		role, r := d.asRole(`GRANT SELECT, UPDATE, DELETE ON "events" TO @ROLE@`)
		_, err := partition.Describe(ctx, r.pool, "events", "at")
		var refused *partition.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "no drop function public.sweeprail_drop_events") ||
			!strings.Contains(refused.Reason, "api grants") {
			t.Fatalf("Describe: %v, want refused naming the drop function", err)
		}
		// A function of that name that is not the owner's SECURITY DEFINER one is not used.
		d.exec(partition.DefinerSQL("events", role, windowTo(day(1))))
		d.exec(`ALTER FUNCTION public.sweeprail_drop_events(regclass, boolean) SECURITY INVOKER`)
		if _, err := partition.Describe(ctx, r.pool, "events", "at"); !errors.As(err, &refused) || !strings.Contains(refused.Reason, "is not SECURITY DEFINER") {
			t.Fatalf("Describe with an invoker's function: %v, want refused", err)
		}
	})

	t.Run("a long table name", func(t *testing.T) {
		t.Parallel()
		long := strings.Repeat("a", 60)
		if n := partition.DefinerName(long); len(n) != 63 || n == partition.DefinerName(long[:59]+"b") {
			t.Errorf("DefinerName(%d bytes) = %q", len(long), n)
		}
		if n := partition.DefinerName("events"); n != "sweeprail_drop_events" {
			t.Errorf("DefinerName(events) = %q", n)
		}
	})
}
