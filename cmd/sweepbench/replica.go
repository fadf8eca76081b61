package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/replica"
)

// The replica-lag run (issue 20): a streaming standby of the bench cluster, and how far behind
// each way of deleting the backlog leaves it. Every contestant deletes the eligible rows of a
// fresh copy of the notifications template twice per round: once with the standby healthy, once
// with it slowed by a duty cycle on its replay (see dutyCycle). No foreground runs: the question
// is the standby, and a foreground would only move the numbers by the noise it adds.
const (
	// lagLimit is the throttled contestant's MAX_REPLICA_LAG.
	lagLimit = time.Second
	// lagDutyPeriod and lagDutyPaused are the slow standby's schedule: replay paused 90 ms of
	// every 100 ms, so it replays at a tenth of its own speed. A healthy standby on loopback
	// replays the notifications drain several times faster than the primary writes it (a 164 MB
	// monolithic DELETE in about 0.3 s); at a third of its speed it still kept within 1 s of the
	// rail, so only a tenth shows what a throttle is for.
	lagDutyPeriod = 100 * time.Millisecond
	lagDutyPaused = 90 * time.Millisecond
	// lagLimitBytes is TB's MAX_REPLICA_LAG_BYTES: about a third of a second of the slow
	// standby's replay, so that what it has left to replay stays within the time limit.
	lagLimitBytes = 16 << 20
	// lagSample is how often the watch reads pg_stat_replication on the primary.
	lagSample = 20 * time.Millisecond
	// lagCatchUp bounds the wait for the standby to replay a contestant's WAL after its window.
	lagCatchUp = 5 * time.Minute
	// lagRoundsBudget stops adding rounds to the replica run after this long.
	lagRoundsBudget = 3 * time.Minute
)

// lagOutcome is one contestant against one state of the standby.
type lagOutcome struct {
	outcome
	slow bool
	// peak is the most the standby was behind, as the primary saw it, from the start of the
	// window until the standby had replayed all of it.
	peak replica.Peak
	// caughtUp is how long after the window the primary saw the standby replay all of it.
	caughtUp time.Duration
	// cycles counts the duty cycle's pauses (slow only), to show that it ran.
	cycles int
}

// lagRound is each contestant once against each state of the standby.
type lagRound struct {
	n        int
	outcomes []lagOutcome
}

func (r lagRound) maxForeign() float64 {
	m := 0.0
	for _, o := range r.outcomes {
		m = max(m, o.foreign)
	}
	return m
}

func (r lagRound) disturbed() bool { return r.maxForeign() > maxForeign }

// replicaResult is the replica-lag run.
type replicaResult struct {
	rows      int
	eligible  int64
	rounds    []lagRound
	elapsed   time.Duration
	standbyPG string
}

func (r replicaResult) clean() int {
	n := 0
	for _, rd := range r.rounds {
		if !rd.disturbed() {
			n++
		}
	}
	return n
}

// counted is the rounds the medians use: the clean ones, or every round when none was clean.
func (r replicaResult) counted() []lagRound {
	var out []lagRound
	for _, rd := range r.rounds {
		if !rd.disturbed() {
			out = append(out, rd)
		}
	}
	if len(out) == 0 {
		return r.rounds
	}
	return out
}

// lagContestant is a contestant of the replica-lag run; slowOnly runs it against the slow
// standby alone.
type lagContestant struct {
	contestant
	slowOnly bool
}

// lagContestants are the three of issue 20: the monolithic DELETE, the rail without the throttle
// and the rail with MAX_REPLICA_LAG, both as C runs them (api serve and sweepcron, defaults);
// and, against the slow standby, the rail with MAX_REPLICA_LAG_BYTES too. A time limit cannot
// see the first second of a drain (WAL younger than the limit is never over it), which a standby
// ten times slower than the primary takes about ten seconds to replay; a limit in bytes can.
func (b *bench) lagContestants() []lagContestant {
	return []lagContestant{
		{contestant: contestant{key: "A", db: "lag_a", name: "monolithic `DELETE … read_at < now() - interval '30 days'`", setup: connectOnly(monolithicSQLRun(monolithicSQL))}},
		{contestant: contestant{key: "C", db: "lag_c", name: "the rail, no throttle (defaults)", setup: b.railSetup(b.s.binDir, nil)}},
		{contestant: contestant{key: "T", db: "lag_t", name: fmt.Sprintf("the rail, `MAX_REPLICA_LAG=%s`", lagLimit),
			setup: b.railSetup(b.s.binDir, []string{"MAX_REPLICA_LAG=" + lagLimit.String()})}},
		{contestant: contestant{key: "TB", db: "lag_tb", name: fmt.Sprintf("the rail, `MAX_REPLICA_LAG=%s MAX_REPLICA_LAG_BYTES=%d` (%s)", lagLimit, lagLimitBytes, fmtMiB(lagLimitBytes)),
			setup: b.railSetup(b.s.binDir, []string{"MAX_REPLICA_LAG=" + lagLimit.String(), fmt.Sprintf("MAX_REPLICA_LAG_BYTES=%d", lagLimitBytes)})},
			slowOnly: true},
	}
}

func (b *bench) replicaRun(ctx context.Context) (replicaResult, error) {
	began := time.Now()
	res := replicaResult{rows: b.s.rows}
	tpl, eligible, err := b.template(ctx, b.s.rows)
	if err != nil {
		return res, err
	}
	res.eligible = eligible
	b.logf("replica: starting a streaming standby (pg_basebackup -R)")
	sb, err := startStandby(ctx, b.s.databaseURL)
	if err != nil {
		return res, err
	}
	defer sb.stop()
	// The standby's replay is the bench's own work: its CPU must not count as another tenant's.
	roots := b.cpu.roots
	b.cpu.roots = append(slices.Clone(roots), sb.postmaster)
	defer func() { b.cpu.roots = roots }()
	if err := sb.ctl.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&res.standbyPG); err != nil {
		return res, err
	}
	b.logf("replica: standby %s streaming on %s", sb.name, sb.url)
	contestants := b.lagContestants()
	for n := 1; res.clean() < b.s.rounds && n <= b.roundsCap(); n++ {
		if n > b.s.rounds && time.Since(began) > lagRoundsBudget {
			b.logf("replica: %s spent: no more rounds", lagRoundsBudget)
			break
		}
		rd := lagRound{n: n}
		for _, slow := range []bool{false, true} {
			for _, lc := range contestants {
				if lc.slowOnly && !slow {
					continue
				}
				c := lc.contestant
				state := "healthy"
				if slow {
					state = fmt.Sprintf("slow (replay paused %s of every %s)", lagDutyPaused, lagDutyPeriod)
				}
				b.logf("replica round %d: %s, standby %s", n, c.key, state)
				o, err := b.measureLag(ctx, c, tpl, sb, slow)
				if err != nil {
					return res, fmt.Errorf("replica round %d, %s: %w", n, c.key, err)
				}
				if o.deleted != eligible {
					return res, fmt.Errorf("replica round %d, %s deleted %d rows, but %d were eligible", n, c.key, o.deleted, eligible)
				}
				b.logf("replica round %d: %s: %d rows in %s (%.0f rows/s), peak %s / %s behind over %d samples, caught up %s after, throttled %s, others %.0f%%",
					n, c.key, o.deleted, o.elapsed.Round(time.Millisecond), o.rowsPerSec(), fmtBytes(o.peak.Bytes), fmtDuration(o.peak.Replay),
					o.peak.Samples, fmtDuration(o.caughtUp), fmtDuration(o.throttled), 100*o.foreign)
				rd.outcomes = append(rd.outcomes, o)
			}
		}
		if rd.disturbed() {
			b.logf("replica round %d: disturbed (other tenants took up to %.0f%% of the machine): left out of the medians", n, 100*rd.maxForeign())
		}
		res.rounds = append(res.rounds, rd)
	}
	return res, b.drop(ctx, tpl)
}

// measureLag runs contestant c on a fresh copy of tpl with the standby caught up, healthy or on
// its duty cycle, and watches the standby's lag from the start of the window until it has
// replayed everything the contestant wrote.
func (b *bench) measureLag(ctx context.Context, c contestant, tpl string, sb *standby, slow bool) (lagOutcome, error) {
	lo := lagOutcome{slow: slow}
	name := "sweepbench_" + c.db
	u, err := b.clone(ctx, name, tpl)
	if err != nil {
		return lo, err
	}
	defer b.drop(context.WithoutCancel(ctx), name) //nolint:errcheck // best effort; the next run drops it too
	if err := b.checkpoint(ctx); err != nil {
		return lo, err
	}
	// The standby replays the copy (CREATE DATABASE copies the files on the standby too) and the
	// checkpoint before the window opens: the window's lag is the contestant's alone.
	if err := sb.waitCaughtUp(ctx, lagCatchUp); err != nil {
		return lo, err
	}
	sweep, cleanup, err := c.setup(ctx, u)
	if err != nil {
		return lo, err
	}
	defer cleanup()
	watchConn, err := pgx.Connect(ctx, b.s.databaseURL)
	if err != nil {
		return lo, err
	}
	defer watchConn.Close(context.Background())
	var duty *dutyCycle
	if slow {
		duty = sb.startDutyCycle(ctx, lagDutyPeriod, lagDutyPaused)
	}
	watch := replica.StartWatch(ctx, watchConn, lagSample)
	o, mark, err := b.window(ctx, u, sweep, false)
	ended := time.Now()
	if err == nil {
		err = sb.waitCaughtUp(ctx, lagCatchUp)
	}
	lo.caughtUp = time.Since(ended)
	peak, watchErr := watch.Stop()
	var dutyErr error
	if duty != nil {
		lo.cycles, dutyErr = duty.stop(sb)
	}
	if err := errors.Join(err, watchErr, dutyErr); err != nil {
		return lo, err
	}
	o.key, o.name = c.key, c.name
	lo.outcome, lo.peak = o, peak
	return lo, b.addWAL(ctx, &lo.outcome, mark)
}

// fmtBytes prints a byte count in MB (10^6), as the WAL column does.
func fmtBytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
