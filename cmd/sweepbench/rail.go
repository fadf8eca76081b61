package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The rail's process bounds, for the bench only.
const (
	// apiBoot bounds the API's start, up to its "listening on" line.
	apiBoot = 15 * time.Second
	// apiStop bounds its graceful stop; SHUTDOWN_GRACE (15s by default) is inside it.
	apiStop = 20 * time.Second
	// maxCronRuns stops a rail that never drains (each run is truncated) instead of looping forever.
	maxCronRuns = 100
	// logTail is how many of the API's log lines an error quotes.
	logTail = 20
)

// railProc is a running `api serve` and what it logged.
type railProc struct {
	cmd  *exec.Cmd
	addr string
	key  string
	pid  int
	done chan error
	// sweep is the sweep that sweepcron runs (--only).
	sweep string

	mu      sync.Mutex
	batches []batch
	tail    []string
}

// railSetup boots `api serve` from binDir on the contestant's database with default settings,
// except LOG_LEVEL=debug (one line per batch, the source of C's batch timings) and the listen
// address, and sweeps with `sweepcron --only <sweep>`; extraEnv adds variables (C′'s settings, a
// SWEEP_POLICY_FILE whose policy has sweep).
func (b *bench) railSetup(binDir, sweep string, extraEnv []string) setupFunc {
	return func(ctx context.Context, dbURL string) (sweepFunc, func(), error) {
		p, err := b.startRail(ctx, binDir, dbURL, extraEnv)
		if err != nil {
			return nil, nil, err
		}
		p.sweep = sweep
		sweep := func(ctx context.Context) (outcome, error) { return b.sweepRail(ctx, p) }
		cleanup := func() {
			if err := p.stop(); err != nil {
				b.logf("api serve: %v", err)
			}
		}
		return sweep, cleanup, nil
	}
}

// variant is C′, the rail with -variant-env's settings or -variant-bin's build, on the copy db,
// sweeping sweep with extraEnv under the variant's settings; false without either flag.
func (b *bench) variant(db, sweep string, extraEnv []string) (contestant, bool) {
	if b.s.variantBin == "" && len(b.s.variantEnv) == 0 {
		return contestant{}, false
	}
	bin, what := b.s.binDir, []string{}
	if b.s.variantBin != "" {
		bin = b.s.variantBin
		what = append(what, "api from `"+bin+"`")
	}
	if len(b.s.variantEnv) > 0 {
		what = append(what, "`"+strings.Join(b.s.variantEnv, " ")+"`")
	}
	return contestant{key: "C′", db: db, name: "the rail with " + strings.Join(what, ", "),
		setup: b.railSetup(bin, sweep, append(slices.Clip(extraEnv), b.s.variantEnv...))}, true
}

func (b *bench) startRail(ctx context.Context, binDir, dbURL string, extraEnv []string) (*railProc, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	p := &railProc{key: hex.EncodeToString(raw), done: make(chan error, 1)}
	// Exactly these variables, nothing inherited: "default settings" must not pick up a
	// BATCH_TARGET from the caller's shell.
	cmd := exec.Command(filepath.Join(binDir, "api"), "serve")
	cmd.Env = append([]string{
		"DATABASE_URL=" + dbURL,
		"LISTEN_ADDR=127.0.0.1:0",
		"INTERNAL_SIGNING_KEY=" + p.key,
		"LOG_LEVEL=debug",
		"APP_ENV=development",
	}, extraEnv...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start api serve: %w", err)
	}
	p.cmd, p.pid = cmd, cmd.Process.Pid
	listening := make(chan string, 1)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				select {
				case listening <- addr:
				default:
				}
			}
		}
	}()
	go func() {
		defer readers.Done()
		p.readLog(stderr)
	}()
	go func() {
		// Wait only after the pipes are drained: exec's rule for StdoutPipe and StderrPipe.
		readers.Wait()
		p.done <- cmd.Wait()
	}()
	select {
	case p.addr = <-listening:
		return p, nil
	case err := <-p.done:
		p.done <- err
		return nil, fmt.Errorf("api serve exited before listening: %v\n%s", err, p.logTail())
	case <-time.After(apiBoot):
	case <-ctx.Done():
	}
	_ = p.stop()
	return nil, fmt.Errorf("api serve did not listen within %s\n%s", apiBoot, p.logTail())
}

// readLog keeps the batch lines of the API's JSON log and a tail of everything, for errors.
func (p *railProc) readLog(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		b, ok := parseBatchLine(sc.Bytes())
		p.mu.Lock()
		if ok {
			p.batches = append(p.batches, b)
		}
		p.tail = append(p.tail, line)
		if len(p.tail) > logTail {
			p.tail = p.tail[1:]
		}
		p.mu.Unlock()
	}
}

// parseBatchLine reads the runner's per-batch debug line,
// {"level":"DEBUG","msg":"sweep batch","size":…,"deleted":…,"took_ms":…,…}, and the line of a
// partitions-mode pass for each partition it detached and dropped, which the answer's batchCount
// counts as a batch: {"msg":"sweep partition","partition":…,"took_ms":…,…}.
func parseBatchLine(line []byte) (batch, bool) {
	if !bytes.Contains(line, []byte(`"sweep batch"`)) && !bytes.Contains(line, []byte(`"sweep partition"`)) {
		return batch{}, false
	}
	var rec struct {
		Msg       string   `json:"msg"`
		Size      int      `json:"size"`
		Deleted   int64    `json:"deleted"`
		Partition string   `json:"partition"`
		TookMs    *float64 `json:"took_ms"`
		Path      string   `json:"path"`
		Blocks    int      `json:"blocks"`
		Retried   bool     `json:"retried"`
	}
	if err := json.Unmarshal(line, &rec); err != nil || rec.TookMs == nil {
		return batch{}, false
	}
	took := time.Duration(*rec.TookMs * float64(time.Millisecond))
	switch {
	case rec.Msg == "sweep batch":
		return batch{size: rec.Size, rows: rec.Deleted, took: took, path: rec.Path, blocks: rec.Blocks, retried: rec.Retried}, true
	case rec.Msg == "sweep partition" && rec.Partition != "":
		return batch{partition: rec.Partition, took: took}, true
	}
	return batch{}, false
}

func (p *railProc) logTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

func (p *railProc) batchCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.batches)
}

// peakRSS reads the process's high-water resident set (VmHWM), in bytes.
func (p *railProc) peakRSS() (int64, error) {
	f, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0, fmt.Errorf("read the API's peak RSS: %w", err)
	}
	for line := range strings.Lines(string(f)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmHWM in /proc/<pid>/status")
}

// stop sends SIGTERM, as an orchestrator would, and waits for a clean exit.
func (p *railProc) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(apiStop):
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("api serve did not stop within %s of SIGTERM; killed", apiStop)
	}
}

// cronReport is the part of `sweepcron --json` the bench reads.
type cronReport struct {
	Routes []struct {
		Category string `json:"category"`
		Detail   string `json:"detail"`
		Answer   *struct {
			Deleted    int64  `json:"deleted"`
			BatchCount int    `json:"batchCount"`
			DurationMs int64  `json:"durationMs"`
			StopReason string `json:"stopReason"`
			// Passes carry what sweepcron's answer does not sum: the partitions a
			// partitions-mode pass dropped, the time a pass waited for the standbys, its access
			// path and the batches it retried past a held row lock.
			Passes []struct {
				ThrottledMs       int64  `json:"throttledMs"`
				PartitionsDropped int64  `json:"partitionsDropped"`
				Path              string `json:"path"`
				LockRetries       int    `json:"lockRetries"`
			} `json:"passes"`
		} `json:"answer"`
	} `json:"routes"`
	Error string `json:"error"`
}

// sweepRail calls `sweepcron --only <sweep>` until a run's answer is ok (exhausted), as
// the next ticks of a schedule would after a truncated run. The elapsed time is every run's, from
// the process start to its exit.
func (b *bench) sweepRail(ctx context.Context, p *railProc) (outcome, error) {
	var o outcome
	before := p.batchCount()
	wantBatches := 0
	for done := false; !done; {
		if o.runs == maxCronRuns {
			return o, fmt.Errorf("the rail did not drain in %d sweepcron runs", maxCronRuns)
		}
		cmd := exec.CommandContext(ctx, filepath.Join(b.s.binDir, "sweepcron"), "--only", p.sweep, "--json")
		cmd.Env = []string{"API_URL=http://" + p.addr, "INTERNAL_SIGNING_KEY=" + p.key}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		began := time.Now()
		runErr := cmd.Run()
		o.elapsed += time.Since(began)
		o.runs++
		var rep cronReport
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || len(rep.Routes) != 1 || rep.Routes[0].Answer == nil {
			return o, fmt.Errorf("sweepcron run %d: %v, no sweep answer:\n%s%s\napi log:\n%s", o.runs, runErr, stdout.Bytes(), stderr.Bytes(), p.logTail())
		}
		r := rep.Routes[0]
		o.deleted += r.Answer.Deleted
		o.serverTime += time.Duration(r.Answer.DurationMs) * time.Millisecond
		for i, pass := range r.Answer.Passes {
			o.throttled += time.Duration(pass.ThrottledMs) * time.Millisecond
			o.partitions += pass.PartitionsDropped
			o.lockRetries += pass.LockRetries
			if i == 0 {
				o.path = pass.Path
			}
		}
		wantBatches += r.Answer.BatchCount
		switch r.Category {
		case "truncated": // a backlog the next tick continues: run again, unless one run is the window
			done = oneRun(ctx)
		case "ok":
			done = true
		default:
			return o, fmt.Errorf("sweepcron run %d: %s (%s): %s", o.runs, r.Category, r.Detail, rep.Error)
		}
	}
	// The runner logs a batch before the answer is written, but the reader may not have read
	// the last lines off the pipe yet.
	for wait := time.Now().Add(5 * time.Second); p.batchCount()-before < wantBatches; {
		if time.Now().After(wait) {
			return o, fmt.Errorf("the API logged %d batch lines, its answers count %d: is LOG_LEVEL=debug honoured?",
				p.batchCount()-before, wantBatches)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.mu.Lock()
	o.batches = append([]batch(nil), p.batches[before:before+wantBatches]...)
	p.mu.Unlock()
	rss, err := p.peakRSS()
	o.peakRSS = rss
	return o, err
}
