package reliability

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// bouncer is a PgBouncer of one test's own, in front of the test cluster, in transaction mode:
// the shared ones make test starts must never restart under another test.
type bouncer struct {
	dir, ini string
	port     int
	cmd      *exec.Cmd
}

// startBouncer starts a PgBouncer in front of the server of database URL u, as scripts/pg
// pooler configures one, run as the postgres user when the test runs as root (PgBouncer refuses
// root). Without Debian's pgbouncer the test skips, and fails under CI=true.
func startBouncer(t *testing.T, u string) *bouncer {
	t.Helper()
	if _, err := exec.LookPath("pgbouncer"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("pgbouncer is not installed and CI=true (scripts/pg pooler install)")
		}
		t.Skip("pgbouncer is not installed: scripts/pg pooler install")
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	// A folder of its own under the system's temporary one: t.TempDir's parents are the test
	// user's alone, which the postgres user cannot cross.
	dir, err := os.MkdirTemp("", "sweeprail-bouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	b := &bouncer{dir: dir, port: freePort(t)}
	b.ini = filepath.Join(b.dir, "pgbouncer.ini")
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s
[pgbouncer]
pool_mode = transaction
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s/userlist.txt
logfile = %s/pgbouncer.log
max_client_conn = 100
default_pool_size = 10
ignore_startup_parameters = extra_float_digits
`, pu.Hostname(), pu.Port(), b.port, b.dir, b.dir)
	for name, body := range map[string]string{"pgbouncer.ini": ini, "userlist.txt": `"postgres" ""` + "\n"} {
		if err := os.WriteFile(filepath.Join(b.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if os.Getuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PgBouncer refuses root, and there is no postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		for _, p := range []string{b.dir, b.ini, filepath.Join(b.dir, "userlist.txt")} {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.start(t)
	t.Cleanup(func() { b.stop(t) })
	return b
}

func (b *bouncer) start(t *testing.T) {
	t.Helper()
	args := []string{b.ini}
	bin := "pgbouncer"
	if os.Getuid() == 0 {
		bin, args = "runuser", append([]string{"-u", "postgres", "--", "pgbouncer"}, args...)
	}
	b.cmd = exec.Command(bin, args...)
	out := &lineBuffer{}
	b.cmd.Stdout, b.cmd.Stderr = out, out
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	waitFor(t, "pgbouncer to listen", 10*time.Second, func() bool {
		if b.cmd.ProcessState != nil {
			t.Fatalf("pgbouncer exited: %s", out)
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", b.port), time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
}

// stop ends PgBouncer at once (SIGTERM: every client connection dropped) and waits for it.
func (b *bouncer) stop(t *testing.T) {
	t.Helper()
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	_ = b.cmd.Wait()
	b.cmd = nil
}

// restart stops PgBouncer and starts it again on the same port.
func (b *bouncer) restart(t *testing.T) {
	b.stop(t)
	b.start(t)
}

// url is database URL u through the bouncer.
func (b *bouncer) url(t *testing.T, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = fmt.Sprintf("127.0.0.1:%d", b.port)
	return pu.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
