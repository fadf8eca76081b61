package statement

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden from the templates")

// goldenColumns are the swept table's columns an archiving pass's statements name, as a run
// would read them from the catalog.
var goldenColumns = []string{"id", "occurred_at", "bucket", "payload"}

// TestGolden renders the statements of testdata/policy.yaml, each pass for each kind its age
// column may be (KindsOf), and compares them with testdata/golden: a changed clause is a diff of SQL there.
func TestGolden(t *testing.T) {
	t.Parallel()
	pol, err := policy.LoadFile(filepath.Join("testdata", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Statements name the tables the check resolved: an unqualified name as found in public.
	names := Names{}
	for _, t := range SpecTables(pol.Specs) {
		if !strings.Contains(t, ".") {
			names[t] = "public." + t
		}
	}
	for i := range pol.Specs {
		for j, p := range pol.Specs[i].Passes {
			pol.Specs[i].Passes[j] = names.Pass(p)
		}
	}
	var want []string
	for _, s := range pol.Specs {
		for _, p := range s.Passes {
			for _, k := range KindsOf(p) {
				name := fmt.Sprintf("%s.%s.%s.sql", s.Name, p.Name, k)
				want = append(want, name)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					var got bytes.Buffer
					if err := Write(&got, Title(s.Name, p, k), List(p, Build(p, k), archive(p, k))); err != nil {
						t.Fatal(err)
					}
					path := filepath.Join("testdata", "golden", name)
					if *update {
						if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
							t.Fatal(err)
						}
					}
					golden, err := os.ReadFile(path)
					if err != nil {
						t.Fatalf("%v (go test ./internal/statement -update writes it)", err)
					}
					if line, ok := firstDifference(string(golden), got.String()); !ok {
						t.Errorf("%s differs from what the templates render, at line %d:\n golden: %s\n    got: %s\n(review the change, then go test ./internal/statement -update)",
							path, line+1, lineAt(string(golden), line), lineAt(got.String(), line))
					}
				})
			}
		}
	}
	// The dry run's cascade count is built from the live schema's keys; this graph is the
	// example of docs/POLICY.md: applications → access_tokens (CASCADE) → sessions (CASCADE),
	// and an audit trail whose key is SET NULL.
	want = append(want, "cascades.count.sql")
	t.Run("cascades.count.sql", func(t *testing.T) {
		t.Parallel()
		p := policy.Pass{Name: "unused", Table: "public.applications", AgeColumn: "last_used_at", Retention: 90 * 24 * time.Hour,
			Cascades: []string{"public.access_tokens", "public.sessions", "public.app_audit"}}
		g := &Graph{Root: 1, Edges: []Edge{
			{Key: "access_tokens_application_id_fkey", Parent: "applications", ParentOID: 1, Table: "access_tokens", TableOID: 2, Qualified: "public.access_tokens",
				Columns: []string{"application_id"}, Refs: []string{"id"}, Action: "CASCADE"},
			{Key: "app_audit_application_id_fkey", Parent: "applications", ParentOID: 1, Table: "app_audit", TableOID: 4, Qualified: "public.app_audit",
				Columns: []string{"application_id"}, Refs: []string{"id"}, Action: "SET NULL"},
			{Key: "sessions_token_id_fkey", Parent: "access_tokens", ParentOID: 2, Table: "sessions", TableOID: 3, Qualified: "public.sessions",
				Columns: []string{"token_id"}, Refs: []string{"id"}, Action: "CASCADE"},
		}}
		got := "-- dry run: the exact count, with what the cascades would delete and change\n--   " + Params{Cutoff}.String() + "\n" +
			CascadeCount(p, Instant, g, []uint32{2, 3, 4}) + ";\n\n-- run: each batch's cascades, before and after its statement\n" + CascadeStats + ";\n"
		path := filepath.Join("testdata", "golden", "cascades.count.sql")
		compareGolden(t, path, got)
	})
	// A healing batch of the archiving pass (statement/archive.go), in its first index form, and
	// the read of the archive's copies it compares.
	want = append(want, "audit-log.operational.heal.sql")
	t.Run("audit-log.operational.heal.sql", func(t *testing.T) {
		t.Parallel()
		var p policy.Pass
		for _, s := range pol.Specs {
			for _, ps := range s.Passes {
				if ps.ArchiveTo != "" {
					p = ps
				}
			}
		}
		h := BuildHeal(p, Instant, goldenColumns, "id", "bigint")
		var got bytes.Buffer
		for _, s := range []Statement{
			{"batch healing the archive's crash window, index path, first", h.Unlocked.Index.Params.String(), h.Unlocked.Index.SQL},
			{"the archive's copies of the rows it held", h.Held.Params.String(), h.Held.SQL},
		} {
			fmt.Fprintf(&got, "-- %s\n--   %s\n%s;\n\n", s.Name, s.Params, s.SQL)
		}
		path := filepath.Join("testdata", "golden", "audit-log.operational.heal.sql")
		compareGolden(t, path, strings.TrimSuffix(got.String(), "\n"))
	})
	// How a batch's transaction begins, on the heap path and on the index path (ordered).
	want = append(want, "batch.begin.sql")
	t.Run("batch.begin.sql", func(t *testing.T) {
		t.Parallel()
		b := BatchTransaction{StatementTimeout: 5 * time.Second, LockTimeout: 50 * time.Millisecond, IdleTimeout: 10 * time.Second}
		begin := func(b BatchTransaction) string { return strings.Join(b.Begin(), ";\n") }
		got := "-- a batch's transaction, heap path\n" + begin(b) + ";\n\n"
		b.SyncCommit, b.Ordered, b.LockTimeout = true, true, 2*time.Second
		got += "-- a batch's transaction, index path, with BATCH_SYNC_COMMIT (or archiving), after a held row lock\n" + begin(b) + ";\n"
		b.Ordered, b.WALCompression, b.FlushAfter = false, "lz4", 256<<10
		got += "\n-- a batch's transaction, heap path, with BATCH_SYNC_COMMIT, BATCH_WAL_COMPRESSION=lz4 and BATCH_FLUSH_AFTER=256KiB\n" +
			begin(b) + ";\n"
		b.WALCompression, b.FlushAfter, b.SearchPath = "", 0, `public, "it's", pg_temp`
		got += "\n-- a later batch of the pass, the search_path its first computed set as it is\n" + begin(b) + ";\n"
		b.SearchPath = `public, "back\slash", pg_temp`
		got += "\n-- the same where a schema's name holds a backslash\n" + begin(b) + ";\n"
		got += "\n-- a transaction that is no batch: the search_path, pg_temp last, and its statement and lock timeouts, or one of them\n" +
			Timeouts{Statement: 10 * time.Second, Lock: 1500 * time.Microsecond}.SQL() + ";\n" +
			Timeouts{Statement: 10 * time.Second}.SQL() + ";\n" + Timeouts{Lock: 2 * time.Second}.SQL() + ";\n"
		got += "\n-- the lag read's, with BATCH_WAL_COMPRESSION=lz4 and BATCH_FLUSH_AFTER=256KiB\n" +
			Timeouts{Statement: time.Second, Lock: 20 * time.Millisecond, WALCompression: "lz4", FlushAfter: 256 << 10}.SQL() + ";\n"
		compareGolden(t, filepath.Join("testdata", "golden", "batch.begin.sql"), got)
	})
	// The catalog read a run compares with the fingerprint its pass was proven under.
	want = append(want, "fingerprint.sql")
	t.Run("fingerprint.sql", func(t *testing.T) {
		t.Parallel()
		got := "-- a pass's fingerprint: the md5 of the catalog facts its proof rests on, and the facts\n--   " +
			FingerprintForm.Params.String() + "\n" + FingerprintForm.SQL + ";\n"
		compareGolden(t, filepath.Join("testdata", "golden", "fingerprint.sql"), got)
	})
	t.Run("no stale golden files", func(t *testing.T) {
		t.Parallel()
		entries, err := os.ReadDir(filepath.Join("testdata", "golden"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !slices.Contains(want, e.Name()) {
				t.Errorf("testdata/golden/%s renders from no pass of testdata/policy.yaml: remove it", e.Name())
			}
		}
	})
}

// archive is the archive statements of p, for a pass with archive_to; nil otherwise.
func archive(p policy.Pass, k Kind) *Archive {
	if p.ArchiveTo == "" {
		return nil
	}
	a := BuildArchive(p, k, goldenColumns, "id", "bigint")
	return &a
}

// firstDifference returns the first line at which a and b differ, and false; true when equal.
func firstDifference(a, b string) (int, bool) {
	if a == b {
		return 0, true
	}
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		if i >= len(al) || i >= len(bl) || al[i] != bl[i] {
			return i, false
		}
	}
	return 0, false
}

func lineAt(s string, i int) string {
	lines := strings.Split(s, "\n")
	if i < len(lines) {
		return lines[i]
	}
	return "(end of file)"
}

// compareGolden fails t where got differs from the golden file at path, which -update rewrites.
func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/statement -update writes it)", err)
	}
	if line, ok := firstDifference(string(golden), got); !ok {
		t.Errorf("%s differs at line %d:\n golden: %s\n    got: %s", path, line+1, lineAt(string(golden), line), lineAt(got, line))
	}
}
