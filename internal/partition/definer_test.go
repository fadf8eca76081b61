package partition_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
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

func TestDefiner(t *testing.T) {
	t.Parallel()

	t.Run("a role with EXECUTE alone drops the expired partitions and nothing else", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		d.daily("events", "timestamptz", 6, 4, true)
		d.exec(`CREATE TABLE other (id int)`)
		role, r := d.asRole(`GRANT SELECT, UPDATE, DELETE ON "events" TO @ROLE@`)
		d.exec(partition.DefinerSQL("events", role))

		info, err := partition.Describe(ctx, r.pool, "events", "at")
		if err != nil || info.Definer != `public.sweeprail_drop_events` || info.Owns {
			t.Fatalf("Describe as the role: %+v, %v; want the drop function, not ownership", info, err)
		}
		// The cutoff falls inside day 3: days 0–2 end at or before it, day 3 holds it.
		cutoff := day(3).Add(6 * time.Hour)
		cut := partition.Expired(r.list("events"), cutoff)
		if len(cut.Expired) != 3 || nameOf(cut.Straddle) != "public.events_d3" {
			t.Fatalf("expired %d, straddle %s; want 3 and events_d3", len(cut.Expired), nameOf(cut.Straddle))
		}
		o := opts()
		o.Definer, o.Cutoff = info.Definer, partition.CutoffArg(partition.KeyTimestamptz, cutoff)
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

		// Every refusal, calling the function as the role would, under a lock timeout.
		call := func(rel, cutoff string) error {
			tx, err := r.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '200ms'`); err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(ctx, `SELECT public.sweeprail_drop_events($1::regclass, $2)`, rel, cutoff)
			return err
		}
		arg := partition.CutoffArg(partition.KeyTimestamptz, cutoff)
		for _, c := range []struct{ name, rel, cutoff, want, code string }{
			{"the partition that holds the cutoff", "events_d3", arg, "after the cutoff", "42501"},
			{"a partition past the cutoff", "events_d5", arg, "after the cutoff", "42501"},
			{"the default partition", "events_default", "9999-01-01", "default partition", "42501"},
			{"the table itself", "events", arg, "is not a partition of", "42501"},
			{"another table", "other", arg, "is not a partition of", "42501"},
		} {
			err := call(c.rel, c.cutoff)
			if pgCode(err) != c.code || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %s %q", c.name, err, c.code, c.want)
			}
			if got := d.attached(c.rel); got == "gone" {
				t.Errorf("%s: %s went", c.name, c.rel)
			}
		}
		if _, err := r.pool.Exec(ctx, `SELECT public.sweeprail_drop_events('events_d4', $1)`, "9999-01-01"); pgCode(err) != "55000" {
			t.Errorf("a call without a lock timeout: %v, want 55000", err)
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

	t.Run("an integer key of Unix time, and keep_detached", func(t *testing.T) {
		t.Parallel()
		d := newDB(t)
		d.exec(`CREATE TABLE ticks (id bigint, at bigint NOT NULL) PARTITION BY RANGE (at)`)
		d.exec(`CREATE TABLE ticks_a PARTITION OF ticks FOR VALUES FROM (0) TO (1000)`)
		d.exec(`CREATE TABLE ticks_b PARTITION OF ticks FOR VALUES FROM (1000) TO (2000)`)
		role, r := d.asRole(`GRANT SELECT, UPDATE, DELETE ON ticks TO @ROLE@`)
		d.exec(partition.DefinerSQL("public.ticks", role))
		info, err := partition.Describe(ctx, r.pool, "public.ticks", "at")
		if err != nil || info.Definer == "" {
			t.Fatalf("Describe: %+v, %v", info, err)
		}
		cut := partition.ExpiredEpoch(r.list("public.ticks"), 1000)
		if len(cut.Expired) != 1 {
			t.Fatalf("expired %d, want ticks_a alone", len(cut.Expired))
		}
		o := opts()
		o.Definer, o.Cutoff, o.KeepDetached = info.Definer, partition.CutoffArgEpoch(1000), true
		if out, err := partition.Drop(ctx, r.pool, cut.Expired[0], o); err != nil || !out.Detached || out.Dropped {
			t.Fatalf("detach through the function: %+v, %v", out, err)
		}
		if got := d.attached("ticks_a"); got != "detached" {
			t.Errorf("ticks_a is %s, want detached", got)
		}
		o.Cutoff = partition.CutoffArgEpoch(1999)
		b := byName(r.list("public.ticks"), "public.ticks_b")
		if _, err := partition.Drop(ctx, r.pool, b, o); pgCode(err) != "42501" {
			t.Errorf("ticks_b, ending at 2000, with a cutoff of 1999: %v, want refused", err)
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
		d.exec(partition.DefinerSQL("events", role))
		d.exec(`ALTER FUNCTION public.sweeprail_drop_events(regclass, text, boolean) SECURITY INVOKER`)
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
