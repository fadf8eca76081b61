package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/wire"
)

const grantsPolicy = `sweeps:
  - name: notifications
    passes:
      - name: read
        table: notifications
        age_column: read_at
        retention: 30d
        where: t.read_at IS NOT NULL
  - name: outbox
    passes:
      - name: dispatched
        table: outbox_events
        age_column: dispatched_at
        retention: 7d
        where: t.dispatched_at IS NOT NULL
        keep_while_referenced_by:
          - table: webhook_deliveries
            column: outbox_event_id
  - name: outbox-pairs
    passes:
      - name: old
        table: outbox_events
        age_column: dispatched_at
        retention: 30d
        where: t.dispatched_at IS NOT NULL
        delete_with:
          - table: webhook_deliveries
            column: outbox_event_id
`

func TestGrants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "sweeps.yaml")
	if err := os.WriteFile(policyFile, []byte(grantsPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	grantsFor := func(t *testing.T, env map[string]string, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(context.Background(), append([]string{"api", "grants"}, args...), env, &out, &errOut); err != nil {
			t.Fatalf("grants: %v\n%s", err, errOut.String())
		}
		return out.String()
	}

	t.Run("the least privileges of the policy, and pg_monitor with the throttle", func(t *testing.T) {
		out := grantsFor(t, map[string]string{"MAX_REPLICA_LAG": "1s"}, "--role", "Sweeper", policyFile)
		for _, want := range []string{
			`GRANT USAGE ON SCHEMA sweeprail TO "Sweeper";`,
			`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA sweeprail TO "Sweeper";`,
			`GRANT SELECT, UPDATE, DELETE ON "notifications" TO "Sweeper";`,
			`GRANT SELECT, UPDATE, DELETE ON "outbox_events" TO "Sweeper";`,
			`GRANT SELECT, DELETE ON "webhook_deliveries" TO "Sweeper";`,
			`GRANT pg_monitor TO "Sweeper";`,
			`ALTER DEFAULT PRIVILEGES IN SCHEMA sweeprail GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO "Sweeper";`,
			`ALTER DEFAULT PRIVILEGES IN SCHEMA sweeprail GRANT USAGE, SELECT ON SEQUENCES TO "Sweeper";`,
		} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("grants lack %s:\n%s", want, out)
			}
		}
		if n := strings.Count(out, "GRANT "); n != 8 {
			t.Errorf("%d GRANTs, want exactly 8:\n%s", n, out)
		}
		if strings.Contains(out, "USER MAPPING") {
			t.Errorf("a user mapping without an archive:\n%s", out)
		}
		if strings.Contains(grantsFor(t, map[string]string{}, policyFile), "pg_monitor") {
			t.Error("pg_monitor granted without the throttle")
		}
	})

	t.Run("the API runs on exactly those; a revoked one is batch-error 42501 naming the table", func(t *testing.T) {
		role := "sweeper_" + randomHex(t)
		u, admin, exec := withRole(t, role)
		for _, stmt := range sqlStatements(grantsFor(t, map[string]string{}, "--role", role, policyFile)) {
			exec(stmt)
		}
		exec(`INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com')`)
		seed := `INSERT INTO notifications (account_id, kind, read_at)
			SELECT '00000000-0000-0000-0000-000000000001', 'old', now() - interval '40 days' FROM generate_series(1, 25)`
		exec(seed)
		// An old event with its delivery, which outbox-pairs deletes together.
		exec(`WITH e AS (INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, dispatched_at)
			VALUES ('order', 'o1', 'order.paid', now() - interval '40 days') RETURNING id)
			INSERT INTO webhook_deliveries (outbox_event_id, endpoint_url) SELECT id, 'https://example.com/hook' FROM e`)

		s := startServe(t, map[string]string{"DATABASE_URL": withUser(t, u, role, "change-me"), "INTERNAL_SIGNING_KEY": serveKey,
			"SWEEP_POLICY_FILE": policyFile})
		sweepOnce := func(name string) (int, wire.Result) {
			t.Helper()
			resp, err := http.DefaultClient.Do(signedRequest(t, http.MethodPost, s.url+"/internal/sweep-"+name, ""))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var res wire.Result
			if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode, res
		}
		for _, name := range []string{"notifications", "outbox", "outbox-pairs"} {
			if status, res := sweepOnce(name); status != http.StatusOK || res.StopReason != wire.StopExhausted {
				t.Fatalf("%s as the least-privileged role: %d %+v (error %+v)", name, status, res, res.Error)
			}
		}
		var left int
		if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM webhook_deliveries`).Scan(&left); err != nil || left != 0 {
			t.Fatalf("%d deliveries left (%v): outbox-pairs deletes the old event with its delivery", left, err)
		}
		exec(`REVOKE DELETE ON notifications FROM ` + role)
		exec(seed)
		status, res := sweepOnce("notifications")
		if status != http.StatusInternalServerError || res.Error == nil || res.Error.Code != "42501" || !strings.Contains(res.Error.Message, "notifications") {
			t.Fatalf("without DELETE: %d %+v (error %+v), want 500 batch-error 42501 naming notifications", status, res, res.Error)
		}
	})

	// BATCH_WAL_COMPRESSION: the role needs the right to set wal_compression, a superuser's
	// setting; without it the boot is refused, naming the variable and the grant, rather than
	// every batch failing; with the grant api grants prints, the API boots.
	t.Run("BATCH_WAL_COMPRESSION refused at boot without its grant, served with it", func(t *testing.T) {
		role := "sweeper_" + randomHex(t)
		u, admin, exec := withRole(t, role)
		env := map[string]string{"BATCH_WAL_COMPRESSION": "on"}
		out := grantsFor(t, env, "--role", role, policyFile)
		if !strings.Contains(out, "GRANT SET ON PARAMETER wal_compression TO \""+role+"\";\n") {
			t.Fatalf("grants lack the right to set wal_compression:\n%s", out)
		}
		if strings.Contains(grantsFor(t, map[string]string{}, policyFile), "wal_compression") {
			t.Error("the right to set wal_compression granted without BATCH_WAL_COMPRESSION")
		}
		var version int
		if err := admin.QueryRow(context.Background(), `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
			t.Fatal(err)
		}
		statements := sqlStatements(out)
		if version < 150000 {
			// PostgreSQL 14 has no parameter privileges: only a superuser sets wal_compression.
			statements = slices.DeleteFunc(statements, func(s string) bool { return strings.Contains(s, "ON PARAMETER") })
		}
		var parameter string
		for _, stmt := range statements {
			if strings.Contains(stmt, "ON PARAMETER") {
				parameter = stmt
				continue
			}
			exec(stmt)
		}
		serveEnv := map[string]string{"DATABASE_URL": withUser(t, u, role, "change-me"), "INTERNAL_SIGNING_KEY": serveKey,
			"SWEEP_POLICY_FILE": policyFile, "LISTEN_ADDR": "127.0.0.1:0", "BATCH_WAL_COMPRESSION": "on"}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var stdout, stderr syncBuffer
		err := serve(ctx, nil, serveEnv, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "BATCH_WAL_COMPRESSION=on") ||
			!strings.Contains(err.Error(), "GRANT SET ON PARAMETER wal_compression") {
			t.Fatalf("serve without the grant = %v, want a refusal naming BATCH_WAL_COMPRESSION=on and the grant", err)
		}
		if parameter == "" {
			t.Skip("PostgreSQL 14: no GRANT SET ON PARAMETER to serve with")
		}
		exec(parameter)
		t.Cleanup(func() { exec(`REVOKE SET ON PARAMETER wal_compression FROM ` + role) })
		startServe(t, serveEnv)
	})

	// BATCH_FLUSH_AFTER: backend_flush_after is any role's to set, so the grants name nothing
	// for it and a role with only api grants' rights boots with it, the boot's probe passing.
	t.Run("BATCH_FLUSH_AFTER served on api grants' rights alone", func(t *testing.T) {
		role := "sweeper_" + randomHex(t)
		u, _, exec := withRole(t, role)
		env := map[string]string{"BATCH_FLUSH_AFTER": "256KiB"}
		out := grantsFor(t, env, "--role", role, policyFile)
		if strings.Contains(out, "backend_flush_after") {
			t.Errorf("grants name backend_flush_after, which any role may set:\n%s", out)
		}
		for _, stmt := range sqlStatements(out) {
			exec(stmt)
		}
		startServe(t, map[string]string{"DATABASE_URL": withUser(t, u, role, "change-me"), "INTERNAL_SIGNING_KEY": serveKey,
			"SWEEP_POLICY_FILE": policyFile, "LISTEN_ADDR": "127.0.0.1:0", "BATCH_FLUSH_AFTER": "256KiB"})
	})

	// A partitions pass on a table the role does not own: the drop function api grants prints,
	// created by the table's owner, lets the API drop the expired partitions on exactly those
	// grants, and nothing more.
	t.Run("a partitions pass through the drop function", func(t *testing.T) {
		partPolicy := filepath.Join(dir, "partitions.yaml")
		if err := os.WriteFile(partPolicy, []byte(`sweeps:
  - name: events
    passes:
      - name: expired
        table: part_events
        age_column: at
        retention: 3d
        mode: partitions
`), 0o600); err != nil {
			t.Fatal(err)
		}
		role := "sweeper_" + randomHex(t)
		out := grantsFor(t, map[string]string{}, "--role", role, partPolicy)
		if !strings.Contains(out, `CREATE OR REPLACE FUNCTION %s(part regclass, keep boolean DEFAULT false)`) {
			t.Fatalf("grants lack the drop function:\n%s", out)
		}
		for _, want := range []string{
			"-- the database clock minus 3d (pass expired's retention, at least its min_retention)",
			"run it again after changing the pass's retention,\n-- min_retention, time_zone or age_unit",
			"SET LOCAL sweeprail.grant_retention_seconds = 259200;",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("grants lack %q:\n%s", want, out)
			}
		}
		// A role's name with a newline stays on its comment lines, escaped; elsewhere it is quoted.
		smuggled := grantsFor(t, map[string]string{}, "--role", "x\nDROP TABLE part_events; --", partPolicy)
		if !strings.Contains(smuggled, `-- The least privileges of role "x\nDROP TABLE part_events; --" for`) ||
			!strings.Contains(smuggled, "SET LOCAL sweeprail.grant_role = \"x\nDROP TABLE part_events; --\";") {
			t.Errorf("a role's name with a newline, not escaped in comments and quoted elsewhere:\n%s", smuggled)
		}
		u, admin, exec := withRole(t, role)
		// Ten daily partitions, the last ending tomorrow, one row at each day's noon.
		exec(`CREATE TABLE part_events (id bigint, at timestamptz NOT NULL) PARTITION BY RANGE (at)`)
		exec(`CREATE INDEX ON part_events (at)`)
		exec(`DO $$ BEGIN FOR i IN 0..9 LOOP
			EXECUTE format('CREATE TABLE part_events_%s PARTITION OF part_events FOR VALUES FROM (%L) TO (%L)', i,
				date_trunc('day', now()) - (8 - i) * interval '1 day', date_trunc('day', now()) - (7 - i) * interval '1 day');
		END LOOP; END $$`)
		exec(`INSERT INTO part_events SELECT i, date_trunc('day', now()) - (8 - i) * interval '1 day' + interval '12 hours' FROM generate_series(0, 9) i`)
		for _, stmt := range grantStatements(out) {
			exec(stmt)
		}
		check := func() (string, error) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{"api", "policy", "check", partPolicy},
				map[string]string{"DATABASE_URL": withUser(t, u, role, "change-me")}, &out, &errOut)
			return out.String() + errOut.String(), err
		}
		// The boundary's batches need the partitions' own grants, as the grants' comment says.
		if out, err := check(); err == nil || !strings.Contains(out, "lacks SELECT, UPDATE, DELETE on 10 partitions") {
			t.Fatalf("policy check without the partitions' grants: %v\n%s", err, out)
		}
		exec(`DO $$ BEGIN FOR i IN 0..9 LOOP EXECUTE format('GRANT SELECT, UPDATE, DELETE ON part_events_%s TO ` + role + `', i); END LOOP; END $$`)
		if out, err := check(); err != nil || !strings.Contains(out, "through its drop function public.sweeprail_drop_part_events") {
			t.Fatalf("policy check: %v\n%s", err, out)
		}
		s := startServe(t, map[string]string{"DATABASE_URL": withUser(t, u, role, "change-me"), "INTERNAL_SIGNING_KEY": serveKey,
			"SWEEP_POLICY_FILE": partPolicy})
		resp, err := http.DefaultClient.Do(signedRequest(t, http.MethodPost, s.url+"/internal/sweep-events", ""))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res wire.Result
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			t.Fatal(err)
		}
		// The cutoff is 3 days ago: partitions 0–4 end at or before it, 5 holds it.
		if resp.StatusCode != http.StatusOK || res.StopReason != wire.StopExhausted || len(res.Passes) != 1 || res.Passes[0].PartitionsDropped != 5 {
			t.Fatalf("as the role with the drop function: %d %+v (error %+v), want exhausted with 5 partitions dropped", resp.StatusCode, res, res.Error)
		}
		var left []string
		if err := admin.QueryRow(context.Background(), `SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'part_events'::regclass`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if strings.Join(left, ",") != "part_events_5,part_events_6,part_events_7,part_events_8,part_events_9" {
			t.Errorf("partitions left: %v, want 5–9", left)
		}
		// The boundary's batches took partition 5's row when it is past the cutoff, and no other.
		var old, kept int
		if err := admin.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE at < $1), count(*) FILTER (WHERE at >= $1) FROM part_events`,
			res.Passes[0].Cutoff).Scan(&old, &kept); err != nil || old != 0 || kept < 4 {
			t.Errorf("%d rows past the cutoff and %d kept (%v), want 0 and days 6–9's at least", old, kept, err)
		}
		role2 := withUser(t, u, role, "change-me")
		as, err := dbpool.NewPool(context.Background(), role2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(as.Close)
		for _, stmt := range []string{`DROP TABLE part_events`, `DROP TABLE part_events_9`, `TRUNCATE part_events`} {
			if _, err := as.Exec(context.Background(), stmt); err == nil || !strings.Contains(err.Error(), "42501") {
				t.Errorf("%s as the role: %v, want 42501", stmt, err)
			}
		}
	})

	// The dry run counts a pass's cascades by reading their tables, which the run itself never
	// reads (the keys' own triggers do the deleting): the grants give SELECT on them.
	t.Run("a dry run with cascades, on exactly the grants", func(t *testing.T) {
		cascadePolicy := filepath.Join(dir, "cascades.yaml")
		if err := os.WriteFile(cascadePolicy, []byte(`sweeps:
  - name: apps
    passes:
      - name: unused
        table: apps
        age_column: used_at
        retention: 30d
        cascades: [app_tokens, app_audit]
`), 0o600); err != nil {
			t.Fatal(err)
		}
		role := "sweeper_" + randomHex(t)
		out := grantsFor(t, map[string]string{}, "--role", role, cascadePolicy)
		for _, want := range []string{
			`GRANT SELECT ON "app_audit" TO "` + role + `";`,
			`GRANT SELECT ON "app_tokens" TO "` + role + `";`,
		} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("grants lack %s:\n%s", want, out)
			}
		}
		u, admin, exec := withRole(t, role)
		exec(`CREATE TABLE apps (id bigint PRIMARY KEY, used_at timestamptz NOT NULL);
CREATE INDEX apps_used_at ON apps (used_at);
CREATE TABLE app_tokens (id bigint PRIMARY KEY, app_id bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE);
CREATE INDEX app_tokens_app_id ON app_tokens (app_id);
CREATE TABLE app_audit (id bigint PRIMARY KEY, app_id bigint REFERENCES apps (id) ON DELETE SET NULL);
CREATE INDEX app_audit_app_id ON app_audit (app_id);
INSERT INTO apps SELECT i, now() - CASE WHEN i <= 6 THEN interval '40 days' ELSE interval '1 day' END FROM generate_series(1, 10) i;
INSERT INTO app_tokens SELECT i * 2 + k, i FROM generate_series(1, 10) i, generate_series(0, 1) k;
INSERT INTO app_audit SELECT i, i FROM generate_series(1, 10) i`)
		for _, stmt := range sqlStatements(out) {
			exec(stmt)
		}
		s := startServe(t, map[string]string{"DATABASE_URL": withUser(t, u, role, "change-me"), "INTERNAL_SIGNING_KEY": serveKey,
			"SWEEP_POLICY_FILE": cascadePolicy})
		post := func(body string, into any) (int, string) {
			t.Helper()
			resp, err := http.DefaultClient.Do(signedRequest(t, http.MethodPost, s.url+"/internal/sweep-apps", body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, into); err != nil {
				t.Fatalf("%v: %s", err, raw)
			}
			return resp.StatusCode, string(raw)
		}
		want := []wire.CascadeRows{{Table: "app_tokens", Deleted: 12}, {Table: "app_audit", Updated: 6}}
		var dry wire.DryRunResult
		if status, raw := post(`{"dryRun": true}`, &dry); status != http.StatusOK || len(dry.Passes) != 1 || dry.Passes[0].Eligible == nil ||
			*dry.Passes[0].Eligible != 6 || !slices.Equal(dry.Passes[0].Cascades, want) {
			t.Fatalf("dry run as the least-privileged role: %d %s, want 6 eligible and cascades %+v", status, raw, want)
		}
		var res wire.Result
		if status, raw := post("", &res); status != http.StatusOK || res.Deleted != 6 || len(res.Passes) != 1 || !slices.Equal(res.Passes[0].Cascades, want) {
			t.Fatalf("run as the least-privileged role: %d %s, want 6 deleted and cascades %+v", status, raw, want)
		}
		var tokens int
		if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM app_tokens`).Scan(&tokens); err != nil || tokens != 8 {
			t.Fatalf("%d tokens left (%v), want the 8 of the young apps", tokens, err)
		}
		exec(`REVOKE SELECT ON app_tokens FROM ` + role)
		var failed map[string]any
		if status, raw := post(`{"dryRun": true}`, &failed); status != http.StatusInternalServerError || !strings.Contains(raw, "permission denied for table app_tokens") {
			t.Fatalf("dry run without SELECT on a cascades table: %d %s, want 500 permission denied for table app_tokens", status, raw)
		}
	})

	// An archiving pass adds SELECT and INSERT on its archive (and USAGE on the archive's schema), and the
	// API runs it, policy check included, on exactly those.
	t.Run("an archiving pass", func(t *testing.T) {
		archivePolicy := filepath.Join(dir, "archive.yaml")
		if err := os.WriteFile(archivePolicy, []byte(strings.Replace(grantsPolicy, "        where: t.read_at IS NOT NULL\n",
			"        where: t.read_at IS NOT NULL\n        archive_to: archive.notifications\n", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		role := "sweeper_" + randomHex(t)
		out := grantsFor(t, map[string]string{}, "--role", role, archivePolicy)
		for _, want := range []string{
			`GRANT USAGE ON SCHEMA "archive" TO "` + role + `";`,
			`GRANT SELECT, INSERT ON "archive"."notifications" TO "` + role + `";`,
			`-- CREATE USER MAPPING FOR "` + role + `" SERVER <server> OPTIONS (user '<remote role>', password '<its password>');`,
		} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("grants lack %s:\n%s", want, out)
			}
		}
		u, admin, exec := withRole(t, role)
		exec(`CREATE SCHEMA archive; CREATE TABLE archive.notifications (LIKE public.notifications INCLUDING ALL)`)
		for _, stmt := range sqlStatements(out) {
			exec(stmt)
		}
		exec(`INSERT INTO accounts (id, email) VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com')`)
		exec(`INSERT INTO notifications (account_id, kind, read_at)
			SELECT '00000000-0000-0000-0000-000000000001', 'old', now() - interval '40 days' FROM generate_series(1, 25)`)
		s := startServe(t, map[string]string{"DATABASE_URL": withUser(t, u, role, "change-me"), "INTERNAL_SIGNING_KEY": serveKey,
			"SWEEP_POLICY_FILE": archivePolicy})
		resp, err := http.DefaultClient.Do(signedRequest(t, http.MethodPost, s.url+"/internal/sweep-notifications", ""))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res wire.Result
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || res.StopReason != wire.StopExhausted || res.Archived != 25 {
			t.Fatalf("as the least-privileged role: %d %+v (error %+v), want exhausted with 25 archived", resp.StatusCode, res, res.Error)
		}
		var n int
		if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM archive.notifications`).Scan(&n); err != nil || n != 25 {
			t.Fatalf("archive holds %d rows (%v), want 25", n, err)
		}
	})
}

// grantStatements splits api grants' output into statements, each drop function's transaction whole.
func grantStatements(out string) []string {
	var stmts []string
	for {
		begin := strings.Index(out, "BEGIN;\n")
		if begin < 0 {
			return append(stmts, sqlStatements(out)...)
		}
		end := strings.Index(out[begin:], "\nCOMMIT;") + begin + len("\nCOMMIT;")
		stmts = append(stmts, sqlStatements(out[:begin])...)
		stmts = append(stmts, out[begin:end])
		out = out[end:]
	}
}

// withRole makes a fresh database and the login role role (password change-me), dropped with
// what it owns at cleanup. It returns the database's URL, a pool on it as the test's own
// superuser, and exec, which runs SQL on that pool and fails the test on an error.
func withRole(t *testing.T, role string) (string, *pgxpool.Pool, func(sql string)) {
	t.Helper()
	u := dbtest.URL(t)
	admin, err := dbpool.NewPool(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	exec := func(sql string) {
		t.Helper()
		if _, err := admin.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	exec(`CREATE ROLE ` + role + ` LOGIN PASSWORD 'change-me'`)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP OWNED BY `+role)
		_, _ = admin.Exec(context.Background(), `DROP ROLE `+role)
	})
	return u, admin, exec
}
