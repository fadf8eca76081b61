package partition_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/partition"
)

// hold opens a transaction on a session of its own, runs sql in it, and returns what ends it.
func (d *db) hold(sql string) (pid uint32, end func()) {
	d.t.Helper()
	c := d.session()
	tx, err := c.Begin(ctx)
	if err != nil {
		d.t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		d.t.Fatalf("%s: %v", sql, err)
	}
	done := false
	end = func() {
		if !done {
			done = true
			if err := tx.Commit(ctx); err != nil {
				d.t.Fatal(err)
			}
		}
	}
	d.t.Cleanup(end)
	return c.PgConn().PID(), end
}

func (d *db) drop(p partition.Partition, o partition.DropOptions) partition.Outcome {
	d.t.Helper()
	out, err := partition.Drop(ctx, d.pool, p, o)
	if err != nil {
		d.t.Fatalf("drop %s: %v", p.Name, err)
	}
	return out
}

// survivorsDiffer compares the table's ids with the oracle's: the ids copied before the drop whose
// row is kept by the cutoff's rule (its day ends after keptFrom), or that sit in the default
// partition (negative ids). It returns "" when they are the same set.
func (d *db) survivorsDiffer(table string, keptFrom time.Time) string {
	d.t.Helper()
	var missing, extra int64
	if err := d.pool.QueryRow(ctx, fmt.Sprintf(`
WITH want AS (SELECT id FROM oracle_%[1]s WHERE id < 0 OR at::timestamp >= $1::timestamp), got AS (SELECT id FROM %[1]s)
SELECT (SELECT count(*) FROM (SELECT id FROM want EXCEPT SELECT id FROM got) m),
       (SELECT count(*) FROM (SELECT id FROM got EXCEPT SELECT id FROM want) e)`, table),
		keptFrom.Format("2006-01-02 15:04:05")).Scan(&missing, &extra); err != nil {
		d.t.Fatal(err)
	}
	if missing != 0 || extra != 0 {
		return fmt.Sprintf("%d rows missing, %d rows that should be gone", missing, extra)
	}
	return ""
}

func TestDrop(t *testing.T) {
	t.Parallel()
	d := newDB(t)

	// Six whole days expire and go, one partition at a time; the day holding the cutoff, the later
	// ones and the default partition stay, to the row.
	t.Run("expired exactly", func(t *testing.T) {
		for _, tc := range []struct {
			typ               string
			withDefault, keep bool
			concurrently      bool
			wantAfter         string
		}{
			{"timestamptz", false, false, true, "gone"},
			{"timestamptz", true, false, false, "gone"},
			{"timestamp", false, true, true, "detached"},
			{"date", true, true, false, "detached"},
		} {
			name := fmt.Sprintf("%s default=%v keep=%v", tc.typ, tc.withDefault, tc.keep)
			t.Run(name, func(t *testing.T) {
				table := fmt.Sprintf("ex_%s_%v_%v", tc.typ, tc.withDefault, tc.keep)
				d.daily(table, tc.typ, 10, 48, tc.withDefault)
				d.exec(fmt.Sprintf("CREATE TABLE oracle_%s AS SELECT id, at FROM %s", table, table))
				cutoff := day(6).Add(5 * time.Hour)
				cut := partition.Expired(d.list(table), cutoff)
				// A date key compares the cutoff's date: day 6 at 05:00 is day 6, on a bound.
				straddle := "public." + table + "_d6"
				if tc.typ == "date" {
					straddle = ""
				}
				if len(cut.Expired) != 6 || nameOf(cut.Straddle) != straddle || (cut.Default != nil) != tc.withDefault {
					t.Fatalf("cut: %+v", cut)
				}
				o := opts()
				o.KeepDetached = tc.keep
				for i, p := range cut.Expired {
					if want := fmt.Sprintf("public.%s_d%d", table, i); p.Name != want {
						t.Fatalf("expired[%d] is %s, want %s (oldest first)", i, p.Name, want)
					}
					out := d.drop(p, o)
					if !out.Detached || out.Dropped == tc.keep || out.Concurrently != tc.concurrently || out.Gone || out.Finalized {
						t.Errorf("%s: %+v", p.Name, out)
					}
					if got := d.attached(p.Name); got != tc.wantAfter {
						t.Errorf("%s is %s, want %s", p.Name, got, tc.wantAfter)
					}
				}
				if diff := d.survivorsDiffer(table, day(6)); diff != "" {
					t.Error(diff)
				}
				if n := len(d.list(table)); n != 4+btoi(tc.withDefault) {
					t.Errorf("%d partitions left, want %d", n, 4+btoi(tc.withDefault))
				}
			})
		}
	})

	// A session holding one partition makes its drop fail fast with the lock timeout, naming it,
	// and leaves it attached; the partitions dropped before it stay dropped, and the next attempt,
	// once the lock is gone, drops it.
	t.Run("held lock", func(t *testing.T) {
		for _, tc := range []struct {
			lock        string
			withDefault bool
		}{
			{"SELECT count(*) FROM %s", false},
			{"INSERT INTO %s (id, at) VALUES (-100, '2026-03-12 01:00')", false},
			{"LOCK TABLE %s IN ACCESS EXCLUSIVE MODE", false},
			{"SELECT count(*) FROM %s", true},
			{"LOCK TABLE %s IN ACCESS SHARE MODE", true},
		} {
			verb := strings.Fields(tc.lock)[0]
			table := fmt.Sprintf("hl_%s_%v", strings.ToLower(verb), tc.withDefault)
			if strings.Contains(tc.lock, "ACCESS SHARE") {
				table += "_as"
			}
			t.Run(fmt.Sprintf("%s default=%v", tc.lock, tc.withDefault), func(t *testing.T) {
				d.daily(table, "timestamptz", 5, 4, tc.withDefault)
				cut := partition.Expired(d.list(table), day(4))
				held := cut.Expired[2]
				_, end := d.hold(fmt.Sprintf(tc.lock, held.Name))

				d.drop(cut.Expired[0], opts())
				d.drop(cut.Expired[1], opts())
				start := time.Now()
				_, err := partition.Drop(ctx, d.pool, held, opts())
				took := time.Since(start)
				if pgCode(err) != "55P03" || !strings.Contains(err.Error(), held.Name) {
					t.Fatalf("drop of the held partition: %v, want 55P03 naming %s", err, held.Name)
				}
				var inc *partition.IncompleteError
				if errors.As(err, &inc) {
					t.Errorf("the drop left the partition half-way: %v", err)
				}
				if took > 5*time.Second {
					t.Errorf("the drop took %v with a 200ms lock timeout", took)
				}
				if got := d.attached(held.Name); got != "attached" {
					t.Errorf("the held partition is %s, want attached", got)
				}
				for _, p := range cut.Expired[:2] {
					if got := d.attached(p.Name); got != "gone" {
						t.Errorf("%s is %s, want gone", p.Name, got)
					}
					if out := d.drop(p, opts()); !out.Gone || out.Detached {
						t.Errorf("drop of the dropped %s: %+v, want Gone", p.Name, out)
					}
				}

				end()
				if out := d.drop(held, opts()); !out.Dropped {
					t.Errorf("drop once the lock is gone: %+v", out)
				}
			})
		}
	})

	// A transaction reading the table (not the partition: its query pruned it) makes DETACH …
	// CONCURRENTLY wait in its second transaction, until the lock timeout interrupts it and leaves
	// the partition detach-pending. FINALIZE does not wait for that reader: Drop finishes at once.
	t.Run("reader of the table: interrupted detach finalized at once", func(t *testing.T) {
		d.daily("rd", "timestamptz", 5, 4, false)
		target := partition.Expired(d.list("rd"), day(4)).Expired[0]
		pid, _ := d.hold("SELECT count(*) FROM rd WHERE at >= '2026-03-14'")
		if n := d.int("SELECT count(*) FROM pg_locks WHERE pid = $1 AND relation = $2::regclass", int32(pid), target.Name); n != 0 {
			t.Fatalf("the reader locks %s itself: the test needs it to lock only the table", target.Name)
		}
		out := d.drop(target, opts())
		if !out.Finalized || !out.Dropped || out.Concurrently {
			t.Errorf("got %+v, want the interrupted detach finalized and the partition dropped", out)
		}
		if got := d.attached(target.Name); got != "gone" {
			t.Errorf("%s is %s, want gone", target.Name, got)
		}
	})

	// When, besides the reader of the table, a session takes the partition while the detach waits
	// (after the probe), the FINALIZE fails too: the partition is reported detach-pending with the
	// statement that finishes it, and the next Drop, once they are gone, finishes it.
	t.Run("reader of the table and of the partition: detach-pending reported, finalized next time", func(t *testing.T) {
		d.daily("rp", "timestamptz", 5, 4, false)
		target := partition.Expired(d.list("rp"), day(4)).Expired[0]
		_, endTable := d.hold("SELECT count(*) FROM rp WHERE at >= '2026-03-14'")
		o := opts()
		o.LockTimeout = 2 * time.Second // room to take the partition while the detach waits
		type result struct {
			out partition.Outcome
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := partition.Drop(ctx, d.pool, target, o)
			done <- result{out, err}
		}()
		d.waitQuery("ALTER TABLE % DETACH PARTITION % CONCURRENTLY")
		_, endPart := d.hold("SELECT count(*) FROM " + target.Name)
		r := <-done
		var inc *partition.IncompleteError
		// The detach, which runs with no setting of its own, is cancelled past twice the lock
		// timeout (57014); the FINALIZE, under the lock timeout, fails on the partition's reader.
		if !errors.As(r.err, &inc) || inc.State != "detach-pending" || pgCode(r.err) != "57014" ||
			!strings.Contains(r.err.Error(), "cancelled after 4s") || !strings.Contains(r.err.Error(), "55P03") ||
			inc.Statement != "ALTER TABLE public.rp DETACH PARTITION public.rp_d0 FINALIZE" || !strings.Contains(r.err.Error(), inc.Statement) {
			t.Fatalf("got %+v, %v; want an IncompleteError with the FINALIZE statement, the detach cancelled and the finalize's 55P03", r.out, r.err)
		}
		t.Log(r.err)
		if got := d.attached(target.Name); got != "pending" {
			t.Fatalf("%s is %s, want pending", target.Name, got)
		}
		listed := byName(d.list("rp"), target.Name)
		if !listed.DetachPending || listed.FinalizeStatement() != inc.Statement {
			t.Errorf("listed as %+v", listed)
		}

		endPart()
		endTable()
		out := d.drop(listed, opts())
		if !out.Finalized || !out.Dropped {
			t.Errorf("second drop: %+v, want finalized and dropped", out)
		}
		if got := d.attached(target.Name); got != "gone" {
			t.Errorf("%s is %s, want gone", target.Name, got)
		}
	})

	// A DETACH … CONCURRENTLY cancelled in its second transaction (here by pg_cancel_backend, as an
	// operator or a crash would) leaves the partition detach-pending; List shows it, Expired keeps
	// it, and Drop finishes it with FINALIZE.
	t.Run("cancelled detach concurrently is finalized", func(t *testing.T) {
		d.daily("cx", "timestamptz", 4, 4, false)
		_, end := d.hold("SELECT count(*) FROM cx")
		other := d.session()
		errc := make(chan error, 1)
		go func() {
			_, err := other.Exec(ctx, "ALTER TABLE cx DETACH PARTITION cx_d1 CONCURRENTLY")
			errc <- err
		}()
		d.waitBlocked(other.PgConn().PID())
		d.exec("SELECT pg_cancel_backend($1)", int32(other.PgConn().PID()))
		if err := <-errc; pgCode(err) != "57014" {
			t.Fatalf("cancelled detach: %v", err)
		}
		end()

		parts := d.list("cx")
		if p := byName(parts, "public.cx_d1"); !p.DetachPending {
			t.Fatalf("cx_d1 after the cancel: %+v", p)
		}
		cut := partition.Expired(parts, day(3))
		if len(cut.Expired) != 3 || !cut.Expired[1].DetachPending {
			t.Fatalf("expired: %+v", cut.Expired)
		}
		// Plainly, so that the pending partition owes its drop to FINALIZE alone (a plain or a
		// concurrent DETACH of it fails).
		o := opts()
		o.NoConcurrently = true
		for _, p := range cut.Expired {
			out := d.drop(p, o)
			if !out.Dropped || out.Finalized != (p.Name == "public.cx_d1") {
				t.Errorf("%s: %+v", p.Name, out)
			}
		}
		if n := d.int("SELECT count(*) FROM cx"); n != 4 {
			t.Errorf("%d rows left, want the last day's 4", n)
		}
	})

	// Rows referenced through a foreign key to the table: the detach fails (23503) naming the
	// partition, which stays attached.
	t.Run("referenced rows", func(t *testing.T) {
		for _, withDefault := range []bool{false, true} {
			t.Run(fmt.Sprintf("default=%v", withDefault), func(t *testing.T) {
				table := fmt.Sprintf("fk_%v", withDefault)
				d.daily(table, "timestamptz", 4, 4, withDefault)
				d.exec(fmt.Sprintf("ALTER TABLE %s ADD PRIMARY KEY (id, at)", table))
				d.exec(fmt.Sprintf("CREATE TABLE %[1]s_ref (id bigint, at timestamptz, FOREIGN KEY (id, at) REFERENCES %[1]s)", table))
				d.exec(fmt.Sprintf("INSERT INTO %[1]s_ref SELECT id, at FROM %[1]s_d1 LIMIT 1", table))
				cut := partition.Expired(d.list(table), day(3))
				d.drop(cut.Expired[0], opts())
				_, err := partition.Drop(ctx, d.pool, cut.Expired[1], opts())
				if pgCode(err) != "23503" || !strings.Contains(err.Error(), cut.Expired[1].Name) {
					t.Fatalf("got %v, want 23503 naming %s", err, cut.Expired[1].Name)
				}
				if got := d.attached(cut.Expired[1].Name); got != "attached" {
					t.Errorf("%s is %s, want attached", cut.Expired[1].Name, got)
				}
			})
		}
	})

	// A foreign key or a view on the partition itself makes DROP TABLE fail (2BP01): Drop then
	// detaches plainly, in the drop's transaction, so the partition stays attached. Kept detached,
	// nothing blocks it.
	t.Run("objects depending on the partition", func(t *testing.T) {
		for _, dep := range []string{
			"CREATE TABLE %[1]s_ref (id bigint, at timestamptz, FOREIGN KEY (id, at) REFERENCES %[1]s_d1)",
			"CREATE VIEW %[1]s_v AS SELECT * FROM %[1]s_d1",
		} {
			kind := strings.Fields(dep)[1]
			t.Run(kind, func(t *testing.T) {
				table := "dep_" + strings.ToLower(kind)
				d.daily(table, "timestamptz", 3, 4, false)
				d.exec(fmt.Sprintf("ALTER TABLE %s ADD PRIMARY KEY (id, at)", table))
				d.exec(fmt.Sprintf(dep, table))
				p := byName(d.list(table), "public."+table+"_d1")
				_, err := partition.Drop(ctx, d.pool, p, opts())
				if pgCode(err) != "2BP01" || !strings.Contains(err.Error(), p.Name) {
					t.Fatalf("got %v, want 2BP01 naming %s", err, p.Name)
				}
				if got := d.attached(p.Name); got != "attached" {
					t.Errorf("%s is %s, want attached", p.Name, got)
				}
				o := opts()
				o.KeepDetached = true
				if out := d.drop(p, o); !out.Concurrently || out.Dropped {
					t.Errorf("kept detached: %+v", out)
				}
				if got := d.attached(p.Name); got != "detached" {
					t.Errorf("%s is %s, want detached", p.Name, got)
				}
			})
		}
	})

	t.Run("refused", func(t *testing.T) {
		d.daily("rf", "timestamptz", 2, 0, true)
		parts := d.list("rf")
		if _, err := partition.Drop(ctx, d.pool, parts[2], opts()); !errors.Is(err, partition.ErrDefaultPartition) {
			t.Errorf("default partition: %v", err)
		}
		if _, err := partition.Drop(ctx, d.pool, parts[0], partition.DropOptions{}); err == nil || !strings.Contains(err.Error(), "lock timeout is required") {
			t.Errorf("no lock timeout: %v", err)
		}
	})

	// The connection goes back to the pool with the server's timeouts.
	t.Run("settings reset", func(t *testing.T) {
		d.daily("rs", "timestamptz", 2, 0, false)
		single := newSinglePool(t, d.url)
		parts, err := partition.List(ctx, single, "rs")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := partition.Drop(ctx, single, parts[0], opts()); err != nil {
			t.Fatal(err)
		}
		var lock, stmt string
		if err := single.QueryRow(ctx, "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')").Scan(&lock, &stmt); err != nil {
			t.Fatal(err)
		}
		if lock != "0" || stmt != "0" {
			t.Errorf("after Drop the pooled connection has lock_timeout %s, statement_timeout %s", lock, stmt)
		}
	})
}
