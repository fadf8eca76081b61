package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/replica"
)

// The replica-lag run: a streaming standby of the bench cluster, and how far behind
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

// The replica run's target: how close the throttled rail's rate must stay to the unthrottled
// one's with a healthy standby, "within noise".
const targetThrottleNoise = 0.9

// lagStats is one contestant against one state of the standby.
type lagStats struct {
	slow bool
	// peak is the most the standby was behind, as the primary saw it, from the start of the
	// window until the standby had replayed all of it.
	peak replica.Peak
	// caughtUp is how long after the window the primary saw the standby replay all of it.
	caughtUp time.Duration
	// cycles counts the duty cycle's pauses (slow only), to show that it ran.
	cycles int
}

// replicaResult is the replica-lag run.
type replicaResult struct {
	rows      int
	eligible  int64
	rounds    rounds
	standbyPG string
}

// lagContestants are the monolithic DELETE, the rail without the throttle and the rail with
// MAX_REPLICA_LAG, both as C runs them (api serve and sweepcron, defaults); and, against the slow
// standby alone (the last), the rail with MAX_REPLICA_LAG_BYTES too. A time limit cannot see the
// first second of a drain (WAL younger than the limit is never over it), which a standby ten
// times slower than the primary takes about ten seconds to replay; a limit in bytes can.
func (b *bench) lagContestants() []contestant {
	lag := "MAX_REPLICA_LAG=" + lagLimit.String()
	return []contestant{
		{key: "A", db: "lag_a", name: "monolithic `DELETE … read_at < now() - interval '30 days'`", setup: monolithic(monolithicSQL, "")},
		{key: "C", db: "lag_c", name: "the rail, no throttle (defaults)", setup: b.railSetup(b.s.binDir, "notifications", nil)},
		{key: "T", db: "lag_t", name: fmt.Sprintf("the rail, `%s`", lag), setup: b.railSetup(b.s.binDir, "notifications", []string{lag})},
		{key: "TB", db: "lag_tb", name: fmt.Sprintf("the rail, `%s MAX_REPLICA_LAG_BYTES=%d` (%s)", lag, lagLimitBytes, fmtMiB(lagLimitBytes)),
			setup: b.railSetup(b.s.binDir, "notifications", []string{lag, fmt.Sprintf("MAX_REPLICA_LAG_BYTES=%d", lagLimitBytes)})},
	}
}

func (b *bench) replicaRun(ctx context.Context) (replicaResult, error) {
	began := time.Now()
	res := replicaResult{rows: b.s.rows}
	tpl, eligible, err := b.template(ctx, dense, b.s.rows)
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
	cs := b.lagContestants()
	err = b.addRounds("replica", began, lagRoundsBudget, func() bool { return res.rounds.clean() >= b.s.rounds }, func(n int) error {
		rd := round{n: n}
		err := b.play(ctx, fmt.Sprintf("replica round %d, healthy standby", n), &rd, cs[:len(cs)-1], tpl, b.lagProbe(sb, false), eligible)
		if err == nil {
			err = b.play(ctx, fmt.Sprintf("replica round %d, slow standby", n), &rd, cs, tpl, b.lagProbe(sb, true), eligible)
		}
		res.rounds = append(res.rounds, rd)
		return err
	})
	if err != nil {
		return res, err
	}
	return res, b.drop(ctx, tpl)
}

// lagProbe has the standby caught up before each window, healthy or on its duty cycle during it,
// and its lag watched from the start of the window until it has replayed everything the
// contestant wrote.
func (b *bench) lagProbe(sb *standby, slow bool) probe {
	return probe{
		// The standby replays the copy (CREATE DATABASE copies the files on the standby too) and
		// the checkpoint before the window opens: the window's lag is the contestant's alone.
		ready: func(ctx context.Context) error { return sb.waitCaughtUp(ctx, lagCatchUp) },
		watch: func(ctx context.Context) (func(*outcome) error, error) {
			conn, err := pgx.Connect(ctx, b.s.databaseURL)
			if err != nil {
				return nil, err
			}
			var duty *dutyCycle
			if slow {
				duty = sb.startDutyCycle(ctx, lagDutyPeriod, lagDutyPaused)
			}
			watch := replica.StartWatch(ctx, conn, lagSample)
			return func(o *outcome) error {
				defer conn.Close(context.Background())
				ended := time.Now()
				err := sb.waitCaughtUp(ctx, lagCatchUp)
				o.slow, o.caughtUp = slow, time.Since(ended)
				var watchErr, dutyErr error
				o.peak, watchErr = watch.Stop()
				if duty != nil {
					o.cycles, dutyErr = duty.stop(sb)
				}
				return errors.Join(err, watchErr, dutyErr)
			}, nil
		},
	}
}

// fmtBytes prints a byte count in MB (10^6), as the WAL column does.
func fmtBytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// overLimit checks the throttled promise for one round: the peak replay lag is within the limit
// plus that round's longest batch plus one pause of the duty cycle (the standby, paused, falls
// further behind on WAL it already has, whatever the primary does; see dutyCycle).
func overLimit(o outcome) (bound time.Duration, ok bool) {
	bound = lagLimit + maxDuration(o.batchDurations()) + lagDutyPaused
	return bound, o.peak.Replay <= bound
}

func state(slow bool) string {
	if slow {
		return "slow"
	}
	return "healthy"
}

func (b *bench) renderReplica(r replicaResult) string {
	var w strings.Builder
	b.header(&w, "Replica lag: a streaming standby behind each drain")
	fmt.Fprintf(&w, "Table: %s notifications rows, %s eligible. Standby: PostgreSQL %s, `wal_receiver_status_interval=%s`; "+
		"slow: its replay paused %s of every %s; lag sampled every %s. %s.\n\n",
		fmtCount(int64(r.rows)), fmtCount(r.eligible), r.standbyPG, standbyStatusInterval, lagDutyPaused, lagDutyPeriod, lagSample, roundsNote(r.rounds))
	as := acrossAll(r.rounds.counted())
	peak := func(o outcome) time.Duration { return o.peak.Replay }
	behind := func(o outcome) float64 { return float64(o.peak.Bytes) }
	rail := func(f func(x across) string) func(x across) string {
		return func(x across) string {
			if x.key == "A" {
				return ""
			}
			return f(x)
		}
	}
	contestantTable(&w, as, []column{{"standby", func(x across) string { return state(x.slow) }}, colKey, colName, colTime, colRate,
		{"÷ C>", func(x across) string { return fmt.Sprintf("%.2f", x.ratio(pickSlow(as, "C", x.slow))) }},
		{"peak behind>", func(x across) string { return fmtBytes(int64(x.med(behind))) }},
		{"worst>", func(x across) string { return fmtBytes(int64(x.most(behind))) }},
		{"peak replay lag>", func(x across) string { return fmtDuration(x.medDur(peak)) }},
		{"worst>", func(x across) string {
			return fmtDuration(time.Duration(x.most(func(o outcome) float64 { return float64(peak(o)) })))
		}},
		{"caught up after>", func(x across) string {
			return fmtDuration(x.medDur(func(o outcome) time.Duration { return o.caughtUp }))
		}},
		{"throttled>", rail(func(x across) string {
			return fmtDuration(x.medDur(func(o outcome) time.Duration { return o.throttled }))
		})},
		{"sweepcron runs>", rail(func(x across) string {
			return fmt.Sprintf("%.0f", x.med(func(o outcome) float64 { return float64(o.runs) }))
		})},
		colLongest, colWAL})
	w.WriteString("Every round, in order:\n\n")
	roundList(&w, r.rounds, func(_ round, o outcome) string {
		part := fmt.Sprintf("%s/%s %s, %s / %s behind, caught up %s after", state(o.slow), o.key, fmtDuration(o.elapsed),
			fmtBytes(o.peak.Bytes), fmtDuration(o.peak.Replay), fmtDuration(o.caughtUp))
		if o.key != "A" {
			part += fmt.Sprintf(", throttled %s in %d run(s)", fmtDuration(o.throttled), o.runs)
		}
		return part
	})
	t, th, ch := pickSlow(as, "T", true), pick(as, "T"), pick(as, "C")
	if len(t.rounds) == 0 || len(th.rounds) == 0 {
		return w.String()
	}
	// The throttled promise, round by round.
	within := func(x across) (string, string) {
		okAll := true
		var bounds []string
		for _, o := range x.rounds {
			bound, ok := overLimit(o)
			okAll = okAll && ok
			rel := map[bool]string{true: "≤", false: ">"}[ok]
			bounds = append(bounds, fmt.Sprintf("%s %s %s", fmtDuration(o.peak.Replay), rel, fmtDuration(bound)))
		}
		return strings.Join(bounds, "; "), verdict(okAll)
	}
	measured, ok := within(t)
	rows := [][]string{{fmt.Sprintf("slow standby, T (`MAX_REPLICA_LAG=%s`): peak replay lag ≤ %s + the round's longest batch + one %s pause, every round",
		lagLimit, fmtDuration(lagLimit), fmtDuration(lagDutyPaused)), measured, ok}}
	if tb := pickSlow(as, "TB", true); len(tb.rounds) > 0 {
		measured, ok := within(tb)
		rows = append(rows, []string{fmt.Sprintf("for comparison, slow standby, TB (`MAX_REPLICA_LAG_BYTES=%d` too): the same bound", lagLimitBytes), measured, ok})
	}
	for _, x := range []across{pickSlow(as, "A", true), pickSlow(as, "C", true)} {
		rows = append(rows, []string{fmt.Sprintf("slow standby, %s (%s): falls behind past %s, as far as the slowdown allows", x.key, x.name, fmtDuration(lagLimit)),
			fmt.Sprintf("peak %s / %s behind, caught up %s after", fmtDuration(x.medDur(peak)), fmtBytes(int64(x.med(behind))),
				fmtDuration(x.medDur(func(o outcome) time.Duration { return o.caughtUp }))), verdict(x.medDur(peak) > lagLimit)})
	}
	ratio, spread := th.ratio(ch), ch.most(outcome.rowsPerSec)/leastRate(ch)
	rows = append(rows, []string{fmt.Sprintf("healthy standby: throttled rows/s ≥ %.1f × unthrottled (within noise; C's own rounds spread %.2f ×)", targetThrottleNoise, spread),
		fmt.Sprintf("%.2f ×", ratio), verdict(ratio >= targetThrottleNoise)})
	table(&w, []string{"target", "measured>", ""}, rows)
	return w.String()
}

// leastRate is the smallest rows/s of x's rounds.
func leastRate(x across) float64 {
	m := x.rounds[0].rowsPerSec()
	for _, o := range x.rounds {
		m = min(m, o.rowsPerSec())
	}
	return m
}
