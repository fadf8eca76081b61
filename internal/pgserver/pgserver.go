// Package pgserver runs PostgreSQL's server programs as scripts/pg does, for the Go code that
// starts private clusters of its own: the test helpers' standbys and cold archives, and make
// bench's standby. It imports no testing package, so the bench binary can use it.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
)

// AsOwner runs a server program, as user postgres when we are root (PostgreSQL refuses root),
// from "/", a folder that user can enter, as scripts/pg's as_owner does.
func AsOwner(ctx context.Context, prog string, args ...string) ([]byte, error) {
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres", "--", prog}, args...)
		prog = "runuser"
	}
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = "/"
	return cmd.CombinedOutput()
}

// Bindir is PG_BINDIR when set (make test-matrix sets it to `scripts/pg bindir` of the version
// under test), else the newest installed server's bin folder, else pg_ctl's on PATH: scripts/pg's
// choice, so that every server a test or the bench starts is the same version as the main one.
func Bindir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d, nil
	}
	if matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(matches) > 0 {
		slices.SortFunc(matches, func(a, b string) int { return major(a) - major(b) })
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if p, err = filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(p), nil
		}
	}
	return "", errors.New("pg_ctl not found (scripts/pg start installs PostgreSQL)")
}

// major reads the major version out of /usr/lib/postgresql/<major>/bin/pg_ctl; 0 if none.
func major(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// FreePort asks the kernel for a free loopback port. Another process may take it before the
// server binds it; the start then fails loudly rather than silently sharing a port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Own opens dir to be entered and, when we are root, gives it to the server's user: a data
// folder must be its owner's.
func Own(dir string) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("user postgres (apt-get install postgresql creates it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

// OwnedTempDir makes a temporary folder that the server's user owns and can reach (as root:
// postgres, under /tmp, which it can enter). The caller removes it.
func OwnedTempDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	return dir, Own(dir)
}
