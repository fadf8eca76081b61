package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The foreground workload: the live traffic a sweep must not disturb. Each worker alternates
// inserting a notification and marking one it inserted a few operations earlier as read (a
// fresh row, never eligible), each in its own autocommit transaction with the server's default
// synchronous commit, paced at a fixed rate.
const (
	fgWorkers = 4
	// fgPeriod is each worker's interval between operations: 4 × 100/s, light enough that the
	// two cores are not saturated by the workload itself, so what moves its latency is the sweep.
	fgPeriod = 10 * time.Millisecond
	// fgBaseline is how long the workload runs alone for the idle baseline.
	fgBaseline = 5 * time.Second
	// fgWarmup lets the workers connect and settle before a contestant starts.
	fgWarmup = 300 * time.Millisecond
	// fgLag is how many operations back the row a worker marks read was inserted.
	fgLag = 8
	// fgDrain bounds how long stop waits for the operations due in the window to complete.
	fgDrain = 10 * time.Second
)

// fgSample is one operation: when it was due and how long after that it completed. Latency is
// counted from the due time, not from when the worker got to it, so a stall counts once for
// every operation it delayed (no coordinated omission).
type fgSample struct {
	due time.Time
	lat time.Duration
}

// fgRun is a running workload.
type fgRun struct {
	cancel context.CancelFunc
	// last is the due time (unix ns) after which workers stop; 0 while the window is open.
	last atomic.Int64
	wg   sync.WaitGroup
	mu   sync.Mutex
	out  []fgSample
	err  error
}

// startForeground connects every worker, then starts them; the connections are made before it
// returns so that no contestant's window holds a connection setup.
func startForeground(ctx context.Context, dbURL string) (*fgRun, error) {
	conns := make([]*pgx.Conn, 0, fgWorkers)
	closeAll := func() {
		for _, c := range conns {
			c.Close(context.Background())
		}
	}
	var accounts []string
	for range fgWorkers {
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("foreground: connect: %w", err)
		}
		conns = append(conns, c)
	}
	rows, err := conns[0].Query(ctx, `SELECT id::text FROM accounts ORDER BY id LIMIT $1`, fgWorkers)
	if err == nil {
		accounts, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(accounts) < fgWorkers {
		closeAll()
		return nil, fmt.Errorf("foreground: pick accounts: %v (%d found)", err, len(accounts))
	}
	runCtx, cancel := context.WithCancel(ctx)
	r := &fgRun{cancel: cancel}
	start := time.Now()
	for i, c := range conns {
		r.wg.Add(1)
		// Workers start spread over one period, so their operations do not arrive in lockstep.
		go r.worker(runCtx, c, accounts[i], start.Add(fgPeriod*time.Duration(i)/fgWorkers))
	}
	return r, nil
}

func (r *fgRun) worker(ctx context.Context, c *pgx.Conn, account string, next time.Time) {
	defer r.wg.Done()
	defer c.Close(context.Background())
	var mine []int64
	var local []fgSample
	defer func() {
		r.mu.Lock()
		r.out = append(r.out, local...)
		r.mu.Unlock()
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := 0; ; i++ {
		if last := r.last.Load(); last != 0 && next.UnixNano() > last {
			return
		}
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		var err error
		if i%2 == 0 || len(mine) < fgLag {
			var id int64
			err = c.QueryRow(ctx, `INSERT INTO notifications (account_id, kind, body)
				VALUES ($1, 'mention', 'You have a new mention in #general') RETURNING id`, account).Scan(&id)
			mine = append(mine, id)
		} else {
			id := mine[len(mine)-fgLag]
			_, err = c.Exec(ctx, `UPDATE notifications SET read_at = now() WHERE id = $1`, id)
			// Keep the slice short: only the last fgLag ids are ever used.
			if len(mine) > 4*fgLag {
				mine = append(mine[:0], mine[len(mine)-fgLag:]...)
			}
		}
		if err != nil {
			// Only a stuck worker is cancelled (see stop); its error is not the database's.
			if ctx.Err() == nil {
				r.mu.Lock()
				r.err = errors.Join(r.err, fmt.Errorf("foreground operation: %w", err))
				r.mu.Unlock()
			}
			return
		}
		local = append(local, fgSample{due: next, lat: time.Since(next)})
		next = next.Add(fgPeriod)
	}
}

// stop ends the workload and returns the latencies of the operations due within [from, to]: the
// contestant's window, without the warm-up before it or the tail after it. Workers finish the
// operations due up to `to` first: cutting one short would drop exactly the slow ones.
func (r *fgRun) stop(from, to time.Time) ([]time.Duration, error) {
	r.last.Store(to.UnixNano())
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(fgDrain):
		r.cancel()
		<-done
		r.mu.Lock()
		r.err = errors.Join(r.err, fmt.Errorf("foreground: a worker was still busy %s after the window closed", fgDrain))
		r.mu.Unlock()
	}
	r.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	var lats []time.Duration
	for _, s := range r.out {
		if !s.due.Before(from) && !s.due.After(to) {
			lats = append(lats, s.lat)
		}
	}
	if r.err != nil {
		return lats, r.err
	}
	if len(lats) == 0 {
		return nil, fmt.Errorf("foreground: no operation was due within the %s window", to.Sub(from))
	}
	return lats, nil
}
