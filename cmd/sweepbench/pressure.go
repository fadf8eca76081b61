package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// The kernel's pressure stall information (PSI, Linux 4.20 and later) says what the foreground's
// slow operations waited on: the time some task spent runnable with no core to run on, or
// blocked on I/O. A window's share of each tells a drain that takes the cores from one that
// takes the disk, which its p99 alone does not.

// stalls are PSI's "some" totals since boot, in microseconds; ok is false where the kernel has
// none (no /proc/pressure, or PSI off).
type stalls struct {
	cpu, io int64
	ok      bool
}

// readStalls reads the machine's stall totals; a kernel without them answers !ok.
func readStalls() stalls {
	cpu, err1 := someTotal("/proc/pressure/cpu")
	io, err2 := someTotal("/proc/pressure/io")
	return stalls{cpu: cpu, io: io, ok: err1 == nil && err2 == nil}
}

// someTotal is the total= of the "some" line of a /proc/pressure file.
func someTotal(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	_, total, ok := bytes.Cut(line, []byte("total="))
	if !bytes.HasPrefix(line, []byte("some ")) || !ok {
		return 0, fmt.Errorf("%s: no some total in %q", path, line)
	}
	return strconv.ParseInt(string(bytes.TrimSpace(total)), 10, 64)
}

// waits is the share of a window of d during which some task waited for a core, and for I/O,
// between the samples s0 and s1; known is false where either sample is missing.
type waits struct {
	cpu, io float64
	known   bool
}

func waitsBetween(s0, s1 stalls, d time.Duration) waits {
	if !s0.ok || !s1.ok || d <= 0 {
		return waits{}
	}
	us := float64(d.Microseconds())
	return waits{cpu: float64(s1.cpu-s0.cpu) / us, io: float64(s1.io-s0.io) / us, known: true}
}

// String is "cpu 23%, io 5%", or "" where unknown.
func (w waits) String() string {
	if !w.known {
		return ""
	}
	return fmt.Sprintf("cpu %.0f%%, io %.0f%%", 100*w.cpu, 100*w.io)
}

// medianWaits is the median of each share over ws, the known ones; unknown where none is.
func medianWaits(ws []waits) waits {
	var cpu, io []float64
	for _, w := range ws {
		if w.known {
			cpu, io = append(cpu, w.cpu), append(io, w.io)
		}
	}
	if len(cpu) == 0 {
		return waits{}
	}
	return waits{cpu: median(cpu), io: median(io), known: true}
}

// waits are a's waits, one a round.
func (a across) waits() []waits {
	ws := make([]waits, len(a.rounds))
	for i, o := range a.rounds {
		ws[i] = o.waits
	}
	return ws
}
