package reliability

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// healthy are the categories sweepcron counts as success.
var healthy = []string{"ok", "truncated", "skipped"}

// TestPostgresRestart: PostgreSQL restarted (pg_ctl restart -m fast, on a cluster of the test's
// own) while a batch is in flight.
//
//   - The route whose batch was cut reports batch-error with the database's own words;
//   - sweepcron goes on with the other routes of the same tick (none is left uncalled, none is
//     unreachable: the API is up, only its database blinked);
//   - the same api process, never restarted, reconnects by itself (pgxpool) and answers /readyz;
//   - the following ticks finish the work: every eligible row gone, every fresh row kept.
//
// The batch is made to be in flight at the restart, not merely near it: the test takes an ACCESS
// EXCLUSIVE lock on the table between two batches, waits until pg_blocking_pids shows the api's
// next batch waiting on it, and restarts then.
func TestPostgresRestart(t *testing.T) {
	long(t)
	cluster := startCluster(t)
	server := cluster.url

	// A database of its own on the private cluster, migrated by the binary under test.
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `CREATE DATABASE sweeprail`); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	u := replaceDB(t, server, "sweeprail")
	apiBin, cronBin := binaries(t)
	migrate := exec.Command(apiBin, "migrate", "up", "--demo")
	migrate.Env = envList(map[string]string{"DATABASE_URL": u})
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("api migrate up: %v\n%s", err, out)
	}

	pool := openPool(t, u)
	seedNotifications(t, pool, 3000, 300)
	seedTokens(t, pool, 300, 30)
	notesBefore, tokensBefore := notificationsState(t, pool), tokensState(t, pool)

	api := startAPI(t, "reliability-restart", u, map[string]string{
		// TTL 6s: a lease whose release failed while the database was down blocks the sweep
		// for at most that long.
		"SWEEP_DEADLINE":          "3s",
		"BATCH_STATEMENT_TIMEOUT": "10s",
		"BATCH_LOCK_TIMEOUT":      "10s",
		"COUNT_TIMEOUT":           "5s",
		"SERVER_WRITE_TIMEOUT":    "15s",
		"SHUTDOWN_GRACE":          "12s",
		"BATCH_SIZE":              "100",
		"BATCH_TARGET":            "1us",
		"BATCH_PAUSE":             "50ms",
	})
	cron := startProc(t, "sweepcron", cronBin, []string{"--every", "1s", "--json"}, cronEnv(api, "20s"))

	waitFor(t, "the notifications run to hold its lease and commit three batches", 30*time.Second, func() bool {
		return scalar[int64](t, pool, `SELECT count(*) FROM sweeprail.sweep_lock WHERE label = 'notifications'`) == 1 &&
			notificationsState(t, pool).eligible <= notesBefore.eligible-300
	})
	holder, err := pgx.Connect(ctx, withApp(t, u, "reliability-holder"))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	lockCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := holder.Exec(lockCtx, `BEGIN; LOCK TABLE notifications IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the api's next batch to wait on the lock", 10*time.Second, func() bool {
		return blockedBy(t, pool, api.app, holder.PgConn().PID())
	})
	startedBefore := scalar[time.Time](t, pool, `SELECT pg_postmaster_start_time()`)
	restartedAt := time.Now()
	cluster.restart(t)
	t.Logf("PostgreSQL restarted in %s", time.Since(restartedAt).Round(time.Millisecond))

	// The test's own pool holds sessions the restart ended; a new one, as any client would.
	pool.Close()
	pool = openPool(t, u)
	if started := scalar[time.Time](t, pool, `SELECT pg_postmaster_start_time()`); !started.After(startedBefore) {
		t.Fatalf("postmaster start time %s, was %s: the server was not restarted", started, startedBefore)
	}

	var failed int // index of the tick whose notifications run was cut
	t.Run("the cut route reports batch-error and the tick goes on", func(t *testing.T) {
		waitFor(t, "a tick reporting the cut run", 30*time.Second, func() bool {
			for i, r := range cronReports(t, cron.stdout) {
				for _, rt := range r.Routes {
					if rt.Sweep == "notifications" && rt.Category != "ok" && rt.Category != "truncated" && rt.Category != "skipped" {
						failed = i
						return true
					}
				}
			}
			return false
		})
		rep := cronReports(t, cron.stdout)[failed]
		if len(rep.NotCalled) != 0 || rep.ExitCode != 1 {
			t.Errorf("tick: notCalled %v exit %d, want every route called and exit 1", rep.NotCalled, rep.ExitCode)
		}
		var names []string
		for _, rt := range rep.Routes {
			names = append(names, rt.Sweep)
			switch {
			case rt.Sweep == "notifications":
				if rt.Category != "batch-error" || rt.Answer == nil || rt.Answer.Error == nil ||
					rt.Answer.Error.Code == "" || rt.Answer.Error.Message == "" || rt.Answer.Error.Pass != "read" {
					t.Errorf("notifications: %+v, want batch-error with a code, a message and pass read", rt)
					continue
				}
				t.Logf("the cut run answered HTTP %d: code %s: %s", rt.StatusCode, rt.Answer.Error.Code, rt.Answer.Error.Message)
			case rt.Category == "batch-error":
				// A route called while the server was still starting fails the same way;
				// it must still say why.
				if rt.Answer == nil || rt.Answer.Error == nil || rt.Answer.Error.Message == "" {
					t.Errorf("%s: batch-error without an error: %+v", rt.Sweep, rt)
				}
				t.Logf("%s (called while PostgreSQL was coming back): %s", rt.Sweep, rt.Answer.Error.Message)
			case rt.StatusCode == http.StatusServiceUnavailable && strings.Contains(rt.Detail, "database_unreachable"):
				// A route called while the server was down is refused before it runs: its
				// nonce is checked in PostgreSQL. It must say so, as a 503 a scheduler retries.
				t.Logf("%s (refused while PostgreSQL was down): %s", rt.Sweep, rt.Detail)
			case !slices.Contains(healthy, rt.Category):
				t.Errorf("%s: category %s, want ok, truncated, skipped or batch-error", rt.Sweep, rt.Category)
			}
		}
		if i := slices.Index(names, "notifications"); i < 0 || i == len(names)-1 {
			t.Errorf("routes called %v: want routes after notifications in the same tick", names)
		}
	})

	t.Run("the next ticks finish the work on the same process", func(t *testing.T) {
		waitFor(t, "a later tick with every route healthy and nothing eligible left", 60*time.Second, func() bool {
			reps := cronReports(t, cron.stdout)
			if len(reps) <= failed+1 {
				return false
			}
			last := reps[len(reps)-1]
			for _, rt := range last.Routes {
				if !slices.Contains(healthy, rt.Category) {
					return false
				}
			}
			return last.ExitCode == 0 && notificationsState(t, pool).eligible == 0 && tokensState(t, pool).eligible == 0
		})
		reps := cronReports(t, cron.stdout)
		var after []string
		for _, r := range reps[failed+1:] {
			for _, rt := range r.Routes {
				if rt.Sweep == "notifications" {
					after = append(after, rt.Category)
				}
			}
		}
		t.Logf("finished %d ticks after the cut one (%d ticks in all); notifications in those ticks: %v", len(reps)-1-failed, len(reps), after)
		if strings.Contains(api.stderr.String(), `"msg":"release lease"`) {
			// The cut run's release ran while the server was still down: its lease stays until
			// its TTL, which is what the skipped ticks above are.
			t.Log("the cut run's lease release failed while PostgreSQL was down; it expired after its TTL (2 × SWEEP_DEADLINE = 6s)")
		}
		if api.exited() {
			t.Fatalf("the api exited: %v", api.err)
		}
		a := send(mustRequest(t, http.MethodGet, api.url+"/readyz"))
		if a.err != nil || a.status != http.StatusOK {
			t.Errorf("/readyz: HTTP %d %v: %s", a.status, a.err, a.body)
		}
		notes, tokens := notificationsState(t, pool), tokensState(t, pool)
		if notes.fresh != notesBefore.fresh || notes.freshSum != notesBefore.freshSum ||
			tokens.fresh != tokensBefore.fresh || tokens.freshSum != tokensBefore.freshSum {
			t.Errorf("fresh rows changed: notifications %d (was %d), tokens %d (was %d)",
				notes.fresh, notesBefore.fresh, tokens.fresh, tokensBefore.fresh)
		}
	})

	if err := cron.terminate(t, 30*time.Second); err != nil {
		t.Errorf("sweepcron exited with %v after SIGTERM, want 0", err)
	}
	if err := api.terminate(t, 20*time.Second); err != nil {
		t.Errorf("api exited with %v after SIGTERM, want 0", err)
	}
	if strings.Contains(api.stderr.String(), "DATA RACE") || strings.Contains(cron.stderr.String(), "DATA RACE") {
		t.Errorf("the race detector reported a data race:\n%s\n%s", api.stderr, cron.stderr)
	}
}

// cluster is a private PostgreSQL started with scripts/pg under PG_DIR.
type cluster struct {
	dir, url string
}

// startCluster starts a throwaway cluster with scripts/pg under PG_DIR, destroyed at cleanup.
// The folder is a fresh one under the system temp folder, opened to user postgres, who runs the
// server: neither a 0700 t.TempDir nor a clone under a closed home would let it in.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sweeprail-reliability-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // after destroy, in case it could not
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "pg")
	c := &cluster{dir: dir}
	t.Cleanup(func() {
		cmd := exec.Command(script, "destroy")
		cmd.Env = append(os.Environ(), "PG_DIR="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("scripts/pg destroy: %v\n%s", err, out)
		}
	})
	cmd := exec.Command(script, "start")
	cmd.Env = append(os.Environ(), "PG_DIR="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("PG_DIR=%s scripts/pg start: %v\n%s", dir, err, out)
	}
	c.url = strings.TrimSpace(string(out))
	if !strings.HasPrefix(c.url, "postgres://") {
		t.Fatalf("scripts/pg start printed %q, want a URL", out)
	}
	return c
}

// restart runs pg_ctl restart -m fast, as the cluster's owner: fast mode ends every session at
// once, rolling back open transactions, the way an operator's restart or a failover does. It
// reuses the options the cluster was started with (port, settings) from postmaster.opts.
func (c *cluster) restart(t *testing.T) {
	t.Helper()
	pgCtl := ""
	if matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(matches) > 0 {
		slices.Sort(matches)
		pgCtl = matches[len(matches)-1] // the newest, as scripts/pg picks
	} else if p, err := exec.LookPath("pg_ctl"); err == nil {
		pgCtl = p
	} else {
		t.Fatal("pg_ctl not found")
	}
	args := []string{pgCtl, "-D", filepath.Join(c.dir, "data"), "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "-m", "fast", "restart"}
	if os.Geteuid() == 0 {
		// postgres refuses to run as root.
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = "/" // a working folder user postgres can enter, as scripts/pg does
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func replaceDB(t *testing.T, server, name string) string {
	t.Helper()
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func mustRequest(t *testing.T, method, target string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
