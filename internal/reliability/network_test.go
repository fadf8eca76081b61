package reliability

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/pgproxy"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// networkFault is one fault of TestNetworkFaults: what the proxy does, and what the first run's
// answer must then say.
type networkFault struct {
	name string
	// long runs only under RELIABILITY=1.
	long bool
	// fault is armed on the proxy in front of the database (upstream, for a pooler in between).
	fault func(t *testing.T, upstream *upstream) pgproxy.Fault
	// stop, code and outcome are the first run's stop reason, error code ("" for none) and the
	// second batch's lost commit ("" for none).
	stop    wire.StopReason
	code    string
	outcome wire.BatchOutcome
}

// TestNetworkFaults runs a sweep over a real api whose database connections cross a
// protocol-aware proxy, which fires one fault on the second batch's COMMIT reply, or in the
// third batch's DELETE. For each fault:
//
//   - rows lost 0: every fresh row is still there, unchanged (count and checksum);
//   - rows counted = rows gone: the answer's deleted, and the run history's, equal the eligible
//     rows that are gone, a batch whose commit's reply was lost included when it committed;
//   - the lease is released, and the next run finishes the sweep.
//
// The time each first run took to answer is logged, for docs/RELIABILITY.md.
func TestNetworkFaults(t *testing.T) {
	t.Parallel()
	commit := func(a pgproxy.Action) func(*testing.T, *upstream) pgproxy.Fault {
		return func(*testing.T, *upstream) pgproxy.Fault { return pgproxy.Fault{Nth: 2, In: batchRecord, Action: a} }
	}
	cases := []networkFault{
		{name: "cut at commit", fault: commit(pgproxy.Cut), stop: wire.StopBatchError, code: "commit-lost", outcome: wire.BatchCommitted},
		{name: "added latency", fault: func(*testing.T, *upstream) pgproxy.Fault {
			return pgproxy.Fault{Nth: 2, In: batchRecord, Action: pgproxy.Latency, Delay: 5 * time.Millisecond}
		}, stop: wire.StopExhausted},
		{name: "reset mid-statement", fault: func(*testing.T, *upstream) pgproxy.Fault {
			return pgproxy.Fault{Nth: 3, Statement: "DELETE", Action: pgproxy.Reset}
		}, stop: wire.StopBatchError, code: "connection"},
		{name: "black hole at commit", long: true, fault: commit(pgproxy.BlackHole), stop: wire.StopBatchError, code: "commit-lost",
			outcome: wire.BatchCommitted},
		{name: "pgbouncer restart at commit", long: true, fault: func(t *testing.T, up *upstream) pgproxy.Fault {
			return pgproxy.Fault{Nth: 2, In: batchRecord, Action: pgproxy.Hook, Hook: func() { up.bouncer.restart(t) }}
		}, stop: wire.StopBatchError, code: "commit-lost", outcome: wire.BatchCommitted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.long {
				long(t)
			}
			t.Parallel()
			runNetworkFault(t, tc)
		})
	}
}

// batchRecord is in the statement every batch transaction, and only a batch's, sends: its
// record, so a COMMIT fault counts batches.
const batchRecord = "INSERT INTO sweeprail.run_batch (run_id, pass, batch, rows) VALUES"

// upstream is what the proxy forwards to: the database's server, or a PgBouncer of the test's
// own in front of it.
type upstream struct {
	url     string
	bouncer *bouncer
}

func runNetworkFault(t *testing.T, tc networkFault) {
	const (
		eligible = 1000
		fresh    = 200
		batch    = 100
	)
	u := dbtest.URL(t)
	pool := openPool(t, u)
	seedNotifications(t, pool, eligible, fresh)
	before := notificationsState(t, pool)
	up := &upstream{url: u}
	if tc.name == "pgbouncer restart at commit" {
		up.bouncer = startBouncer(t, u)
		up.url = up.bouncer.url(t, u)
	}
	p, pu, err := pgproxy.StartFor(up.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	// Batches pinned at 100 rows (BATCH_TARGET=1us, the floor of 100): the second is rows
	// 101-200. A batch's own deadline is the statement timeout plus 5s: the black hole's wait.
	env := map[string]string{
		"SWEEP_DEADLINE":          "20s",
		"BATCH_STATEMENT_TIMEOUT": "1s",
		"BATCH_LOCK_TIMEOUT":      "1s",
		"COUNT_TIMEOUT":           "1s",
		"SERVER_WRITE_TIMEOUT":    "30s",
		"BATCH_SIZE":              fmt.Sprint(batch),
		"BATCH_TARGET":            "1us",
	}
	api := startAPI(t, "reliability-net-"+randomSuffix(t), pu, env)
	fired := p.Arm(tc.fault(t, up))

	began := time.Now()
	a := api.post(t, "notifications", fmt.Sprintf(`{"batchSize": %d}`, batch))
	took := time.Since(began)
	// A batch-error answer is a 500 with the run's answer as its body.
	if a.err != nil || (a.status != http.StatusOK && a.status != http.StatusInternalServerError) {
		t.Fatalf("HTTP %d %v: %s", a.status, a.err, a.body)
	}
	<-fired
	res := a.result(t)
	after := notificationsState(t, pool)
	gone := int64(eligible - after.eligible)
	t.Logf("%s: answered in %s, %s, %d rows deleted, %d gone, lost commit %+v, error %+v", tc.name,
		took.Round(time.Millisecond), res.StopReason, res.Deleted, gone, res.Passes[0].LostCommit, res.Error)
	if after.fresh != before.fresh || after.freshSum != before.freshSum {
		t.Fatalf("fresh rows changed: %d sum %s, were %d sum %s", after.fresh, after.freshSum, before.fresh, before.freshSum)
	}
	if res.Deleted != gone {
		t.Fatalf("the answer counts %d rows deleted, %d are gone", res.Deleted, gone)
	}
	if res.StopReason != tc.stop || (tc.code == "") != (res.Error == nil) || (res.Error != nil && res.Error.Code != tc.code) {
		t.Fatalf("answer %s, want %s with error code %q", a.body, tc.stop, tc.code)
	}
	lost := res.Passes[0].LostCommit
	if (tc.outcome == "") != (lost == nil) || (lost != nil && (lost.Outcome != tc.outcome || lost.Batch != 2)) {
		t.Fatalf("lost commit %+v, want batch 2 %q", lost, tc.outcome)
	}
	if n := scalar[int64](t, pool, `SELECT deleted FROM sweeprail.run WHERE run_id = $1`, res.RunID); n != gone {
		t.Fatalf("the run history counts %d rows deleted, %d are gone", n, gone)
	}
	if n := scalar[int64](t, pool, `SELECT count(*) FROM sweeprail.sweep_lock`); n != 0 {
		t.Fatalf("%d lease rows left after the run answered", n)
	}

	p.Disarm()
	second := api.post(t, "notifications", `{}`)
	if second.err != nil || second.status != http.StatusOK {
		t.Fatalf("second run: HTTP %d %v: %s\n%s", second.status, second.err, second.body, tail(api.stderr.String(), 2000))
	}
	if r := second.result(t); r.StopReason != wire.StopExhausted || r.Deleted+res.Deleted != eligible {
		t.Fatalf("second run %s: want exhausted, with the first every eligible row", second.body)
	}
	if n := scalar[int64](t, pool, `SELECT sum(deleted) FROM sweeprail.run WHERE sweep = 'notifications'`); n != eligible {
		t.Fatalf("the run history counts %d rows deleted, want %d", n, eligible)
	}
	if err := api.terminate(t, 10*time.Second); err != nil {
		t.Errorf("api exited with %v, want 0", err)
	}
}
