package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbtest"
)

const sessionsPolicy = `sweeps:
  - name: expired-sessions
    passes:
      - name: expired
        table: sessions
        age_column: expires_at
        retention: 1d
`

func writePolicy(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sweeps.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPolicyCheck(t *testing.T) {
	ctx := context.Background()
	u := dbtest.URL(t)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `
CREATE TABLE sessions (id bigserial PRIMARY KEY, expires_at timestamptz NOT NULL);
CREATE INDEX ON sessions (expires_at);
CREATE TABLE scratch (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL);
CREATE TABLE sessions_archive (LIKE sessions);
CREATE TABLE ops (id bigserial PRIMARY KEY, expires_at timestamptz NOT NULL);
CREATE INDEX ON ops (expires_at);
CREATE TABLE attempts (id bigserial PRIMARY KEY, op_id bigint NOT NULL REFERENCES ops (id), state text NOT NULL);
CREATE INDEX ON attempts (op_id);
CREATE TABLE counters (day date PRIMARY KEY);
CREATE TABLE remote_media (media_origin text, media_id text, created_at timestamptz NOT NULL, PRIMARY KEY (media_origin, media_id));
CREATE INDEX ON remote_media (created_at);
CREATE TABLE remote_thumbs (media_origin text NOT NULL, media_id text NOT NULL);
CREATE INDEX ON remote_thumbs (media_id, media_origin)`); err != nil {
		t.Fatal(err)
	}
	good := writePolicy(t, sessionsPolicy)
	env := map[string]string{"DATABASE_URL": u}

	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		// wantOut and wantStderr are substrings of what is printed.
		wantOut, wantStderr []string
	}{
		{name: "the bundled policy", args: []string{"check"}, env: env,
			wantOut: []string{"catalog.yaml: OK: 9 sweeps, 12 passes, checked against the database\n",
				"\n  notifications: read (notifications.read_at older than 30d where t.read_at IS NOT NULL, batched)\n",
				"\n  account-erasure: requested (accounts.deletion_requested_at older than 30d where t.deleted_at IS NULL, per-row calling wipe_account(id))\n"}},
		{name: "a user's file", args: []string{"check", good}, env: env,
			wantOut: []string{good + ": OK: 1 sweeps, 1 passes", "\n  expired-sessions: expired (sessions.expires_at older than 1d, batched)\n"}},
		{name: "an archiving pass", args: []string{"check", writePolicy(t, sessionsPolicy+"        archive_to: sessions_archive\n")}, env: env,
			wantOut: []string{"\n  expired-sessions: expired (sessions.expires_at older than 1d, batched, archived to sessions_archive)\n"}},
		{name: "every field of a pass shown", args: []string{"check", writePolicy(t, `sweeps:
  - name: ledger
    passes:
      - name: ops
        table: ops
        age_column: expires_at
        expiry: true
        retention: 0s
        keep_while_referenced_by:
          - {table: attempts, column: op_id, where: "g.state = 'reserved'"}
        delete_with:
          - {table: attempts, column: op_id}
        max_rows: 5000
      - name: counters
        table: counters
        age_column: day
        time_zone: database
        retention: 1d
`)}, env: env,
			wantOut: []string{"\n  ledger: ops (ops.expires_at expired, kept while attempts.op_id references its id where g.state = 'reserved', " +
				"deleting the attempts rows whose op_id holds its id, batched, max_rows 5000); counters (counters.day older than 1d on the database calendar, batched)\n"}},
		{name: "a declared two-column child", args: []string{"check", writePolicy(t, `sweeps:
  - name: media
    passes:
      - name: remote
        table: remote_media
        age_column: created_at
        retention: 30d
        delete_with:
          - {table: remote_thumbs, column: [media_origin, media_id], references: [media_origin, media_id], without_foreign_key: true}
`)}, env: env,
			wantOut: []string{"\n  media: remote (remote_media.created_at older than 30d, deleting the remote_thumbs rows whose (media_origin, media_id) holds its (media_origin, media_id) (a declared relation, trusted: no foreign key), batched)\n"}},
		{name: "SWEEP_POLICY_FILE without an argument", args: []string{"check"},
			env:     map[string]string{"DATABASE_URL": u, "SWEEP_POLICY_FILE": good},
			wantOut: []string{good + ": OK"}},
		{name: "an unindexed pass allowed", args: []string{"check", writePolicy(t, strings.NewReplacer("sessions", "scratch", "expires_at", "created_at").Replace(sessionsPolicy)+"        allow_unindexed: true\n")}, env: env,
			wantOut: []string{`.yaml:8: pass "expired" of sweep "expired-scratch": no index serves the batch select`,
				"CREATE INDEX CONCURRENTLY ON scratch (created_at);", "OK: 1 sweeps"}},
		{name: "problems of the live schema", env: env,
			args: []string{"check", writePolicy(t, sessionsPolicy+`  - name: scratch
    passes:
      - name: old
        table: scratch
        age_column: created_on
        retention: 7d
      - name: older
        table: scratch
        age_column: created_at
        retention: 30d
`)},
			wantErr: "policy check: 2 problems in ",
			wantStderr: []string{`.yaml:12: pass "old" of sweep "scratch": column "created_on" does not exist in table "scratch" (columns: id, created_at)`,
				`.yaml:14: pass "older" of sweep "scratch": no index serves the batch select, so every batch would read all of table "scratch": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON scratch (created_at);`}},
		// The static checks need no database: a CI job without one still gets them.
		{name: "static problems without a database", env: map[string]string{},
			args:       []string{"check", writePolicy(t, strings.Replace(sessionsPolicy, "1d", "5m", 1))},
			wantErr:    "policy check: 1 problem in ",
			wantStderr: []string{`.yaml:7: pass "expired" of sweep "expired-sessions": retention 5m is below the floor of 1h`}},
		{name: "a valid file without a database", args: []string{"check", good}, env: map[string]string{},
			wantErr: "the static checks passed; DATABASE_URL is required"},
		{name: "a missing file", args: []string{"check", filepath.Join(t.TempDir(), "nope.yaml")}, env: env,
			wantErr: "read policy: open "},
		{name: "no subcommand", args: nil, env: env, wantErr: "usage: api policy check [file]"},
		{name: "an unknown subcommand", args: []string{"lint"}, env: env, wantErr: "usage: api policy check [file]"},
		{name: "two files", args: []string{"check", good, good}, env: env, wantErr: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(ctx, append([]string{"api", "policy"}, tt.args...), tt.env, &out, &errOut)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("err = %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want one containing %q\nstdout:\n%s\nstderr:\n%s", err, tt.wantErr, out.String(), errOut.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout does not contain %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr does not contain %q:\n%s", w, errOut.String())
				}
			}
		})
	}
}
