package sweep_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sweeprail/sweeprail/internal/config"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// TestNewRunnerRefusesWALCompression: the value is written into each batch's SQL, so a runner
// refuses one that is not a wal_compression keyword, whatever its caller checked before.
func TestNewRunnerRefusesWALCompression(t *testing.T) {
	t.Parallel()
	st := settings()
	st.WALCompression = "lz4; DROP TABLE notifications"
	_, err := sweep.NewRunner(sweep.Config{Pool: dbtest.Pool(t), Specs: []policy.Spec{spec(t, "notifications")}, Settings: st})
	if err == nil || !strings.Contains(err.Error(), `wal_compression "lz4; DROP TABLE notifications"`) {
		t.Fatalf("NewRunner = %v, want a refusal naming the wal_compression", err)
	}
}

// TestCheckBatchSettings: the boot's probe begins a batch's transaction as a run would, and names
// what the server refuses in it by SQLSTATE: a wal_compression the role may not set (42501),
// and one the server does not take (22023); a role granted the parameter passes.
func TestCheckBatchSettings(t *testing.T) {
	t.Parallel()
	specs := []policy.Spec{spec(t, "notifications")}
	probe := func(t *testing.T, r *sweep.Runner) error {
		t.Helper()
		return r.CheckBatchSettings(ctx)
	}

	t.Run("a superuser sets any method the server takes", func(t *testing.T) {
		t.Parallel()
		st := settings()
		st.WALCompression = "on"
		if err := probe(t, newRunner(t, sweep.Config{Pool: dbtest.Pool(t), Specs: specs, Settings: st})); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a method the server does not take is 22023", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.Pool(t)
		// PostgreSQL 14's wal_compression is a boolean (no enumvals); from 15 it lists the
		// methods the server was built with.
		var takes []string
		if err := pool.QueryRow(ctx, `SELECT coalesce(enumvals, '{on,off}') FROM pg_settings WHERE name = 'wal_compression'`).Scan(&takes); err != nil {
			t.Fatal(err)
		}
		missing := ""
		for _, m := range config.WALCompressions {
			if !slices.Contains(takes, m) {
				missing = m
				break
			}
		}
		if missing == "" {
			t.Skipf("this server takes every method (%v): no wal_compression it refuses", takes)
		}
		st := settings()
		st.WALCompression = missing
		err := probe(t, newRunner(t, sweep.Config{Pool: pool, Specs: specs, Settings: st}))
		if !errors.Is(err, sweep.ErrWALCompressionUnknown) {
			t.Fatalf("wal_compression %s on a server taking %v: %v, want ErrWALCompressionUnknown", missing, takes, err)
		}
	})

	t.Run("a role without the grant is 42501, with it passes", func(t *testing.T) {
		t.Parallel()
		admin, pool, role := leastPrivilege(t, specs, `SELECT 1`)
		st := settings()
		st.WALCompression = "on"
		r := newRunner(t, sweep.Config{Pool: pool, Specs: specs, Settings: st})
		if err := probe(t, r); !errors.Is(err, sweep.ErrWALCompressionDenied) {
			t.Fatalf("without the grant: %v, want ErrWALCompressionDenied", err)
		}
		if count(t, admin, "SELECT current_setting('server_version_num')::int") < 150000 {
			t.Skip("GRANT SET ON PARAMETER is PostgreSQL 15's: before it only a superuser sets wal_compression")
		}
		exec(t, admin, `GRANT SET ON PARAMETER wal_compression TO `+role)
		t.Cleanup(func() { exec(t, admin, `REVOKE SET ON PARAMETER wal_compression FROM `+role) })
		if err := probe(t, r); err != nil {
			t.Fatalf("with GRANT SET ON PARAMETER wal_compression: %v", err)
		}
	})
}
