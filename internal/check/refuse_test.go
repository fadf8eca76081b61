package check_test

import "testing"

// checkSchema adds, next to the reference schema, the tables the refusals are about: such as a
// team adopting sweeprail has, an OAuth provider's cascading keys, a family of events whose
// children reference them, archives good and bad, a partitioned table.
const checkSchema = `
CREATE TABLE sessions (id bigserial PRIMARY KEY, user_name text NOT NULL, expires_at timestamptz NOT NULL);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
CREATE TABLE sessions_unindexed (id bigserial PRIMARY KEY, expires_at timestamptz NOT NULL);
CREATE TABLE inbox (id bigserial PRIMARY KEY, body text, read_at timestamptz);
CREATE SCHEMA app;
CREATE TABLE app.jobs (id bigserial PRIMARY KEY, state text NOT NULL, finished_at timestamptz, queued_on date NOT NULL DEFAULT current_date);
CREATE INDEX jobs_finished_at_done ON app.jobs (finished_at) WHERE state IN ('done', 'failed');
CREATE INDEX jobs_queued_on ON app.jobs (queued_on);
CREATE TABLE app.job_logs (id bigserial PRIMARY KEY, job_id bigint NOT NULL REFERENCES app.jobs (id), line text);
CREATE INDEX job_logs_job_id ON app.job_logs (job_id);
CREATE TABLE app.job_tags (job_id bigint NOT NULL, tag text);
CREATE TABLE tasks (id bigserial PRIMARY KEY, state text NOT NULL, updated_at timestamptz NOT NULL);
CREATE INDEX tasks_archived ON tasks (id) WHERE state = 'archived';
CREATE TABLE orders (id bigserial PRIMARY KEY, placed_at timestamptz NOT NULL);
CREATE TABLE order_lines (id bigserial PRIMARY KEY, order_id bigint NOT NULL REFERENCES orders (id));
CREATE INDEX order_lines_order_id ON order_lines (order_id);
CREATE VIEW recent_sessions AS SELECT * FROM sessions;
CREATE TABLE x (id int);
CREATE FUNCTION purge_two(a uuid, b int) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION purge_int(a int) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE TABLE days (id bigserial PRIMARY KEY, d date NOT NULL);
CREATE INDEX days_d ON days (d);
CREATE TABLE stamps (id bigserial PRIMARY KEY, at timestamp NOT NULL);
CREATE INDEX stamps_at ON stamps (at);

CREATE TABLE applications (id bigserial PRIMARY KEY, last_used_at timestamptz NOT NULL);
CREATE INDEX applications_last_used_at ON applications (last_used_at);
CREATE TABLE access_tokens (id bigserial PRIMARY KEY,
    application_id bigint NOT NULL REFERENCES applications (id) ON DELETE CASCADE, expires_at timestamptz NOT NULL);
CREATE INDEX access_tokens_application_id ON access_tokens (application_id);
CREATE TABLE app_sessions (id bigserial PRIMARY KEY, token_id bigint NOT NULL REFERENCES access_tokens (id) ON DELETE CASCADE);
CREATE INDEX app_sessions_token_id ON app_sessions (token_id);
CREATE TABLE app_audit (id bigserial PRIMARY KEY, application_id bigint REFERENCES applications (id) ON DELETE SET NULL, what text);
CREATE INDEX app_audit_application_id ON app_audit (application_id);

CREATE TABLE events (id bigint PRIMARY KEY, state text NOT NULL, closed_at timestamptz NOT NULL, legacy_id bigint UNIQUE);
CREATE INDEX events_closed_at ON events (closed_at);
CREATE TABLE deliveries (id bigserial PRIMARY KEY, event_id bigint NOT NULL REFERENCES events (id), legacy_event_id bigint);
CREATE INDEX deliveries_event_id ON deliveries (event_id);
CREATE INDEX deliveries_legacy_event_id ON deliveries (legacy_event_id);
CREATE TABLE receipts (id bigserial PRIMARY KEY, event_id bigint NOT NULL REFERENCES events (id) ON DELETE RESTRICT);
CREATE INDEX receipts_event_id ON receipts (event_id);
CREATE TABLE notes (event_ref text);
CREATE TABLE pairs (a bigint, b bigint, at timestamptz NOT NULL, PRIMARY KEY (a, b));
CREATE INDEX pairs_at ON pairs (at);
CREATE TABLE pair_refs (a bigint, b bigint, FOREIGN KEY (a, b) REFERENCES pairs (a, b));
CREATE TABLE batches (id bigint PRIMARY KEY, closed_at timestamptz NOT NULL);
CREATE INDEX batches_closed_at ON batches (closed_at);
CREATE TABLE batch_items (id bigint PRIMARY KEY, batch_id bigint NOT NULL REFERENCES batches (id));
CREATE INDEX batch_items_batch_id ON batch_items (batch_id);
CREATE TABLE item_logs (item_id bigint REFERENCES batch_items (id));

CREATE TABLE profiles (id bigserial PRIMARY KEY, bio text);
CREATE TABLE members (id bigserial PRIMARY KEY, profile_id bigint UNIQUE REFERENCES profiles (id), left_at timestamptz);
CREATE INDEX members_left_at ON members (left_at);
CREATE TABLE sweeprail.notes (id bigserial PRIMARY KEY, notification_id bigint);

CREATE TABLE audit_rows (id bigserial PRIMARY KEY, bucket text NOT NULL, state text NOT NULL, occurred_at timestamptz NOT NULL);
CREATE TABLE grants (id bigserial PRIMARY KEY, session_id bigint);
CREATE INDEX grants_session ON grants (session_id) WHERE session_id > 100;
CREATE TABLE tokens (id bigserial PRIMARY KEY, session_id bigint);
CREATE INDEX tokens_session ON tokens (session_id) WHERE session_id IS NOT NULL;

CREATE SCHEMA archive;
CREATE TABLE archive.audit_log (LIKE public.audit_log INCLUDING ALL, archived_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE archive.narrow (id bigint, action text, retention_bucket text, details jsonb, occurred_at timestamptz);
CREATE TABLE archive.mistyped (id bigint, actor_account_id uuid, action text, retention_bucket text, details integer, occurred_at timestamptz);
CREATE TABLE archive.generated (id bigint, actor_account_id uuid, action text, retention_bucket text, details jsonb,
  occurred_at timestamptz GENERATED ALWAYS AS ('2020-01-01'::timestamptz) STORED);
CREATE TABLE archive.loose (occurred_at timestamp, details json, action varchar(500), retention_bucket text, actor_account_id text, id numeric, note text);
CREATE VIEW archive.recent AS SELECT * FROM archive.audit_log;
CREATE TABLE archive.partitioned (LIKE public.audit_log) PARTITION BY RANGE (occurred_at);
CREATE TABLE archive.partitioned_all PARTITION OF archive.partitioned DEFAULT;
CREATE TABLE archive.rules (LIKE public.audit_log);
CREATE RULE log_too AS ON INSERT TO archive.rules DO ALSO NOTIFY archived;
CREATE TABLE archive.triggered (LIKE public.audit_log);
CREATE FUNCTION archive_discard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER discard BEFORE INSERT ON archive.triggered FOR EACH ROW EXECUTE FUNCTION archive_discard();
CREATE TABLE sweeprail.audit_log (LIKE public.audit_log);
CREATE TABLE archive.dated (id bigint, actor_account_id uuid, action text, retention_bucket text, details jsonb, occurred_at date);
CREATE TABLE archive.deferred (LIKE public.audit_log);
CREATE FUNCTION archive_forget() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN DELETE FROM archive.deferred WHERE id = NEW.id; RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER forget AFTER INSERT ON archive.deferred DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION archive_forget();
CREATE TABLE archive.diverted (LIKE public.audit_log);
CREATE TABLE archive.elsewhere (LIKE public.audit_log);
CREATE RULE divert AS ON INSERT TO archive.diverted DO INSTEAD INSERT INTO archive.elsewhere VALUES (NEW.*);
CREATE TABLE keyless (id bigint, at timestamptz NOT NULL);
CREATE INDEX keyless_at ON keyless (at);
CREATE TABLE archive.keyless (LIKE keyless);

CREATE TABLE logged (id bigserial PRIMARY KEY, at timestamptz NOT NULL);
CREATE INDEX logged_at ON logged (at);
CREATE FUNCTION note_gone() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$;
CREATE TRIGGER note_gone AFTER DELETE ON logged FOR EACH ROW EXECUTE FUNCTION note_gone();
CREATE TRIGGER on_insert AFTER INSERT ON logged FOR EACH ROW EXECUTE FUNCTION note_gone();

CREATE TABLE ranged (id bigint, at timestamptz NOT NULL) PARTITION BY RANGE (at);
CREATE INDEX ON ranged (at);
CREATE TABLE ranged_all PARTITION OF ranged DEFAULT;
CREATE TABLE flat (id bigint, at timestamptz NOT NULL);
CREATE TABLE folders (id bigint PRIMARY KEY, at timestamptz NOT NULL);
CREATE INDEX folders_at ON folders (at);
CREATE TABLE folder_files (folder_id bigint NOT NULL REFERENCES folders (id));

CREATE TABLE devices (id bigint PRIMARY KEY, seen_at timestamptz NOT NULL);
CREATE INDEX devices_seen_at ON devices (seen_at);
CREATE TABLE device_slots (id bigint PRIMARY KEY, device_id bigint DEFAULT NULL REFERENCES devices (id) ON DELETE SET DEFAULT);
CREATE INDEX device_slots_device_id ON device_slots (device_id);
CREATE TABLE badges (id bigint PRIMARY KEY);
CREATE TABLE holders (id bigint PRIMARY KEY, badge_id bigint REFERENCES badges (id), left_at timestamptz);
CREATE UNIQUE INDEX holders_badge_id_current ON holders (badge_id) WHERE left_at IS NULL;
CREATE INDEX holders_left_at ON holders (left_at);
CREATE TABLE threads (id bigint PRIMARY KEY, parent_id bigint REFERENCES threads (id), closed_at timestamptz NOT NULL);
CREATE INDEX threads_closed_at ON threads (closed_at);
CREATE INDEX threads_parent_id ON threads (parent_id);
CREATE TABLE posts (id bigint PRIMARY KEY, at timestamptz NOT NULL);
CREATE INDEX posts_at ON posts (at);
CREATE TABLE post_tokens (id bigint PRIMARY KEY, post_id bigint NOT NULL REFERENCES posts (id) ON DELETE CASCADE);
CREATE INDEX post_tokens_post_id ON post_tokens (post_id);
CREATE TABLE post_files (id bigint PRIMARY KEY, post_id bigint NOT NULL REFERENCES posts (id),
    token_id bigint REFERENCES post_tokens (id) ON DELETE CASCADE);
CREATE INDEX post_files_post_id ON post_files (post_id);
CREATE INDEX post_files_token_id ON post_files (token_id);
`

// refusalCase is one policy and everything the check says of it.
type refusalCase struct {
	name string
	yaml string
	// want are the refusals, in order, each with its file and line; warnings the warnings.
	want, warnings []string
}

// pass is a one-pass policy of table and age column, with extra keys from line 8.
func pass(table, ageColumn string, extra ...string) string {
	return policyYAML(passYAML(table, ageColumn, extra...))
}

// TestPolicyRefuses checks every refusal the check can make that a schema alone sets up: each
// row a policy, the exact refusals with their file and line, and the warnings.
func TestPolicyRefuses(t *testing.T) {
	t.Parallel()
	pool := fixturePool(t, checkSchema)
	for _, tt := range refusalCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			warnings, err := checkYAML(t, pool, tt.yaml)
			sameLines(t, "refusals", refusals(err), tt.want)
			sameLines(t, "warnings", warnings, tt.warnings)
		})
	}
}
