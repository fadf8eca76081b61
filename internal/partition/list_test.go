package partition_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/partition"
)

func TestList(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(`CREATE SCHEMA "Logs"`)
	d.exec(`CREATE TABLE "Logs"."Events" (at timestamptz NOT NULL) PARTITION BY RANGE (at)`)
	d.exec(`CREATE TABLE "Logs"."Events 2" PARTITION OF "Logs"."Events" FOR VALUES FROM ('2026-03-11 00:00:00+00') TO ('2026-03-12 00:00:00+00')`)
	d.exec(`CREATE TABLE "Logs".ev_old PARTITION OF "Logs"."Events" FOR VALUES FROM (MINVALUE) TO ('2026-03-11 00:00:00+00')`)
	d.exec(`CREATE TABLE "Logs".ev_rest PARTITION OF "Logs"."Events" FOR VALUES FROM ('2026-03-12 00:00:00+00') TO ('infinity')`)
	d.exec(`INSERT INTO "Logs"."Events" SELECT '2026-03-11'::timestamptz + i * interval '1 second' FROM generate_series(1, 500) i`)
	d.exec(`ANALYZE "Logs"."Events 2"`)

	want := []struct {
		name         string
		lower, upper partition.Bound
		rows         int64
	}{
		{`"Logs".ev_old`, partition.Bound{Infinite: -1}, partition.Bound{Time: day(1)}, -1},
		{`"Logs"."Events 2"`, partition.Bound{Time: day(1)}, partition.Bound{Time: day(2)}, 500},
		{`"Logs".ev_rest`, partition.Bound{Time: day(2)}, partition.Bound{Infinite: 1}, -1},
	}
	// The catalog shows bounds in the session's DateStyle and TimeZone: the list must not care.
	for _, setting := range []string{"ISO, MDY|UTC", "SQL, DMY|America/New_York", "German|Asia/Kolkata", "Postgres, YMD|Pacific/Chatham"} {
		t.Run(setting, func(t *testing.T) {
			c := d.session()
			style, zone := split(setting)
			if _, err := c.Exec(ctx, "SELECT set_config('datestyle', $1, false), set_config('timezone', $2, false)", style, zone); err != nil {
				t.Fatal(err)
			}
			{
				parts, err := partition.List(ctx, c, "Logs.Events")
				if err != nil {
					t.Fatal(err)
				}
				if len(parts) != len(want) {
					t.Fatalf("%d partitions, want %d: %+v", len(parts), len(want), parts)
				}
				for i, w := range want {
					p := parts[i]
					if p.Name != w.name || p.Parent != `"Logs"."Events"` || p.Key != partition.KeyTimestamptz || p.Default || p.DetachPending {
						t.Errorf("partition %d: %+v, want %s of \"Logs\".\"Events\"", i, p, w.name)
					}
					if !sameBound(p.Lower, w.lower) || !sameBound(p.Upper, w.upper) {
						t.Errorf("%s: [%v, %v), want [%v, %v)", p.Name, p.Lower, p.Upper, w.lower, w.upper)
					}
					if p.Rows != w.rows {
						t.Errorf("%s: %d rows estimated, want %d", p.Name, p.Rows, w.rows)
					}
				}
			}
		})
	}

	t.Run("in a transaction, whose settings stay", func(t *testing.T) {
		tx, err := d.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "SET LOCAL datestyle = 'German'; SET LOCAL timezone = 'Asia/Kolkata'"); err != nil {
			t.Fatal(err)
		}
		parts, err := partition.List(ctx, tx, "Logs.Events")
		if err != nil || len(parts) != 3 || !parts[1].Lower.Time.Equal(day(1)) {
			t.Fatalf("%+v, %v", parts, err)
		}
		var style, zone string
		if err := tx.QueryRow(ctx, "SELECT current_setting('datestyle'), current_setting('timezone')").Scan(&style, &zone); err != nil {
			t.Fatal(err)
		}
		if style != "German, DMY" || zone != "Asia/Kolkata" {
			t.Errorf("after List, the transaction has datestyle %q, timezone %q", style, zone)
		}
	})

	t.Run("key types", func(t *testing.T) {
		for _, typ := range []string{"timestamp", "date", "timestamptz"} {
			table := "k_" + typ
			d.daily(table, typ, 2, 0, true)
			parts := d.list(table)
			if len(parts) != 3 || !parts[2].Default || parts[2].Name != "public."+table+"_default" {
				t.Fatalf("%s: %+v, want 2 days and the default partition last", typ, parts)
			}
			for i, p := range parts[:2] {
				// A timestamp or date bound is its wall clock read as UTC.
				if !p.Lower.Time.Equal(day(i)) || !p.Upper.Time.Equal(day(i+1)) {
					t.Errorf("%s %s: [%v, %v), want [%v, %v)", typ, p.Name, p.Lower, p.Upper, day(i), day(i+1))
				}
			}
		}
	})

	t.Run("an integer key: bounds bare and quoted, divided by ExpiredEpoch", func(t *testing.T) {
		// PostgreSQL writes a positive int4 bound bare and a negative one (or any int8) quoted.
		for _, typ := range []string{"integer", "bigint"} {
			table := "by_" + typ
			d.exec(fmt.Sprintf("CREATE TABLE %[1]s (n %[2]s) PARTITION BY RANGE (n); CREATE TABLE %[1]s_a PARTITION OF %[1]s FOR VALUES FROM (-5) TO (100); "+
				"CREATE TABLE %[1]s_b PARTITION OF %[1]s FOR VALUES FROM (100) TO (MAXVALUE)", table, typ))
			parts := d.list(table)
			if len(parts) != 2 || parts[0].Lower.Number != -5 || parts[0].Upper.Number != 100 || parts[1].Upper.Infinite != 1 || !parts[0].Key.Integer() {
				t.Fatalf("%s: %+v", typ, parts)
			}
			if cut := partition.ExpiredEpoch(parts, 100); len(cut.Expired) != 1 || cut.Straddle != nil {
				t.Errorf("%s at 100: %+v, want _a expired, none straddling", typ, cut)
			}
			if cut := partition.ExpiredEpoch(parts, 101); len(cut.Expired) != 1 || cut.Straddle == nil || cut.Straddle.Name != "public."+table+"_b" {
				t.Errorf("%s at 101: %+v, want _a expired and _b straddling", typ, cut)
			}
			if cut := partition.ExpiredEpoch(parts, 99); len(cut.Expired) != 0 || cut.Straddle == nil || cut.Straddle.Name != "public."+table+"_a" {
				t.Errorf("%s at 99: %+v, want _a straddling", typ, cut)
			}
		}
	})

	t.Run("not range on one time or integer column", func(t *testing.T) {
		d.exec("CREATE TABLE plain (at timestamptz)")
		d.exec("CREATE TABLE by_list (region text) PARTITION BY LIST (region)")
		d.exec("CREATE TABLE by_numeric (n numeric) PARTITION BY RANGE (n)")
		for _, table := range []string{"plain", "by_list", "by_numeric", "missing"} {
			if _, err := partition.List(ctx, d.pool, table); !errors.Is(err, partition.ErrNotPartitioned) {
				t.Errorf("%s: %v, want ErrNotPartitioned", table, err)
			}
		}
	})
}

func split(s string) (string, string) {
	for i := range s {
		if s[i] == '|' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

func sameBound(a, b partition.Bound) bool {
	return a.Infinite == b.Infinite && (a.Infinite != 0 || a.Time.Equal(b.Time))
}

func TestExpired(t *testing.T) {
	t.Parallel()
	at := func(key partition.KeyType, name string, lo, hi int) partition.Partition {
		return partition.Partition{Name: name, Key: key, Lower: partition.Bound{Time: day(lo)}, Upper: partition.Bound{Time: day(hi)}}
	}
	minval, maxval := partition.Bound{Infinite: -1}, partition.Bound{Infinite: 1}
	set := func(key partition.KeyType) []partition.Partition {
		first := at(key, "first", 0, 0)
		first.Lower = minval
		first.Upper = partition.Bound{Time: day(0)}
		last := at(key, "last", 3, 0)
		last.Upper = maxval
		// Out of order on purpose: Expired returns the expired oldest first.
		return []partition.Partition{at(key, "d1", 1, 2), {Name: "default", Key: key, Default: true}, last, first, at(key, "d0", 0, 1), at(key, "d2", 2, 3)}
	}
	cases := []struct {
		name     string
		key      partition.KeyType
		cutoff   time.Time
		expired  []string
		straddle string
	}{
		{"before everything", partition.KeyTimestamptz, day(-1), nil, "first"},
		{"on a bound: the partition below goes whole, none straddles", partition.KeyTimestamptz, day(2), []string{"first", "d0", "d1"}, ""},
		{"inside a day", partition.KeyTimestamptz, day(2).Add(time.Nanosecond), []string{"first", "d0", "d1"}, "d2"},
		{"past every bound: the MAXVALUE partition straddles", partition.KeyTimestamptz, day(10), []string{"first", "d0", "d1", "d2"}, "last"},
		{"timestamptz compares instants", partition.KeyTimestamptz, day(2).In(time.FixedZone("east", 5*3600)), []string{"first", "d0", "d1"}, ""},
		// 2026-03-12 01:00 at UTC+5 is 2026-03-11 20:00 UTC, but a timestamp key compares the wall
		// clock, as pgx binds it: 01:00 on the 12th, past d1's upper bound.
		{"timestamp compares the wall clock", partition.KeyTimestamp, time.Date(2026, 3, 12, 1, 0, 0, 0, time.FixedZone("east", 5*3600)), []string{"first", "d0", "d1"}, "d2"},
		{"date compares the date: late on the 12th is the 12th", partition.KeyDate, day(2).Add(23 * time.Hour), []string{"first", "d0", "d1"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cut := partition.Expired(set(tc.key), tc.cutoff)
			var got []string
			for _, p := range cut.Expired {
				got = append(got, p.Name)
			}
			if !equal(got, tc.expired) {
				t.Errorf("expired %v, want %v", got, tc.expired)
			}
			straddle := ""
			if cut.Straddle != nil {
				straddle = cut.Straddle.Name
			}
			if straddle != tc.straddle {
				t.Errorf("straddle %q, want %q", straddle, tc.straddle)
			}
			if cut.Default == nil || cut.Default.Name != "default" {
				t.Errorf("default %+v", cut.Default)
			}
			if n := len(cut.Boundary()); n != 1+btoi(tc.straddle != "") {
				t.Errorf("%d boundary partitions", n)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The dry run's boundary count: the rows below the cutoff of the straddling partition and the
// default one, compared as the batched engine compares them (a timestamp key by wall clock).
func TestCountBelow(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.daily("cb", "timestamp", 3, 24, true) // hourly rows; the default holds one old, one future row
	cutoff := day(1).Add(5*time.Hour + 30*time.Minute)
	cut := partition.Expired(d.list("cb"), cutoff)
	if len(cut.Expired) != 1 || len(cut.Boundary()) != 2 {
		t.Fatalf("cut: %+v", cut)
	}
	for _, tc := range []struct {
		p    partition.Partition
		want int64
	}{
		{*cut.Straddle, 6}, // 00:00 … 05:00
		{*cut.Default, 1},
	} {
		n, err := partition.CountBelow(ctx, d.pool, tc.p, "at", cutoff)
		if err != nil || n != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.p.Name, n, err, tc.want)
		}
	}
	// The same cutoff in another zone is the same instant but another wall clock: two hours
	// later, two rows more.
	n, err := partition.CountBelow(ctx, d.pool, *cut.Straddle, "at", cutoff.Add(-3*time.Hour).In(time.FixedZone("plus5", 5*3600)))
	if err != nil || n != 8 {
		t.Errorf("in UTC+5: %d, %v; want 8", n, err)
	}
}
