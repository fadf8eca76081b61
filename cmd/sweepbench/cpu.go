package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The machine is shared: another tenant's build can take both cores in the middle of a
// contestant. cpuMeter tells such a window apart, by measuring how much of the machine's CPU went
// to processes that are not the bench's own (the bench, its children such as api serve and
// sweepcron, and the bench cluster's postmaster with all its backends).

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux platform Go supports
// (the kernel exports it as sysconf(_SC_CLK_TCK) and has kept it fixed for user space).
const clockTicks = 100

type cpuMeter struct {
	roots []int // the bench and the postmaster: theirs and their descendants' CPU is ours
	cores int
}

type cpuSample struct {
	at   time.Time
	busy int64 // machine-wide ticks not idle (user, nice, system, irq, softirq, steal)
	ours int64 // ticks of the roots and every descendant, live or reaped
}

func newCPUMeter(postmaster, cores int) cpuMeter {
	return cpuMeter{roots: []int{os.Getpid(), postmaster}, cores: cores}
}

func (m cpuMeter) sample() (cpuSample, error) {
	s := cpuSample{at: time.Now()}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, err
	}
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return s, errors.New("/proc/stat: no cpu line")
	}
	// user nice system idle iowait irq softirq steal: everything but idle and iowait.
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil {
			return s, fmt.Errorf("/proc/stat: %w", err)
		}
		s.busy += v
	}
	procs, err := readProcs()
	if err != nil {
		return s, err
	}
	// A reaped child's time is in its parent's cutime/cstime; a live one's is its own. Walking
	// down from the roots counts each tick once.
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	var walk func(pid int)
	walk = func(pid int) {
		p, ok := procs[pid]
		if !ok {
			return
		}
		s.ours += p.self + p.reaped
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, r := range m.roots {
		walk(r)
	}
	return s, nil
}

// foreign is the share of the machine's CPU capacity (all cores) that processes outside the
// bench used between a and b: 0 on a quiet machine, 0.5 when a neighbour held one of two cores.
func (m cpuMeter) foreign(a, b cpuSample) float64 {
	capacity := b.at.Sub(a.at).Seconds() * clockTicks * float64(m.cores)
	if capacity <= 0 {
		return 0
	}
	return max(0, float64((b.busy-a.busy)-(b.ours-a.ours))/capacity)
}

type procTimes struct {
	ppid         int
	self, reaped int64
}

// readProcs reads every process's parent and CPU times from /proc/<pid>/stat. A process that
// exits while it is read is skipped.
func readProcs() (map[int]procTimes, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	out := make(map[int]procTimes, len(dirs))
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		if p, ok := parseProcStat(b); ok {
			out[pid] = p
		}
	}
	return out, nil
}

// parseProcStat reads ppid (field 4), utime, stime, cutime and cstime (14–17) of a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and may hold spaces or
// parentheses itself, so the fields are counted from the last ')'.
func parseProcStat(b []byte) (procTimes, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procTimes{}, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3, the state
	if len(f) < 15 {
		return procTimes{}, false
	}
	num := func(k int) int64 { v, _ := strconv.ParseInt(string(f[k-3]), 10, 64); return v }
	return procTimes{ppid: int(num(4)), self: num(14) + num(15), reaped: num(16) + num(17)}, true
}
