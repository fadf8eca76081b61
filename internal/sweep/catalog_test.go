package sweep_test

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/check"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/demo"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestCatalog runs every bundled sweep over rows labelled "del:" (must go) and "keep:" (must stay):
// past the cutoff, exactly at it, fresh, excluded by status, protected by a keep guard. $1 is the
// run's reference time (the database clock, pinned), $2 a live account.
func TestCatalog(t *testing.T) {
	t.Parallel()
	cases := []catalogCase{
		{"email-messages", `SELECT subject FROM email_messages`, `
INSERT INTO email_messages (account_id, to_address, subject, status, created_at, sent_at) VALUES
 ($2, 'a@x', 'del:sent-old',        'sent',   $1::timestamptz - interval '8 days', $1::timestamptz - interval '7 days' - interval '1 second'),
 ($2, 'a@x', 'keep:sent-boundary',  'sent',   $1::timestamptz - interval '8 days', $1::timestamptz - interval '7 days'),
 ($2, 'a@x', 'keep:sent-fresh',     'sent',   $1::timestamptz - interval '8 days', $1::timestamptz - interval '7 days' + interval '1 second'),
 ($2, 'a@x', 'keep:queued-old',     'queued', $1::timestamptz - interval '400 days', NULL),
 ($2, 'a@x', 'del:failed-old',      'failed', $1::timestamptz - interval '90 days' - interval '1 second', NULL),
 ($2, 'a@x', 'keep:failed-boundary','failed', $1::timestamptz - interval '90 days', NULL),
 ($2, 'a@x', 'keep:failed-30d',     'failed', $1::timestamptz - interval '30 days', NULL)`},
		{"webhook-deliveries", `SELECT endpoint_url FROM webhook_deliveries`, `
WITH e AS (INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type) VALUES ('order', 'o1', 'order.paid') RETURNING id)
INSERT INTO webhook_deliveries (outbox_event_id, endpoint_url, status, created_at)
SELECT e.id, v.label, v.status, v.at FROM e, (VALUES
 ('del:success-old',        'success',     $1::timestamptz - interval '30 days' - interval '1 second'),
 ('del:dead-letter-old',    'dead_letter', $1::timestamptz - interval '31 days'),
 ('keep:success-boundary',  'success',     $1::timestamptz - interval '30 days'),
 ('keep:success-fresh',     'success',     $1::timestamptz - interval '1 day'),
 ('keep:pending-old',       'pending',     $1::timestamptz - interval '60 days'),
 ('keep:failed-old',        'failed',      $1::timestamptz - interval '60 days')) AS v(label, status, at)`},
		{"audit-log", `SELECT action FROM audit_log`, `
INSERT INTO audit_log (action, retention_bucket, occurred_at) VALUES
 ('del:operational-old',       'operational', $1::timestamptz - interval '90 days' - interval '1 second'),
 ('keep:operational-boundary', 'operational', $1::timestamptz - interval '90 days'),
 ('keep:compliance-100d',      'compliance',  $1::timestamptz - interval '100 days'),
 ('keep:compliance-boundary',  'compliance',  $1::timestamptz - interval '365 days'),
 ('del:compliance-old',        'compliance',  $1::timestamptz - interval '365 days' - interval '1 second')`},
		{"outbox", `SELECT aggregate_id FROM outbox_events`, `
WITH ev AS (
  INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, created_at, dispatched_at) VALUES
   ('order', 'del:dispatched-old',      'order.paid', $1::timestamptz - interval '9 days', $1::timestamptz - interval '7 days' - interval '1 second'),
   ('order', 'keep:referenced-old',     'order.paid', $1::timestamptz - interval '9 days', $1::timestamptz - interval '8 days'),
   ('order', 'keep:undispatched-old',   'order.paid', $1::timestamptz - interval '90 days', NULL),
   ('order', 'keep:dispatched-boundary','order.paid', $1::timestamptz - interval '9 days', $1::timestamptz - interval '7 days'),
   ('order', 'keep:dispatched-fresh',   'order.paid', $1::timestamptz - interval '1 day', $1::timestamptz - interval '1 day')
  RETURNING id, aggregate_id)
INSERT INTO webhook_deliveries (outbox_event_id, endpoint_url, status)
SELECT id, 'https://hook', 'pending' FROM ev WHERE aggregate_id = 'keep:referenced-old'`},
		{"consents", `SELECT purpose FROM consent_records`, `
INSERT INTO consent_records (user_id, purpose, granted, expires_at) VALUES
 (NULL, 'del:orphaned-expired',    true, $1::timestamptz - interval '365 days' - interval '1 second'),
 ($2,   'keep:owned-expired',      true, $1::timestamptz - interval '800 days'),
 (NULL, 'keep:orphaned-boundary',  true, $1::timestamptz - interval '365 days'),
 (NULL, 'keep:orphaned-fresh',     true, $1::timestamptz - interval '10 days')`},
		{"notifications", `SELECT body FROM notifications`, `
INSERT INTO notifications (account_id, kind, body, created_at, read_at) VALUES
 ($2, 'mention', 'del:read-old',       $1::timestamptz - interval '40 days', $1::timestamptz - interval '30 days' - interval '1 second'),
 ($2, 'mention', 'keep:unread-old',    $1::timestamptz - interval '400 days', NULL),
 ($2, 'mention', 'keep:read-boundary', $1::timestamptz - interval '40 days', $1::timestamptz - interval '30 days'),
 ($2, 'mention', 'keep:read-fresh',    $1::timestamptz - interval '40 days', $1::timestamptz - interval '29 days')`},
		{"refresh-tokens", `SELECT convert_from(token_hash, 'UTF8') FROM refresh_tokens`, `
INSERT INTO refresh_tokens (account_id, token_hash, created_at, expires_at) VALUES
 ($2, convert_to('del:expired-old', 'UTF8'),   $1::timestamptz - interval '30 days', $1::timestamptz - interval '1 day' - interval '1 second'),
 ($2, convert_to('keep:boundary', 'UTF8'),     $1::timestamptz - interval '30 days', $1::timestamptz - interval '1 day'),
 ($2, convert_to('keep:expired-1h', 'UTF8'),   $1::timestamptz - interval '30 days', $1::timestamptz - interval '1 hour'),
 ($2, convert_to('keep:live', 'UTF8'),         $1::timestamptz - interval '30 days', $1::timestamptz + interval '7 days')`},
		{"idempotency-records", `SELECT idempotency_key FROM idempotency_records`, `
INSERT INTO idempotency_records (account_id, idempotency_key, request_hash, status, created_at, lease_expires_at, completed_at) VALUES
 ($2, 'del:completed-old',            '\x00', 'completed',   $1::timestamptz - interval '50 days', $1::timestamptz - interval '50 days', $1::timestamptz - interval '48 hours' - interval '1 second'),
 ($2, 'keep:completed-boundary',      '\x00', 'completed',   $1::timestamptz - interval '50 days', $1::timestamptz - interval '50 days', $1::timestamptz - interval '48 hours'),
 ($2, 'keep:created-old-completed-now','\x00','completed',   $1::timestamptz - interval '50 days', $1::timestamptz - interval '50 days', $1::timestamptz - interval '1 minute'),
 ($2, 'del:abandoned-old',            '\x00', 'in_progress', $1::timestamptz - interval '48 hours' - interval '1 second', now() - interval '1 hour', NULL),
 ($2, 'keep:claim-live',              '\x00', 'in_progress', $1::timestamptz - interval '50 days', now() + interval '1 hour', NULL),
 ($2, 'keep:abandoned-boundary',      '\x00', 'in_progress', $1::timestamptz - interval '48 hours', now() - interval '1 hour', NULL),
 ($2, 'keep:abandoned-fresh',         '\x00', 'in_progress', $1::timestamptz - interval '1 hour', now() - interval '1 minute', NULL)`},
	}
	covered := map[string]bool{"account-erasure": true} // TestAccountErasure
	for _, tc := range cases {
		covered[tc.sweep] = true
	}
	// Every case on every path: a batched pass forced onto each (heap ranges of one block).
	for _, tp := range testPaths {
		for _, tc := range cases {
			t.Run(tp.name+"/"+tc.sweep, func(t *testing.T) {
				t.Parallel()
				testCatalogCase(t, tp, tc)
			})
		}
	}
	for _, s := range policy.Catalog() {
		if !covered[s.Name] {
			t.Errorf("sweep %q has no case here", s.Name)
		}
	}
}

// catalogCase is a bundled sweep, a query returning each remaining row's label, and the rows.
type catalogCase struct{ sweep, label, insert string }

// testCatalogCase is one case of TestCatalog on one path.
func testCatalogCase(t *testing.T, tp testPath, tc catalogCase) {
	pool := dbtest.Pool(t)
	at := dbNow(t, pool)
	var account string
	if err := pool.QueryRow(ctx, `INSERT INTO accounts (email) VALUES ('live@example.com') RETURNING id::text`).Scan(&account); err != nil {
		t.Fatal(err)
	}
	args := []any{at}
	if strings.Contains(tc.insert, "$2") {
		args = append(args, account)
	}
	exec(t, pool, tc.insert, args...)
	labels := func() (del, keep []string) {
		rows, err := pool.Query(ctx, tc.label)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(l, "del:") {
				del = append(del, l)
			} else {
				keep = append(keep, l)
			}
		}
		slices.Sort(keep)
		return del, keep
	}
	delBefore, keepBefore := labels()
	if len(delBefore) == 0 || len(keepBefore) == 0 {
		t.Fatalf("fixture has %d del and %d keep rows", len(delBefore), len(keepBefore))
	}

	r := newRunner(t, tp.config(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings(), AsOf: fixedAsOf(at)}, 1))
	res := run(t, r, tc.sweep)
	delAfter, keepAfter := labels()
	if len(delAfter) > 0 {
		t.Errorf("eligible rows survived: %v", delAfter)
	}
	if !slices.Equal(keepAfter, keepBefore) {
		t.Errorf("kept rows = %v, want %v", keepAfter, keepBefore)
	}
	if res.Deleted != int64(len(delBefore)) || res.StopReason != wire.StopExhausted || res.Truncated || res.Error != nil {
		t.Errorf("result = deleted %d, stop %s, truncated %v, error %+v; want deleted %d, exhausted",
			res.Deleted, res.StopReason, res.Truncated, res.Error, len(delBefore))
	}
	if len(res.Passes) != len(spec(t, tc.sweep).Passes) {
		t.Errorf("%d pass results, want one per pass", len(res.Passes))
	}
	for i, p := range spec(t, tc.sweep).Passes {
		want := string(tp.path)
		if p.Mode != policy.ModeBatched {
			want = string(p.Mode)
		}
		if i < len(res.Passes) && res.Passes[i].Path != want {
			t.Errorf("pass %s ran on path %q, want %q", p.Name, res.Passes[i].Path, want)
		}
	}
}

// TestDemoSeed checks that the demo data gives every pass of the catalog eligible rows, and that
// every batch select of the catalog is index-backed, by the dry run and by the policy check that
// serve runs at boot. The data is large enough for real statistics: on a near-empty table the
// planner's choices differ (make run once refused the outbox pass on 100k demo rows, where a
// merge anti join over the primary key won until the check planned the real ORDER BY).
func TestDemoSeed(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	if err := demo.Seed(ctx, pool, 100_000, io.Discard); err != nil {
		t.Fatal(err)
	}
	if warnings, err := check.Policy(ctx, pool, policy.Default()); err != nil || len(warnings) > 0 {
		t.Fatalf("the bundled policy fails its check on demo data: %v %v", err, warnings)
	}
	r := newRunner(t, sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings()})
	for _, s := range policy.Catalog() {
		dr, err := r.DryRun(ctx, s.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range dr.Passes {
			if p.Eligible == nil || *p.Eligible == 0 {
				t.Errorf("%s/%s: no eligible demo rows", s.Name, p.Pass)
			}
			if !p.Indexed {
				t.Errorf("%s/%s: batch select is not index-backed", s.Name, p.Pass)
			}
		}
	}
}

func TestWithRetention(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		overrides map[string]time.Duration
		wantErr   string
	}{
		{"none", nil, ""},
		{"longer", map[string]time.Duration{"notifications.read": 90 * 24 * time.Hour}, ""},
		{"at the floor", map[string]time.Duration{"refresh-tokens.expired": policy.MinRetention}, ""},
		{"zero", map[string]time.Duration{"notifications.read": 0}, "below the floor"},
		{"negative", map[string]time.Duration{"notifications.read": -time.Hour}, "below the floor"},
		{"five minutes", map[string]time.Duration{"notifications.read": 5 * time.Minute}, "below the floor"},
		{"unknown pass", map[string]time.Duration{"notifications.unread": time.Hour * 48}, `"notifications.unread" names no pass`},
		// The generic floor is an hour; the compliance pass's own is a year.
		{"below the pass's own floor", map[string]time.Duration{"audit-log.compliance": time.Hour},
			"pass \"compliance\" of sweep \"audit-log\": retention 1h is below this pass's min_retention of 365d"},
		{"a day below the pass's own floor", map[string]time.Duration{"audit-log.compliance": 364 * 24 * time.Hour}, "retention 364d is below this pass's min_retention of 365d"},
		{"above the pass's own floor", map[string]time.Duration{"audit-log.compliance": 400 * 24 * time.Hour}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := policy.WithRetention(policy.Catalog(), tt.overrides)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				for k, d := range tt.overrides {
					name, pass, _ := strings.Cut(k, ".")
					for _, s := range got {
						for _, p := range s.Passes {
							if s.Name == name && p.Name == pass && p.Retention != d {
								t.Errorf("%s retention = %s, want %s", k, p.Retention, d)
							}
						}
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	t.Run("catalog untouched", func(t *testing.T) {
		if _, err := policy.WithRetention(policy.Catalog(), map[string]time.Duration{"notifications.read": 99 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		if spec(t, "notifications").Passes[0].Retention != 30*24*time.Hour {
			t.Fatal("WithRetention changed the catalog")
		}
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	good := policy.Pass{Name: "p", Table: "t", AgeColumn: "c", Retention: time.Hour}
	tests := []struct {
		name    string
		specs   []policy.Spec
		wantErr string
	}{
		{"catalog", policy.Catalog(), ""},
		{"not url-safe", []policy.Spec{{Name: "Bad/Name", Passes: []policy.Pass{good}}}, "name must be"},
		{"duplicate", []policy.Spec{{Name: "a", Passes: []policy.Pass{good}}, {Name: "a", Passes: []policy.Pass{good}}}, "used twice"},
		{"no passes", []policy.Spec{{Name: "a"}}, "no passes"},
		{"per-row without function", []policy.Spec{{Name: "a", Passes: []policy.Pass{{Name: "p", Table: "t", AgeColumn: "c", Retention: time.Hour, Mode: policy.ModePerRow}}}}, "needs a function"},
		{"unknown mode", []policy.Spec{{Name: "a", Passes: []policy.Pass{{Name: "p", Table: "t", AgeColumn: "c", Retention: time.Hour, Mode: "bulk"}}}}, "unknown mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := policy.Validate(tt.specs)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
