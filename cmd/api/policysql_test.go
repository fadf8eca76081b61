package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/statement"
)

// TestPolicySQL runs `api policy sql` against a migrated demo database: it prints every pass of
// the bundled catalog, each block as the statement package renders it for the kind the catalog
// has, and PostgreSQL accepts every statement it prints against the live schema.
func TestPolicySQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.URL(t)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	env := map[string]string{"DATABASE_URL": u}

	t.Run("the demo catalog", func(t *testing.T) {
		var out, errOut bytes.Buffer
		if err := run(ctx, []string{"api", "policy", "sql"}, env, &out, &errOut); err != nil {
			t.Fatalf("policy sql: %v\n%s", err, errOut.String())
		}
		text := out.String()
		last := -1
		for _, s := range policy.Default().Specs {
			for _, p := range s.Passes {
				title := statement.Title(s.Name, p, statement.Instant)
				at := strings.Index(text, "-- "+title+"\n")
				if at < 0 {
					t.Fatalf("no block titled %q in:\n%s", title, text)
				}
				if at < last {
					t.Errorf("pass %s of sweep %s is out of policy order", p.Name, s.Name)
				}
				last = at
				var want bytes.Buffer
				if err := statement.Write(&want, title, statement.List(p, statement.Build(p, statement.Instant), nil)); err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(text[at:], want.String()) {
					t.Errorf("pass %s of sweep %s: the block is not what the statement package renders:\n%s", p.Name, s.Name, text[at:min(len(text), at+len(want.String()))])
				}
			}
		}
		prepareAll(t, conn, text)
	})

	t.Run("the live schema's types and columns", func(t *testing.T) {
		if _, err := conn.Exec(ctx, `CREATE TABLE wall_events (id bigint PRIMARY KEY, at timestamp NOT NULL, note text);
			CREATE INDEX ON wall_events (at);
			CREATE TABLE wall_events_archive (LIKE wall_events)`); err != nil {
			t.Fatal(err)
		}
		file := writePolicy(t, `sweeps:
  - name: wall
    passes:
      - name: old
        table: wall_events
        age_column: at
        retention: 30d
        archive_to: wall_events_archive
`)
		var out, errOut bytes.Buffer
		if err := run(ctx, []string{"api", "policy", "sql", file}, env, &out, &errOut); err != nil {
			t.Fatalf("policy sql: %v\n%s", err, errOut.String())
		}
		for _, want := range []string{
			"age column at (timestamp), mode batched",
			`t."at" < ((($1::timestamptz + interval '2592000 seconds') AT TIME ZONE 'UTC') - interval '2592000 seconds')`,
			`INSERT INTO "wall_events_archive" ("id", "at", "note") OVERRIDING SYSTEM VALUE SELECT deleted.* FROM deleted`,
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
		prepareAll(t, conn, out.String())
	})

	t.Run("keys of two columns, without a foreign key", func(t *testing.T) {
		if _, err := conn.Exec(ctx, `CREATE TABLE remote_media (media_origin text, media_id text, created_at timestamptz NOT NULL, PRIMARY KEY (media_origin, media_id));
			CREATE INDEX ON remote_media (created_at);
			CREATE TABLE remote_thumbs (media_origin text NOT NULL, media_id text NOT NULL);
			CREATE INDEX ON remote_thumbs (media_origin, media_id);
			CREATE TABLE remote_pins (origin text, media text);
			CREATE INDEX ON remote_pins (origin, media)`); err != nil {
			t.Fatal(err)
		}
		file := writePolicy(t, `sweeps:
  - name: media
    passes:
      - name: remote
        table: remote_media
        age_column: created_at
        retention: 30d
        keep_while_referenced_by:
          - {table: remote_pins, column: [origin, media], references: [media_origin, media_id]}
        delete_with:
          - {table: remote_thumbs, column: [media_origin, media_id], references: [media_origin, media_id], without_foreign_key: true}
`)
		var out, errOut bytes.Buffer
		if err := run(ctx, []string{"api", "policy", "sql", file}, env, &out, &errOut); err != nil {
			t.Fatalf("policy sql: %v\n%s", err, errOut.String())
		}
		for _, want := range []string{
			`NOT EXISTS (SELECT 1 FROM "remote_pins" AS g WHERE (g."origin", g."media") = (t."media_origin", t."media_id"))`,
			`DELETE FROM "remote_thumbs" AS c WHERE EXISTS (SELECT 1 FROM deleted AS d WHERE (c."media_origin", c."media_id") = (d.r0_0, d.r0_1))`,
			`(SELECT count(*) FROM "remote_thumbs" AS c WHERE (c."media_origin", c."media_id") IN (SELECT r0_0, r0_1 FROM p))`,
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
		prepareAll(t, conn, out.String())
	})

	t.Run("without a database", func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := run(ctx, []string{"api", "policy", "sql"}, map[string]string{}, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") {
			t.Fatalf("err = %v, want one naming DATABASE_URL", err)
		}
	})
}

// prepareAll has the server parse and plan every statement of text, an `api policy sql` output:
// each must hold against the live schema, its placeholders typed.
func prepareAll(t *testing.T, conn *pgx.Conn, text string) {
	t.Helper()
	n := 0
	for _, chunk := range strings.Split(text, "\n\n") {
		var body []string
		for _, line := range strings.Split(chunk, "\n") {
			if !strings.HasPrefix(line, "--") {
				body = append(body, line)
			}
		}
		sql := strings.TrimSuffix(strings.TrimSpace(strings.Join(body, "\n")), ";")
		if sql == "" {
			continue
		}
		if _, err := conn.Prepare(context.Background(), "", sql); err != nil {
			t.Errorf("the server refuses a printed statement: %v\n%s", err, sql)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no statement printed")
	}
}
