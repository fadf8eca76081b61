package sweep_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/pgproxy"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestLostCommit runs a sweep through a proxy that loses the reply to its second batch's COMMIT
// (or resets its second DELETE), and checks that the answer, the run history and the rows gone
// agree: a batch that committed is counted, one that did not is not, and one whose outcome could
// not be asked is named unknown and counted by the next run once it committed.
func TestLostCommit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fault func(p *pgproxy.Proxy) pgproxy.Fault
		// outcome is the second batch's LostCommit outcome; "" for none.
		outcome wire.BatchOutcome
		code    string
	}{
		{"a cut at the commit's reply counts the committed batch", func(*pgproxy.Proxy) pgproxy.Fault {
			return pgproxy.Fault{Nth: 2, In: "DELETE", Action: pgproxy.Cut}
		}, wire.BatchCommitted, sweep.CommitLostCode},
		{"a black hole at the commit's reply is given up at the batch's deadline and counted", func(*pgproxy.Proxy) pgproxy.Fault {
			return pgproxy.Fault{Nth: 2, In: "DELETE", Action: pgproxy.BlackHole}
		}, wire.BatchCommitted, sweep.CommitLostCode},
		{"a reset in the batch's statement rolls it back, uncounted", func(*pgproxy.Proxy) pgproxy.Fault {
			return pgproxy.Fault{Nth: 2, Statement: "DELETE", Action: pgproxy.Reset}
		}, "", "connection"},
		{"a database out of reach at the commit leaves the outcome unknown, settled by the next run", func(p *pgproxy.Proxy) pgproxy.Fault {
			return pgproxy.Fault{Nth: 2, In: "DELETE", Action: pgproxy.Hook, Hook: p.Down}
		}, wire.BatchUnknown, sweep.CommitLostCode},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := dbtest.URL(t)
			direct, err := dbpool.NewPool(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(direct.Close)
			at := dbNow(t, direct)
			const eligible = 350
			exec(t, direct, `INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com')`)
			exec(t, direct, `INSERT INTO notifications (account_id, kind, read_at)
				SELECT '00000000-0000-0000-0000-000000000001', 'old', $1::timestamptz - interval '40 days' FROM generate_series(1, $2)`, at, eligible)
			p, pu, err := pgproxy.StartFor(u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			pool, err := dbpool.NewPool(ctx, pu)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			s := settings()
			s.BatchSize, s.MinBatchSize, s.MaxBatchSize, s.StatementTimeout = 100, 100, 100, time.Second
			store := history.New(pool, 30*24*time.Hour)
			reg := prometheus.NewRegistry()
			m, err := metrics.New(reg, httpapi.MetricLabels(policy.Catalog()))
			if err != nil {
				t.Fatal(err)
			}
			r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: s, AsOf: fixedAsOf(at), History: store,
				Metrics: m, AccessPath: sweep.PathIndex})
			fired := p.Arm(tc.fault(p))
			first := run(t, r, "notifications")
			<-fired
			left := count(t, direct, `SELECT count(*) FROM notifications`)
			if first.StopReason != wire.StopBatchError || first.Error == nil || first.Error.Code != tc.code {
				t.Fatalf("first run: %s %+v, want batch-error %s", first.StopReason, first.Error, tc.code)
			}
			lost := first.Passes[0].LostCommit
			switch {
			case tc.outcome == "" && lost != nil:
				t.Fatalf("lost commit %+v, want none", lost)
			case tc.outcome != "" && (lost == nil || lost.Outcome != tc.outcome || lost.Batch != 2 || lost.Rows != 100):
				t.Fatalf("lost commit %+v, want batch 2 of 100 rows, %s", lost, tc.outcome)
			}
			gone := int64(eligible - left)
			if tc.outcome == wire.BatchUnknown {
				if first.Deleted != gone-100 {
					t.Fatalf("first run counted %d, want the %d gone less the unknown batch", first.Deleted, gone)
				}
				if err := p.Up(); err != nil {
					t.Fatal(err)
				}
				// The run could not release its lease either: it would expire after its TTL.
				exec(t, direct, `DELETE FROM sweeprail.sweep_lock`)
			} else if first.Deleted != gone {
				t.Fatalf("first run counted %d rows, %d are gone", first.Deleted, gone)
			}
			second := run(t, r, "notifications")
			if second.StopReason != wire.StopExhausted || count(t, direct, `SELECT count(*) FROM notifications`) != 0 {
				t.Fatalf("second run: %+v", second)
			}
			// The history counts every row gone, the settled batch included, once.
			if n := count(t, direct, `SELECT sum(deleted) FROM sweeprail.run WHERE sweep = 'notifications'`); n != eligible {
				t.Fatalf("the history counts %d rows deleted, want %d", n, eligible)
			}
			if n := count(t, direct, `SELECT count(*) FROM sweeprail.run WHERE unsettled`); n != 0 {
				t.Fatalf("%d runs left unsettled", n)
			}
			// And so do the metrics.
			labels := map[string]string{"sweep": "notifications", "pass": "read", "table": "notifications"}
			if got := counterValue(t, reg, "sweeprail_rows_deleted_total", labels); got != eligible {
				t.Fatalf("the row metric counts %v rows deleted, want %d", got, eligible)
			}
		})
	}
}
