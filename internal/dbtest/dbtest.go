// Package dbtest gives each test its own PostgreSQL database, cloned from a template that is
// migrated once. Cloning a template is a file copy inside the server, far cheaper than running
// the migrations per test, and it isolates tests that write the same tables.
//
// Three kinds of database: URL and Pool hold both migration sets (sweeprail's own schema and the
// demo reference schema the bundled catalog sweeps); SweeprailURL holds sweeprail's own set only,
// as `api migrate up` leaves a database of the operator's; EmptyURL holds nothing.
//
// The server comes from TEST_DATABASE_URL (make test starts a throwaway cluster and sets it).
// Without it a test is skipped, except under CI=true, where it fails: CI must never go green by
// skipping every database test.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/migrations"
)

// templateLockKey serialises template creation across test binaries running in parallel.
const templateLockKey = 7_302_114_550

// template is one template database, built at most once per test binary.
type template struct {
	// kind names it ("full", "own") and sets is what it is migrated with.
	kind string
	sets []*migrations.Set
	once sync.Once
	name string
	err  error
}

var (
	full = &template{kind: "full", sets: migrations.Sets()}
	own  = &template{kind: "own", sets: []*migrations.Set{migrations.Sweeprail}}
)

// ServerURL returns TEST_DATABASE_URL, skipping the test when it is unset (failing it under CI=true).
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TEST_DATABASE_URL is unset and CI=true: database tests must run in CI (make test starts PostgreSQL)")
		}
		t.Skip("TEST_DATABASE_URL is unset; run make test, which starts a throwaway PostgreSQL")
	}
	return u
}

// URL creates a fresh database holding both migration sets for this test, drops it when the test
// ends, and returns its URL: for tests that hand the database to a separate process.
func URL(t testing.TB) string {
	t.Helper()
	return clone(t, full)
}

// SweeprailURL creates a fresh database holding sweeprail's own migration set only (schema
// sweeprail), dropped when the test ends: a database of the operator's after `api migrate up`,
// for adoption tests that load a foreign schema into it.
func SweeprailURL(t testing.TB) string {
	t.Helper()
	return clone(t, own)
}

func clone(t testing.TB, tpl *template) string {
	t.Helper()
	server := ServerURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tpl.once.Do(func() { tpl.name, tpl.err = ensureTemplate(ctx, server, tpl) })
	if tpl.err != nil {
		t.Fatalf("dbtest: %s template: %v", tpl.kind, tpl.err)
	}
	return create(ctx, t, server, "TEMPLATE "+pgx.Identifier{tpl.name}.Sanitize())
}

// EmptyURL creates a fresh database with no migrations applied, dropped when the test ends.
func EmptyURL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return create(ctx, t, ServerURL(t), "")
}

func create(ctx context.Context, t testing.TB, server, options string) string {
	t.Helper()
	name := "test_" + randomHex(8)
	admin := connect(ctx, t, server)
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s %s", pgx.Identifier{name}.Sanitize(), options)); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Errorf("dbtest: drop %s: connect: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{name}.Sanitize())); err != nil {
			t.Errorf("dbtest: drop %s: %v", name, err)
		}
	})
	return withDatabase(t, server, name)
}

// PoolerURL returns u, a database URL of the test server, with its host and port swapped for
// those of the PgBouncer in pool mode mode ("transaction" or "session") that make test starts in
// front of the server (scripts/pg pooler): TEST_PGBOUNCER_TRANSACTION_URL or
// TEST_PGBOUNCER_SESSION_URL. The database name and parameters stay. Without it the test is
// skipped, and fails under CI=true.
func PoolerURL(t testing.TB, mode, u string) string {
	t.Helper()
	env := map[string]string{"transaction": "TEST_PGBOUNCER_TRANSACTION_URL", "session": "TEST_PGBOUNCER_SESSION_URL"}[mode]
	if env == "" {
		t.Fatalf("dbtest: no pooler in pool mode %q (transaction, session)", mode)
	}
	pooler := os.Getenv(env)
	if pooler == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is unset and CI=true: the pooler tests must run in CI (make test starts PgBouncer)", env)
		}
		t.Skipf("%s is unset; run make test, which starts PgBouncer (scripts/pg pooler start %s)", env, mode)
	}
	pu, err := url.Parse(pooler)
	if err != nil {
		t.Fatalf("dbtest: %s: %v", env, err)
	}
	du, err := url.Parse(u)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	du.Host = pu.Host
	return du.String()
}

// Pool returns a pool on a fresh database of this test's own holding both migration sets, closed
// at cleanup.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := URL(t)
	pool, err := dbpool.NewPool(context.Background(), u)
	if err != nil {
		t.Fatalf("dbtest: pool: %v", err)
	}
	// Registered after URL's cleanup, so it runs first: the pool closes before the drop.
	t.Cleanup(pool.Close)
	return pool
}

// Conn opens one extra connection to the database at u, closed at cleanup: the second session
// of a race test.
func Conn(t testing.TB, u string) *pgx.Conn {
	t.Helper()
	c := connect(context.Background(), t, u)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func connect(ctx context.Context, t testing.TB, u string) *pgx.Conn {
	t.Helper()
	c, err := dbpool.Connect(ctx, u)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	return c
}

// ensureTemplate creates, once per kind and migrations, a migrated database to clone. Its name
// carries a hash of the migrations, so a changed migration gets a new template instead of a stale
// one.
func ensureTemplate(ctx context.Context, server string, tpl *template) (string, error) {
	sum, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "sweeprail_tpl_" + tpl.kind + "_" + sum[:12]
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return "", fmt.Errorf("lock: %w", err)
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockKey)

	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up template: %w", err)
	}
	if exists {
		return name, nil
	}
	// Build under another name and rename at the end, so a half-built template (a crash in the
	// middle) is never cloned.
	building := name + "_building"
	if _, err := admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{building}.Sanitize())); err != nil {
		return "", fmt.Errorf("drop half-built template: %w", err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s", pgx.Identifier{building}.Sanitize())); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	u, err := replaceDatabase(server, building)
	if err != nil {
		return "", err
	}
	for _, set := range tpl.sets {
		if err := set.Up(ctx, u, io.Discard); err != nil {
			return "", fmt.Errorf("migrate template: %w", err)
		}
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s",
		pgx.Identifier{building}.Sanitize(), pgx.Identifier{name}.Sanitize())); err != nil {
		return "", fmt.Errorf("rename template: %w", err)
	}
	return name, nil
}

func migrationsHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func withDatabase(t testing.TB, server, name string) string {
	t.Helper()
	u, err := replaceDatabase(server, name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return u
}

func replaceDatabase(server, name string) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", fmt.Errorf("parse TEST_DATABASE_URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
