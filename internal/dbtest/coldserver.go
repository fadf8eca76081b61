package dbtest

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sweeprail/sweeprail/internal/pgserver"
)

// ColdServer is a second PostgreSQL server of one test's own, on a loopback port that it keeps
// across Stop and Start: the cold storage that a postgres_fdw foreign table points at, which a
// test stops in the middle of a sweep (as a crash would) and starts again. Starting one costs
// about a second (initdb and start); it is stopped and deleted when the test ends.
type ColdServer struct {
	// URL names the server's maintenance database, "postgres", as superuser postgres (trust).
	URL string
	// Port is its loopback port, the same after a restart, for CREATE SERVER … OPTIONS (port …).
	Port   int
	dir    string
	bindir string
}

// StartColdServer initdb's and starts a private server. Like every database test, it is skipped
// without TEST_DATABASE_URL (failed under CI=true), though it does not use that server: its
// absence means this machine is not set up for database tests. As root, the server runs as user
// postgres, which PostgreSQL requires.
func StartColdServer(t testing.TB) *ColdServer {
	t.Helper()
	ServerURL(t)
	bindir, err := pgserver.Bindir()
	if err != nil {
		t.Fatalf("dbtest: cold server: %v", err)
	}
	dir, err := os.MkdirTemp("", "sweeprail-cold-")
	if err != nil {
		t.Fatalf("dbtest: cold server: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := pgserver.Own(dir); err != nil {
		t.Fatalf("dbtest: cold server: %v", err)
	}
	port, err := pgserver.FreePort()
	if err != nil {
		t.Fatalf("dbtest: cold server: %v", err)
	}
	s := &ColdServer{Port: port, dir: dir, bindir: bindir,
		URL: (&url.URL{Scheme: "postgres", User: url.User("postgres"), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Path: "/postgres", RawQuery: "sslmode=disable"}).String()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := pgserver.AsOwner(ctx, filepath.Join(bindir, "initdb"), "-D", s.data(), "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"); err != nil {
		t.Fatalf("dbtest: cold server: initdb: %v\n%s", err, out)
	}
	// Registered before the start, so that a server that started and then failed a check stops.
	t.Cleanup(func() {
		if s.running() {
			s.pgctl(context.Background(), "-m", "immediate", "stop") //nolint:errcheck // the folder goes next
		}
	})
	s.Start(t)
	return s
}

func (s *ColdServer) data() string { return filepath.Join(s.dir, "data") }

func (s *ColdServer) running() bool {
	_, err := os.Stat(filepath.Join(s.data(), "postmaster.pid"))
	return err == nil
}

func (s *ColdServer) pgctl(ctx context.Context, args ...string) ([]byte, error) {
	return pgserver.AsOwner(ctx, filepath.Join(s.bindir, "pg_ctl"), append([]string{"-D", s.data(), "-w", "-t", "60"}, args...)...)
}

// Start starts the server on its port, and returns once it accepts connections. Another process
// may have taken the port while it was stopped; the start then fails the test loudly.
func (s *ColdServer) Start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := strings.Join([]string{"-c listen_addresses=127.0.0.1", "-p " + strconv.Itoa(s.Port), "-c unix_socket_directories=''",
		"-c fsync=off", "-c full_page_writes=off", "-c shared_buffers=16MB", "-c max_connections=50",
		"-c log_min_messages=warning"}, " ")
	if out, err := s.pgctl(ctx, "-l", filepath.Join(s.dir, "log"), "start", "-o", opts); err != nil {
		logTail, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		t.Fatalf("dbtest: cold server: start: %v\n%s\n%s", err, out, logTail)
	}
}

// Stop stops the server at once, as a crash or a pulled cable would (pg_ctl -m immediate): its
// sessions end without a goodbye, and a transaction in flight there is lost.
func (s *ColdServer) Stop(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := s.pgctl(ctx, "-m", "immediate", "stop"); err != nil {
		t.Fatalf("dbtest: cold server: stop: %v\n%s", err, out)
	}
}

// Database creates an empty database on the server and returns its URL. It is not dropped: the
// whole server goes at the end of the test.
func (s *ColdServer) Database(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := connect(ctx, t, s.URL)
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("dbtest: cold server: create database %s: %v", name, err)
	}
	u, err := replaceDatabase(s.URL, name)
	if err != nil {
		t.Fatalf("dbtest: cold server: %v", err)
	}
	return u
}
