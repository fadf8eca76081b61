package explain_test

import (
	"slices"
	"testing"

	"github.com/sweeprail/sweeprail/internal/explain"
	"github.com/sweeprail/sweeprail/internal/policy"
)

// The plans below are PostgreSQL 15's EXPLAIN (FORMAT JSON), trimmed to the keys the readers
// look at (and a few around them), of a table n (id, state, read_at, "Read At") indexed on each,
// a guard table g indexed on n_id, and p, range-partitioned on at into p_1 and p_2.
const (
	// SELECT t.ctid FROM n AS t WHERE t.read_at < now() ORDER BY t.read_at LIMIT 1000
	indexScanPlan = `[{"Plan": {"Node Type": "Limit", "Plan Rows": 323, "Plans": [
  {"Node Type": "Index Scan", "Index Name": "n_read_at", "Relation Name": "n", "Alias": "t", "Plan Rows": 323,
   "Index Cond": "(read_at < now())"}]}}]`
	// … WHERE t.state = 'x' ORDER BY t.read_at: the age index read whole, in order, filtered.
	filteredPlan = `[{"Plan": {"Node Type": "Limit", "Plan Rows": 5, "Plans": [
  {"Node Type": "Index Scan", "Index Name": "n_read_at", "Relation Name": "n", "Alias": "t", "Plan Rows": 5,
   "Filter": "(state = 'x'::text)"}]}}]`
	// … WHERE t.state = 'x', by the index on state.
	stateIndexPlan = `[{"Plan": {"Node Type": "Index Scan", "Index Name": "n_state", "Relation Name": "n", "Alias": "t", "Plan Rows": 5,
   "Index Cond": "(state = 'x'::text)"}}]`
	// … WHERE t.read_at < now() OR t.state = 'x'
	bitmapOrPlan = `[{"Plan": {"Node Type": "Bitmap Heap Scan", "Relation Name": "n", "Alias": "t", "Plan Rows": 327,
  "Recheck Cond": "((read_at < now()) OR (state = 'x'::text))", "Plans": [
  {"Node Type": "BitmapOr", "Plan Rows": 328, "Plans": [
    {"Node Type": "Bitmap Index Scan", "Index Name": "n_read_at", "Plan Rows": 323, "Index Cond": "(read_at < now())"},
    {"Node Type": "Bitmap Index Scan", "Index Name": "n_state", "Plan Rows": 5, "Index Cond": "(state = 'x'::text)"}]}]}}]`
	// … WHERE t.read_at < now() AND t.read_at > now() - '1 day'
	bitmapAndPlan = `[{"Plan": {"Node Type": "Bitmap Heap Scan", "Relation Name": "n", "Alias": "t", "Plan Rows": 2, "Plans": [
  {"Node Type": "BitmapAnd", "Plans": [
    {"Node Type": "Bitmap Index Scan", "Index Name": "n_read_at", "Index Cond": "(read_at < now())"},
    {"Node Type": "Bitmap Index Scan", "Index Name": "n_read_at_2", "Index Cond": "(read_at > (now() - '1 day'::interval))"}]}]}}]`
	// A bitmap heap scan with nothing under it: no plan PostgreSQL makes, and no index read.
	bitmapEmptyPlan = `[{"Plan": {"Node Type": "Bitmap Heap Scan", "Relation Name": "n", "Alias": "t"}}]`
	// SELECT t.ctid FROM p AS t WHERE t.at < now() ORDER BY t.at LIMIT 1000
	partitionsPlan = `[{"Plan": {"Node Type": "Limit", "Plan Rows": 1000, "Plans": [
  {"Node Type": "Append", "Plan Rows": 1234, "Subplans Removed": 0, "Plans": [
    {"Node Type": "Index Scan", "Index Name": "p_1_at_idx", "Relation Name": "p_1", "Alias": "t_1", "Index Cond": "(at < now())"},
    {"Node Type": "Index Scan", "Index Name": "p_2_at_idx", "Relation Name": "p_2", "Alias": "t_2", "Index Cond": "(at < now())"}]}]}}]`
	// The same with p_2 read whole.
	partitionSeqPlan = `[{"Plan": {"Node Type": "Append", "Plans": [
    {"Node Type": "Index Scan", "Index Name": "p_1_at_idx", "Relation Name": "p_1", "Alias": "t_1", "Index Cond": "(at < now())"},
    {"Node Type": "Seq Scan", "Relation Name": "p_2", "Alias": "t_2", "Filter": "(at < now())"}]}}]`
	// SELECT t.ctid FROM n AS t WHERE t."Read At" < now() ORDER BY t."Read At" LIMIT 1000
	quotedPlan = `[{"Plan": {"Node Type": "Limit", "Plans": [
  {"Node Type": "Index Scan", "Index Name": "n_quoted", "Relation Name": "n", "Alias": "t", "Index Cond": "(\"Read At\" < now())"}]}}]`
	// SELECT t.ctid FROM n AS t WHERE t.read_at < now(), enable_seqscan on.
	seqScanPlan = `[{"Plan": {"Node Type": "Seq Scan", "Relation Name": "n", "Alias": "t", "Plan Rows": 323, "Filter": "(read_at < now())"}}]`
	// SELECT 1 FROM n AS t WHERE NOT EXISTS (SELECT 1 FROM g AS g WHERE g.n_id = t.id), with
	// hash and merge joins and materialization priced out.
	lookupPlan = `[{"Plan": {"Node Type": "Nested Loop", "Join Type": "Anti", "Plan Rows": 485, "Plans": [
  {"Node Type": "Index Only Scan", "Index Name": "n_pkey", "Relation Name": "n", "Alias": "t", "Plan Rows": 970},
  {"Node Type": "Index Only Scan", "Index Name": "g_n_id", "Relation Name": "g", "Alias": "g", "Plan Rows": 6, "Index Cond": "(n_id = t.id)"}]}}]`
	// The same, g read through a bitmap, and partitioned into g_1 (by a bitmap) and g_2 (whole).
	lookupBitmapPlan = `[{"Plan": {"Node Type": "Nested Loop", "Join Type": "Anti", "Plans": [
  {"Node Type": "Seq Scan", "Relation Name": "n", "Alias": "t"},
  {"Node Type": "Bitmap Heap Scan", "Relation Name": "g", "Alias": "g", "Recheck Cond": "(n_id = t.id)", "Plans": [
    {"Node Type": "Bitmap Index Scan", "Index Name": "g_n_id", "Index Cond": "(n_id = t.id)"}]}]}}]`
	lookupPartitionsPlan = `[{"Plan": {"Node Type": "Nested Loop", "Join Type": "Anti", "Plans": [
  {"Node Type": "Seq Scan", "Relation Name": "n", "Alias": "t"},
  {"Node Type": "Append", "Plans": [
    {"Node Type": "Bitmap Heap Scan", "Relation Name": "g_1", "Alias": "g_1", "Plans": [
      {"Node Type": "BitmapOr", "Plans": [
        {"Node Type": "Bitmap Index Scan", "Index Name": "g_1_n_id", "Index Cond": "(n_id = t.id)"},
        {"Node Type": "Bitmap Index Scan", "Index Name": "g_1_k", "Index Cond": "(k = 'x'::text)"}]}]},
    {"Node Type": "Seq Scan", "Relation Name": "g_2", "Alias": "g_2", "Filter": "(n_id = t.id)"}]}]}}]`
	// SELECT 1 FROM n WHERE read_at IS NOT NULL, in parallel.
	gatherPlan = `[{"Plan": {"Node Type": "Gather", "Plan Rows": 250000.4, "Workers Planned": 2, "Plans": [
  {"Node Type": "Seq Scan", "Relation Name": "n", "Alias": "n", "Plan Rows": 104167}]}}]`
)

func TestAgeIndexServes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, plan, alias, column string
		want                      bool
	}{
		{"an index condition on the age", indexScanPlan, "t", "read_at", true},
		{"any index condition, for no column", indexScanPlan, "t", "", true},
		{"the age index read whole, filtered", filteredPlan, "t", "read_at", false},
		{"an index condition on another column", stateIndexPlan, "t", "read_at", false},
		{"an index condition on another column, for no column", stateIndexPlan, "t", "", true},
		{"a column whose name starts another's", indexScanPlan, "t", "read", false},
		{"a bitmap one of whose leaves bounds another column", bitmapOrPlan, "t", "read_at", false},
		{"a bitmap whose every leaf has a condition, for no column", bitmapOrPlan, "t", "", true},
		{"a bitmap whose every leaf bounds the age", bitmapAndPlan, "t", "read_at", true},
		{"a bitmap with no index under it", bitmapEmptyPlan, "t", "", false},
		{"every partition read by the age", partitionsPlan, "t", "at", true},
		{"a partition read whole", partitionSeqPlan, "t", "at", false},
		{"a quoted column", quotedPlan, "t", "Read At", true},
		{"a quoted column spelt otherwise", quotedPlan, "t", "read at", false},
		{"a sequential scan", seqScanPlan, "t", "read_at", false},
		{"no scan of the alias", indexScanPlan, "x", "read_at", false},
		{"another alias in a join", lookupPlan, "g", "n_id", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := explain.AgeIndexServes([]byte(tt.plan), tt.alias, tt.column)
			if err != nil || got != tt.want {
				t.Errorf("AgeIndexServes(%q, %q) = %v, %v; want %v", tt.alias, tt.column, got, err, tt.want)
			}
		})
	}
}

func TestIndexServes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, plan string
		mode       policy.Mode
		want       bool
	}{
		{"batched, by the age", indexScanPlan, policy.ModeBatched, true},
		{"batched, by another column", stateIndexPlan, policy.ModeBatched, false},
		// A single statement deletes every eligible row, in no order: any index condition serves.
		{"single, by another column", stateIndexPlan, policy.ModeSingle, true},
		{"single, read whole", seqScanPlan, policy.ModeSingle, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := policy.Pass{Name: "p", Table: "n", AgeColumn: "read_at", Mode: tt.mode}
			if got, err := explain.IndexServes([]byte(tt.plan), p); err != nil || got != tt.want {
				t.Errorf("IndexServes = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestLookupIndexes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, plan, alias, column string
		want                      [][]string
	}{
		{"an index scan per row", lookupPlan, "g", "n_id", [][]string{{"g_n_id"}}},
		{"a bitmap per row", lookupBitmapPlan, "g", "n_id", [][]string{{"g_n_id"}}},
		{"an index on another column", lookupPlan, "g", "k", [][]string{nil}},
		// One list per partition: g_1's lookup index (not its index on k), none for g_2.
		{"partitions", lookupPartitionsPlan, "g", "n_id", [][]string{{"g_1_n_id"}, nil}},
		{"no scan of the alias", lookupPlan, "h", "n_id", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := explain.LookupIndexes([]byte(tt.plan), tt.alias, tt.column)
			if err != nil || !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("LookupIndexes(%q, %q) = %q, %v; want %q", tt.alias, tt.column, got, err, tt.want)
			}
		})
	}
}

func TestTopRows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, plan string
		want       int64
	}{
		{"a gather over a parallel scan", gatherPlan, 250000},
		{"a limit", indexScanPlan, 323},
		{"a scan", seqScanPlan, 323},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, err := explain.TopRows([]byte(tt.plan)); err != nil || got != tt.want {
				t.Errorf("TopRows = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// TestUnreadablePlans checks that every reader refuses what is no plan, rather than calling it
// unserved.
func TestUnreadablePlans(t *testing.T) {
	t.Parallel()
	readers := map[string]func([]byte) error{
		"AgeIndexServes": func(raw []byte) error { _, err := explain.AgeIndexServes(raw, "t", "read_at"); return err },
		"IndexServes": func(raw []byte) error {
			_, err := explain.IndexServes(raw, policy.Pass{AgeColumn: "read_at"})
			return err
		},
		"LookupIndexes": func(raw []byte) error { _, err := explain.LookupIndexes(raw, "g", "n_id"); return err },
		"TopRows":       func(raw []byte) error { _, err := explain.TopRows(raw); return err },
	}
	for name, read := range readers {
		for _, raw := range []string{`[]`, `{"Plan": {}}`, `not json`} {
			t.Run(name+"/"+raw, func(t *testing.T) {
				t.Parallel()
				if err := read([]byte(raw)); err == nil {
					t.Errorf("%s(%s): no error", name, raw)
				}
			})
		}
	}
}
