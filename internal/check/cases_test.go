package check_test

import "strings"

// refusalCases are TestPolicyRefuses' rows, grouped by the step that refuses.
var refusalCases = []refusalCase{
	// catalog: the table, its columns, the function, the guard and child tables.
	{name: "unknown table", yaml: pass("sesions", "expires_at"),
		want: []string{
			"p.yaml:5: pass \"p\" of sweep \"s\": table \"sesions\" does not exist on the search_path (public): create it, or fix the name",
		},
	},
	{name: "table in another case", yaml: pass("Sessions", "expires_at"),
		want: []string{
			"p.yaml:5: pass \"p\" of sweep \"s\": table \"Sessions\" does not exist on the search_path (public); tables of that name: sessions (names are matched exactly as written, schema.table for another schema)",
		},
	},
	{name: "table in another schema", yaml: pass("jobs", "finished_at"),
		want: []string{
			"p.yaml:5: pass \"p\" of sweep \"s\": table \"jobs\" does not exist on the search_path (public); tables of that name: app.jobs (names are matched exactly as written, schema.table for another schema)",
		},
	},
	{name: "unknown schema", yaml: pass("ops.jobs", "finished_at"),
		want: []string{
			"p.yaml:5: pass \"p\" of sweep \"s\": table \"ops.jobs\" does not exist; tables of that name: app.jobs (names are matched exactly as written, schema.table for another schema)",
		},
	},
	{name: "a view", yaml: pass("recent_sessions", "expires_at"),
		want: []string{
			"p.yaml:5: pass \"p\" of sweep \"s\": table \"recent_sessions\" is a view, not a table: name the table it stands for",
		},
	},
	{name: "batched on a partitioned table", yaml: pass("ranged", "at"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"ranged\" is partitioned, and a batch picks its rows by ctid, which repeats across partitions: use mode: partitions (expired partitions dropped whole, the boundary's rows deleted a partition at a time), or sweep each partition with a pass of its own",
		},
	},
	{name: "unknown column", yaml: pass("notifications", "read_on"),
		want: []string{
			"p.yaml:6: pass \"p\" of sweep \"s\": column \"read_on\" does not exist in table \"notifications\" (columns: id, account_id, kind, body, created_at, read_at)",
		},
	},
	{name: "text age column", yaml: pass("notifications", "body"),
		want: []string{
			"p.yaml:6: pass \"p\" of sweep \"s\": age column \"body\" of table \"notifications\" is text, not a timestamp or date: the cutoff cannot be compared with it; name a timestamptz, timestamp or date column (or an integer of Unix time, with age_unit)",
		},
	},
	{name: "integer age column", yaml: pass("sessions", "id"),
		want: []string{
			"p.yaml:6: pass \"p\" of sweep \"s\": age column \"id\" of table \"sessions\" is bigint, a number: if it holds Unix time, say in what unit with age_unit: seconds, milliseconds or microseconds; else name a timestamptz, timestamp or date column",
		},
	},
	{name: "age_unit on a timestamptz column", yaml: pass("sessions", "expires_at", "age_unit: seconds"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": age_unit is for an integer or numeric column of Unix time, and age column \"expires_at\" of table \"sessions\" is timestamp with time zone: remove age_unit (a date or time column is compared with the cutoff as it is)",
		},
	},
	{name: "time_zone on an instant", yaml: pass("sessions", "expires_at", "time_zone: database"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": time_zone has no effect: age column \"expires_at\" is timestamp with time zone, an instant, compared with the cutoff instant whatever the zone; remove time_zone (it is for date and timestamp without time zone columns)",
		},
	},
	{name: "unknown time zone", yaml: pass("app.jobs", "queued_on", "time_zone: Mars/Olympus_Mons"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": time_zone \"Mars/Olympus_Mons\" is no time zone the database knows (pg_timezone_names): want UTC, database, or an IANA name such as Europe/Paris",
		},
	},
	{name: "time zone in another case", yaml: pass("app.jobs", "queued_on", "time_zone: europe/paris"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": time_zone \"europe/paris\" is no time zone the database knows (pg_timezone_names); did you mean Europe/Paris?",
		},
	},
	{name: "unknown function", yaml: pass("accounts", "deletion_requested_at", "mode: per-row", "function: wipe_acount"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": function \"wipe_acount\" does not exist on the search_path: create it, or fix function (it is called once per eligible row with the key column's value)",
		},
	},
	{name: "function in an unknown schema", yaml: pass("accounts", "deletion_requested_at", "mode: per-row", "function: ops.wipe_account"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": function \"ops.wipe_account\" does not exist in schema ops: create it, or fix function (it is called once per eligible row with the key column's value)",
		},
	},
	{name: "function taking two arguments", yaml: pass("accounts", "deletion_requested_at", "mode: per-row", "function: purge_two"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": function \"purge_two\" does not take one argument (found: purge_two(uuid,integer)): it is called once per eligible row with the key column's value",
		},
	},
	{name: "function taking another type", yaml: pass("accounts", "deletion_requested_at", "mode: per-row", "function: purge_int"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": the per-row statement does not compile: function purge_int(uuid) does not exist (SQLSTATE 42883); hint: No function matches the given name and argument types. You might need to add explicit type casts.",
		},
	},
	{name: "unknown key column", yaml: pass("accounts", "deletion_requested_at", "mode: per-row", "function: wipe_account", "key_column: account_id"),
		want: []string{
			"p.yaml:10: pass \"p\" of sweep \"s\": key column \"account_id\" does not exist in table \"accounts\" (columns: id, email, display_name, created_at, deletion_requested_at, deleted_at); name the column the function takes with key_column",
		},
	},
	{name: "unknown guard table", yaml: pass("outbox_events", "dispatched_at", "keep_while_referenced_by:", "  - {table: deliverys, column: outbox_event_id}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": keep guard table \"deliverys\" does not exist on the search_path (public): create it, or fix the name",
		},
	},
	{name: "unknown guard column", yaml: pass("outbox_events", "dispatched_at", "keep_while_referenced_by:", "  - table: webhook_deliveries", "    column: event_id"),
		want: []string{
			"p.yaml:10: pass \"p\" of sweep \"s\": keep guard column \"event_id\" does not exist in table \"webhook_deliveries\" (columns: id, outbox_event_id, endpoint_url, status, attempts, response_code, created_at, last_attempt_at)",
		},
	},
	{name: "unknown guard reference", yaml: pass("outbox_events", "dispatched_at", "keep_while_referenced_by:", "  - table: webhook_deliveries", "    column: outbox_event_id", "    references: event_id"),
		want: []string{
			"p.yaml:11: pass \"p\" of sweep \"s\": keep guard references column \"event_id\", which does not exist in table \"outbox_events\" (columns: id, aggregate_type, aggregate_id, event_type, payload, created_at, dispatched_at)",
		},
	},
	{name: "unknown delete_with table", yaml: pass("events", "closed_at", "delete_with:", "  - {table: deliverys, column: event_id}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": delete_with table \"deliverys\" does not exist on the search_path (public): create it, or fix the name",
		},
	},
	{name: "unknown delete_with column", yaml: pass("events", "closed_at", "delete_with:", "  - {table: deliveries, column: event}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": delete_with column \"event\" does not exist in table \"deliveries\" (columns: id, event_id, legacy_event_id)",
		},
	},
	{name: "unknown delete_with reference", yaml: pass("events", "closed_at", "delete_with:", "  - {table: deliveries, column: event_id, references: ident}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": delete_with references column \"ident\", which does not exist in table \"events\" (columns: id, state, closed_at, legacy_id)",
		},
	},

	// foreign keys: a delete a key would fail.
	{name: "a guard and a child cover the keys", yaml: pass("events", "closed_at", "keep_while_referenced_by:", "  - {table: receipts, column: event_id}", "delete_with:", "  - {table: deliveries, column: event_id}")},
	{name: "foreign keys nothing covers", yaml: pass("events", "closed_at"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"events\" is referenced by foreign key deliveries_event_id_fkey (deliveries (event_id) → id, ON DELETE NO ACTION): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: deliveries, column: event_id, references: id}], or delete the referencing rows in the same statement with delete_with: [{table: deliveries, column: event_id, references: id}]",
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"events\" is referenced by foreign key receipts_event_id_fkey (receipts (event_id) → id, ON DELETE RESTRICT): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: receipts, column: event_id, references: id}], or delete the referencing rows in the same statement with delete_with: [{table: receipts, column: event_id, references: id}]",
		},
	},
	{name: "a conditional guard and a child on one key", yaml: pass("events", "closed_at", "keep_while_referenced_by:", "  - {table: receipts, column: event_id, where: g.id > 0}", "delete_with:", "  - {table: deliveries, column: event_id}", "  - {table: receipts, column: event_id}")},
	{name: "one of two keys covered", yaml: pass("events", "closed_at", "delete_with:", "  - {table: deliveries, column: event_id}"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"events\" is referenced by foreign key receipts_event_id_fkey (receipts (event_id) → id, ON DELETE RESTRICT): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: receipts, column: event_id, references: id}], or delete the referencing rows in the same statement with delete_with: [{table: receipts, column: event_id, references: id}]",
		},
	},
	{name: "a conditional guard alone", yaml: pass("events", "closed_at", "keep_while_referenced_by:", "  - {table: receipts, column: event_id, where: g.id > 0}", "delete_with:", "  - {table: deliveries, column: event_id}"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"events\" is referenced by foreign key receipts_event_id_fkey (receipts (event_id) → id, ON DELETE RESTRICT): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: receipts, column: event_id, references: id}], or delete the referencing rows in the same statement with delete_with: [{table: receipts, column: event_id, references: id}] (keep guard 1 has a where: it keeps only the rows referenced by rows it holds, and the others would still fail the batch; add the delete_with to delete the rest with their parent)",
		},
	},
	{name: "a guard on another parent column", yaml: pass("events", "closed_at", "keep_while_referenced_by:", "  - {table: receipts, column: event_id, references: legacy_id}", "delete_with:", "  - {table: deliveries, column: event_id}"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"events\" is referenced by foreign key receipts_event_id_fkey (receipts (event_id) → id, ON DELETE RESTRICT): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: receipts, column: event_id, references: id}], or delete the referencing rows in the same statement with delete_with: [{table: receipts, column: event_id, references: id}] (keep guard 1 references legacy_id, but the key points at id)",
		},
	},
	{name: "a child on another parent column", yaml: pass("events", "closed_at", "keep_while_referenced_by:", "  - {table: receipts, column: event_id}", "delete_with:", "  - {table: deliveries, column: event_id, references: legacy_id}"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"events\" is referenced by foreign key deliveries_event_id_fkey (deliveries (event_id) → id, ON DELETE NO ACTION): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: deliveries, column: event_id, references: id}], or delete the referencing rows in the same statement with delete_with: [{table: deliveries, column: event_id, references: id}] (delete_with 1 references legacy_id, but the key points at id)",
			"p.yaml:11: pass \"p\" of sweep \"s\": delete_with deliveries.event_id = events.legacy_id is no child of \"events\": no foreign key of deliveries (event_id) references events (legacy_id), nor the other way, so nothing says its rows belong to the deleted ones; add the foreign key, or remove the entry",
		},
	},
	{name: "a guard on another child column", yaml: pass("events", "closed_at", "keep_while_referenced_by:", "  - {table: receipts, column: event_id}", "  - {table: deliveries, column: legacy_event_id}"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"events\" is referenced by foreign key deliveries_event_id_fkey (deliveries (event_id) → id, ON DELETE NO ACTION): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: deliveries, column: event_id, references: id}], or delete the referencing rows in the same statement with delete_with: [{table: deliveries, column: event_id, references: id}]",
		},
	},
	{name: "a key of two columns", yaml: pass("pairs", "at"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"pairs\" is referenced by foreign key pair_refs_a_b_fkey (pair_refs (a, b) → a, b, ON DELETE NO ACTION): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: pair_refs, column: [a, b], references: [a, b]}], or delete the referencing rows in the same statement with delete_with: [{table: pair_refs, column: [a, b], references: [a, b]}]",
		},
	},
	{name: "a grandchild's key", yaml: pass("batches", "closed_at", "delete_with:", "  - {table: batch_items, column: batch_id}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": delete_with table \"batch_items\" is referenced by foreign key item_logs_item_id_fkey (item_logs (item_id) → id, ON DELETE NO ACTION): deleting a child it references fails the batch with SQLSTATE 23503, at every tick, and delete_with reaches one level: make that key ON DELETE CASCADE, or delete those rows before their parents' pass",
		},
	},

	// delete_with: each entry a child or a one-to-one parent.
	{name: "a parent one-to-one", yaml: pass("members", "left_at", "delete_with:", "  - {table: profiles, column: id, references: profile_id}")},
	{name: "a parent many-to-one", yaml: pass("notifications", "read_at", "delete_with:", "  - {table: accounts, column: id, references: account_id}", "cascades: [refresh_tokens, idempotency_records, email_messages, consent_records]"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": delete_with accounts.id = notifications.account_id goes the other way: notifications.account_id references accounts.id, which makes accounts the parent, and nothing makes notifications.account_id unique, so other rows of \"notifications\" may reference the same parent, and deleting it with one of them deletes what the others still reference (and, through its keys, more); a parent goes with its row only one-to-one (a unique index on notifications.account_id); remove the entry, and sweep \"accounts\" in a pass of its own, guarded by keep_while_referenced_by: [{table: notifications, column: account_id, references: id}]",
			"p.yaml:10: pass \"p\" of sweep \"s\": deleting from table \"notifications\" deletes rows of table \"notifications\", which the pass does not name, through the schema's ON DELETE keys: accounts → notifications (CASCADE) (key notifications_account_id_fkey); say that they go too with cascades: [refresh_tokens, idempotency_records, email_messages, consent_records, notifications]",
		},
	},
	{name: "the same table", yaml: pass("notifications", "read_at", "delete_with:", "  - {table: notifications, column: id}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": delete_with notifications.id = notifications.id names the swept table itself: its rows are the pass's to choose, by its where and age; remove the entry",
		},
	},
	{name: "a sibling", yaml: pass("notifications", "read_at", "delete_with:", "  - {table: refresh_tokens, column: account_id, references: account_id}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": delete_with refresh_tokens.account_id = notifications.account_id is no child of \"notifications\": no foreign key of refresh_tokens (account_id) references notifications (account_id), nor the other way, so nothing says its rows belong to the deleted ones; add the foreign key, or remove the entry",
		},
	},
	{name: "a parent unique only in part", yaml: pass("holders", "left_at", "delete_with:", "  - {table: badges, column: id, references: badge_id}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": delete_with badges.id = holders.badge_id goes the other way: holders.badge_id references badges.id, which makes badges the parent, and nothing makes holders.badge_id unique, so other rows of \"holders\" may reference the same parent, and deleting it with one of them deletes what the others still reference (and, through its keys, more); a parent goes with its row only one-to-one (a unique index on holders.badge_id); remove the entry, and sweep \"badges\" in a pass of its own, guarded by keep_while_referenced_by: [{table: holders, column: badge_id, references: id}]",
		},
	},
	{name: "the same table by its own key", yaml: pass("threads", "closed_at", "delete_with:", "  - {table: threads, column: parent_id}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": delete_with threads.parent_id = threads.id names the swept table itself: its rows are the pass's to choose, by its where and age; remove the entry",
		},
	},
	{name: "sweeprail's own schema", yaml: pass("notifications", "read_at", "delete_with:", "  - {table: sweeprail.notes, column: notification_id}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": delete_with sweeprail.notes.notification_id = notifications.id names a table of schema sweeprail, sweeprail's own (its leases, run history and replay store): remove the entry",
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves delete_with on sweeprail.notes.notification_id, so every batch would read all of table \"sweeprail.notes\": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON sweeprail.notes (notification_id);",
		},
	},
	{name: "a system schema", yaml: pass("notifications", "read_at", "delete_with:", "  - {table: pg_catalog.pg_class, column: oid}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": delete_with pg_catalog.pg_class.oid = notifications.id names a table of system schema pg_catalog: remove the entry",
		},
	},

	// cascades: every table the schema's keys change is named, and only those.
	{name: "every cascade named", yaml: pass("applications", "last_used_at", "cascades: [access_tokens, app_sessions, app_audit]")},
	{name: "a keep guard stops the chain", yaml: pass("applications", "last_used_at", "cascades: [app_audit]", "keep_while_referenced_by:", "  - {table: access_tokens, column: application_id}")},
	{name: "cascades not named", yaml: pass("applications", "last_used_at"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": deleting from table \"applications\" deletes rows of table \"access_tokens\", which the pass does not name, through the schema's ON DELETE keys: applications → access_tokens (CASCADE) (key access_tokens_application_id_fkey); keep the rows of \"applications\" that access_tokens references with keep_while_referenced_by: [{table: access_tokens, column: application_id, references: id}], or say that they go too with cascades: [access_tokens]",
			"p.yaml:4: pass \"p\" of sweep \"s\": deleting from table \"applications\" changes rows of table \"app_audit\", which the pass does not name, through the schema's ON DELETE keys: applications → app_audit (SET NULL) (key app_audit_application_id_fkey); keep the rows of \"applications\" that app_audit references with keep_while_referenced_by: [{table: app_audit, column: application_id, references: id}], or say that they go too with cascades: [app_audit]",
			"p.yaml:4: pass \"p\" of sweep \"s\": deleting from table \"applications\" deletes rows of table \"app_sessions\", which the pass does not name, through the schema's ON DELETE keys: applications → access_tokens (CASCADE) → app_sessions (CASCADE) (key app_sessions_token_id_fkey); keep the rows of \"applications\" that access_tokens references with keep_while_referenced_by: [{table: access_tokens, column: application_id, references: id}], or say that they go too with cascades: [access_tokens, app_sessions]",
		},
	},
	{name: "the second level not named", yaml: pass("applications", "last_used_at", "cascades: [access_tokens, app_audit]"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": deleting from table \"applications\" deletes rows of table \"app_sessions\", which the pass does not name, through the schema's ON DELETE keys: applications → access_tokens (CASCADE) → app_sessions (CASCADE) (key app_sessions_token_id_fkey); keep the rows of \"applications\" that access_tokens references with keep_while_referenced_by: [{table: access_tokens, column: application_id, references: id}], or say that they go too with cascades: [access_tokens, app_audit, app_sessions]",
		},
	},
	{name: "a conditional keep guard does not stop the chain", yaml: pass("applications", "last_used_at", "cascades: [app_audit]", "keep_while_referenced_by:", "  - {table: access_tokens, column: application_id, where: g.expires_at > now()}"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": deleting from table \"applications\" deletes rows of table \"access_tokens\", which the pass does not name, through the schema's ON DELETE keys: applications → access_tokens (CASCADE) (key access_tokens_application_id_fkey); keep the rows of \"applications\" that access_tokens references with keep_while_referenced_by: [{table: access_tokens, column: application_id, references: id}], or say that they go too with cascades: [app_audit, access_tokens]",
			"p.yaml:8: pass \"p\" of sweep \"s\": deleting from table \"applications\" deletes rows of table \"app_sessions\", which the pass does not name, through the schema's ON DELETE keys: applications → access_tokens (CASCADE) → app_sessions (CASCADE) (key app_sessions_token_id_fkey); keep the rows of \"applications\" that access_tokens references with keep_while_referenced_by: [{table: access_tokens, column: application_id, references: id}], or say that they go too with cascades: [app_audit, access_tokens, app_sessions]",
		},
	},
	{name: "a SET DEFAULT key not named", yaml: pass("devices", "seen_at"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": deleting from table \"devices\" changes rows of table \"device_slots\", which the pass does not name, through the schema's ON DELETE keys: devices → device_slots (SET DEFAULT) (key device_slots_device_id_fkey); keep the rows of \"devices\" that device_slots references with keep_while_referenced_by: [{table: device_slots, column: device_id, references: id}], or say that they go too with cascades: [device_slots]",
		},
	},
	{name: "a SET DEFAULT key named", yaml: pass("devices", "seen_at", "cascades: [device_slots]")},
	{name: "a child a cascade reaches too, named in both", yaml: pass("posts", "at", "delete_with:", "  - {table: post_files, column: post_id}", "cascades: [post_tokens, post_files]")},
	{name: "a child a cascade reaches too, named as a child only", yaml: pass("posts", "at", "delete_with:", "  - {table: post_files, column: post_id}", "cascades: [post_tokens]"),
		want: []string{
			"p.yaml:10: pass \"p\" of sweep \"s\": deleting from table \"posts\" deletes rows of table \"post_files\", which the pass does not name, through the schema's ON DELETE keys: posts → post_tokens (CASCADE) → post_files (CASCADE) (key post_files_token_id_fkey); keep the rows of \"posts\" that post_tokens references with keep_while_referenced_by: [{table: post_tokens, column: post_id, references: id}], or say that they go too with cascades: [post_tokens, post_files]",
		},
	},
	{name: "a child no cascade reaches, named in cascades", yaml: pass("folders", "at", "allow_unindexed: true", "delete_with:", "  - {table: folder_files, column: folder_id}", "cascades: [folder_files]"),
		want: []string{
			"p.yaml:11: pass \"p\" of sweep \"s\": cascades names table \"folder_files\", which no ON DELETE CASCADE, SET NULL or SET DEFAULT key reaches from table \"folders\": remove it",
		},
		warnings: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": no index serves delete_with on folder_files.folder_id, so every batch would read all of table \"folder_files\" (allowed by allow_unindexed); the index that would serve it: CREATE INDEX CONCURRENTLY ON folder_files (folder_id);",
		},
	},
	{name: "a table no key reaches", yaml: pass("applications", "last_used_at", "cascades: [access_tokens, app_sessions, app_audit, accounts]"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": cascades names table \"accounts\", which no ON DELETE CASCADE, SET NULL or SET DEFAULT key reaches from table \"applications\": remove it",
		},
	},
	{name: "a cascades table that does not exist", yaml: pass("applications", "last_used_at", "cascades: [access_tokens, app_sessions, app_audit, app_sesions]"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": cascades table \"app_sesions\" does not exist on the search_path (public): create it, or fix the name",
		},
	},
	{name: "delete triggers", yaml: pass("logged", "at"),
		warnings: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": the pass's deletes fire triggers logged.note_gone (AFTER DELETE, note_gone): each runs for every row deleted, in the batch's transaction",
		},
	},

	// partitions.
	{name: "partitions of a table not partitioned", yaml: pass("flat", "at", "mode: partitions"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": mode partitions: is not partitioned: mode partitions drops whole partitions of a table partitioned by RANGE on its age column; sweep it with mode batched",
		},
	},
	{name: "an archive_schema that does not exist", yaml: pass("ranged", "at", "mode: partitions", "boundary: keep", "archive_schema: cold"),
		want: []string{
			"p.yaml:10: pass \"p\" of sweep \"s\": archive_schema \"cold\" does not exist: CREATE SCHEMA \"cold\";",
		},
	},

	// compile: each piece of the statement alone, then the whole.
	{name: "guard of another type", yaml: pass("email_messages", "created_at", "keep_while_referenced_by:", "  - {table: notifications, column: account_id}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": keep guard notifications.account_id = email_messages.id does not compile: operator does not exist: uuid = bigint (SQLSTATE 42883); hint: No operator matches the given name and argument types. You might need to add explicit type casts.",
		},
	},
	{name: "a guard's where does not compile", yaml: pass("sessions", "expires_at", "keep_while_referenced_by:", "  - {table: grants, column: session_id, where: g.stat = 'x'}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": the keep guard's condition does not compile: column g.stat does not exist (SQLSTATE 42703) at \"g.stat = 'x'\"",
		},
	},
	{name: "a guard's where calling a volatile function", yaml: pass("sessions", "expires_at", "keep_while_referenced_by:", "  - {table: tokens, column: session_id, where: random() < 2}"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": the keep guard's condition calls VOLATILE random(): a condition may call only IMMUTABLE or STABLE functions, since it runs once per candidate row, in dry runs too, and could write or change the session",
		},
	},
	{name: "a child whose column cannot hold the reference", yaml: pass("events", "closed_at", "keep_while_referenced_by:", "  - {table: receipts, column: event_id}", "delete_with:", "  - {table: deliveries, column: event_id}", "  - {table: notes, column: event_ref}"),
		want: []string{
			"p.yaml:12: pass \"p\" of sweep \"s\": delete_with notes.event_ref = events.id is no child of \"events\": no foreign key of notes (event_ref) references events (id), nor the other way, so nothing says its rows belong to the deleted ones; add the foreign key, or remove the entry",
			"p.yaml:12: pass \"p\" of sweep \"s\": delete_with notes.event_ref = events.id does not compile: operator does not exist: text = bigint (SQLSTATE 42883); hint: No operator matches the given name and argument types. You might need to add explicit type casts.",
		},
	},
	{name: "a condition naming the cutoff", yaml: pass("sessions", "expires_at", "where: t.expires_at < :cutoff + interval '1 day'")},
	{name: "condition calling a writing function", yaml: pass("notifications", "read_at", "where: (SELECT count(*) FROM accounts a WHERE wipe_account(a.id)) >= 0"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": the condition calls VOLATILE wipe_account(uuid): a condition may call only IMMUTABLE or STABLE functions, since it runs once per candidate row, in dry runs too, and could write or change the session",
		},
	},
	{name: "condition changing the session", yaml: pass("notifications", "read_at", "where: set_config('default_transaction_read_only', 'on', false) IS NOT NULL"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": the condition calls VOLATILE set_config(text,text,boolean): a condition may call only IMMUTABLE or STABLE functions, since it runs once per candidate row, in dry runs too, and could write or change the session",
		},
	},
	{name: "condition does not compile", yaml: pass("notifications", "read_at", "where: t.read_at IS NOT NULL AND t.stauts = 'read'"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": the condition does not compile: column t.stauts does not exist (SQLSTATE 42703) at \"t.stauts = 'read'\"",
		},
	},
	{name: "condition with a syntax error", yaml: pass("notifications", "read_at", "where: t.kind = = 'x'"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": the condition does not compile: syntax error at or near \"=\" (SQLSTATE 42601) at \"= 'x'\"",
		},
	},
	{name: "condition cut short", yaml: pass("notifications", "read_at", "where: t.kind ="),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": the condition does not compile: syntax error at or near \")\" (SQLSTATE 42601) at the end of the condition",
		},
	},
	{name: "condition not a boolean", yaml: pass("notifications", "read_at", "where: t.kind"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": the condition does not compile: argument of WHERE must be type boolean, not type text (SQLSTATE 42804) at \"t.kind\"",
		},
	},
	{name: "condition naming the table", yaml: pass("notifications", "read_at", "where: notifications.kind = 'x'"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": the condition does not compile: invalid reference to FROM-clause entry for table \"notifications\" (SQLSTATE 42P01) at \"notifications.kind = 'x'\"; hint: Perhaps you meant to reference the table alias \"t\".",
		},
	},

	// indexes: the batch select and each lookup served by an index.
	{name: "a partial age index the where implies", yaml: pass("app.jobs", "finished_at", "where: t.state IN ('done', 'failed')", "keep_while_referenced_by:", "  - {table: app.job_logs, column: job_id}")},
	{name: "unindexed", yaml: pass("sessions_unindexed", "expires_at"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves the batch select, so every batch would read all of table \"sessions_unindexed\": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON sessions_unindexed (expires_at);",
		},
	},
	{name: "unindexed, allowed", yaml: pass("sessions_unindexed", "expires_at", "allow_unindexed: true"),
		warnings: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": no index serves the batch select, so each run reads all of table \"sessions_unindexed\" once, by ranges of blocks (allowed by allow_unindexed); the index that would serve it: CREATE INDEX CONCURRENTLY ON sessions_unindexed (expires_at);",
		},
	},
	{name: "unindexed with a condition", yaml: pass("inbox", "read_at", "where: t.read_at IS NOT NULL"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves the batch select, so every batch would read all of table \"inbox\": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON inbox (read_at) WHERE read_at IS NOT NULL;",
		},
	},
	{name: "unindexed in another schema", yaml: pass("app.jobs", "finished_at", "where: t.state = 'cancelled' OR t.state = 'done'"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"app.jobs\" is referenced by foreign key job_logs_job_id_fkey (app.job_logs (job_id) → id, ON DELETE NO ACTION): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: app.job_logs, column: job_id, references: id}], or delete the referencing rows in the same statement with delete_with: [{table: app.job_logs, column: job_id, references: id}]",
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves the batch select, so every batch would read all of table \"app.jobs\": create the index, or set allow_unindexed: true for a table that stays small: (a partial index matching more of the condition would be smaller; only its simple parts are shown) CREATE INDEX CONCURRENTLY ON app.jobs (finished_at);",
		},
	},
	{name: "a partial index that ignores the age", yaml: pass("tasks", "updated_at", "where: t.state = 'archived'"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves the batch select, so every batch would read all of table \"tasks\": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON tasks (updated_at) WHERE state = 'archived';",
		},
	},
	{name: "only the primary key", yaml: pass("orders", "placed_at", "keep_while_referenced_by:", "  - {table: order_lines, column: order_id}"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves the batch select, so every batch would read all of table \"orders\": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON orders (placed_at);",
		},
	},
	{name: "unindexed guard", yaml: pass("app.jobs", "finished_at", "where: t.state IN ('done', 'failed')", "keep_while_referenced_by:", "  - {table: app.job_tags, column: job_id}"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"app.jobs\" is referenced by foreign key job_logs_job_id_fkey (app.job_logs (job_id) → id, ON DELETE NO ACTION): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: app.job_logs, column: job_id, references: id}], or delete the referencing rows in the same statement with delete_with: [{table: app.job_logs, column: job_id, references: id}]",
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves the keep guard on app.job_tags.job_id, so every batch would read all of table \"app.job_tags\": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON app.job_tags (job_id);",
		},
	},
	{name: "unindexed guard, allowed", yaml: pass("app.jobs", "finished_at", "where: t.state IN ('done', 'failed')", "allow_unindexed: true", "keep_while_referenced_by:", "  - {table: app.job_tags, column: job_id}"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": table \"app.jobs\" is referenced by foreign key job_logs_job_id_fkey (app.job_logs (job_id) → id, ON DELETE NO ACTION): deleting a row it references fails the batch with SQLSTATE 23503, at every tick; keep such rows with keep_while_referenced_by: [{table: app.job_logs, column: job_id, references: id}], or delete the referencing rows in the same statement with delete_with: [{table: app.job_logs, column: job_id, references: id}]",
		},
		warnings: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": no index serves the keep guard on app.job_tags.job_id, so every batch would read all of table \"app.job_tags\" (allowed by allow_unindexed); the index that would serve it: CREATE INDEX CONCURRENTLY ON app.job_tags (job_id);",
		},
	},
	{name: "a partial guard index the equality implies", yaml: pass("sessions", "expires_at", "keep_while_referenced_by:", "  - {table: tokens, column: session_id}")},
	{name: "a partial guard index nothing implies", yaml: pass("sessions", "expires_at", "keep_while_referenced_by:", "  - {table: grants, column: session_id}"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves the keep guard on grants.session_id, so every batch would read all of table \"grants\": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON grants (session_id);",
		},
	},
	{name: "unindexed guard with a where", yaml: pass("sessions", "expires_at", "keep_while_referenced_by:", "  - {table: app.job_tags, column: job_id, where: g.tag = 'keep'}"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves the keep guard on app.job_tags.job_id where g.tag = 'keep', so every batch would read all of table \"app.job_tags\": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON app.job_tags (job_id) WHERE tag = 'keep';",
		},
	},
	{name: "unindexed child", yaml: pass("folders", "at", "delete_with:", "  - {table: folder_files, column: folder_id}"),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves delete_with on folder_files.folder_id, so every batch would read all of table \"folder_files\": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON folder_files (folder_id);",
		},
	},
	{name: "one lookup index for two passes", yaml: "sweeps:\n  - name: s\n    passes:\n" +
		passYAML("sessions", "expires_at", "keep_while_referenced_by:", "  - {table: app.job_tags, column: job_id}") +
		strings.Replace(passYAML("sessions", "expires_at", "keep_while_referenced_by:", "  - {table: app.job_tags, column: job_id}"), "name: p", "name: q", 1),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves the keep guard on app.job_tags.job_id, so every batch would read all of table \"app.job_tags\": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON app.job_tags (job_id);",
			"p.yaml:10: pass \"q\" of sweep \"s\": no index serves the keep guard on app.job_tags.job_id, so every batch would read all of table \"app.job_tags\": the index suggested for pass \"p\" of sweep \"s\" serves this pass too, or set allow_unindexed: true for a table that stays small",
		},
	},
	{name: "one age index for two passes", yaml: "sweeps:\n  - name: s\n    passes:\n" +
		passYAML("audit_rows", "occurred_at", "where: t.bucket = 'operational'") +
		strings.Replace(passYAML("audit_rows", "occurred_at", "where: t.bucket = 'debug'"), "name: p", "name: q", 1),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves the batch select, so every batch would read all of table \"audit_rows\": create the index, which serves all 2 passes of the table that no index serves (s.p, s.q), or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON audit_rows (occurred_at);",
			"p.yaml:9: pass \"q\" of sweep \"s\": no index serves the batch select, so every batch would read all of table \"audit_rows\": the index suggested for pass \"p\" of sweep \"s\" serves this pass too, or set allow_unindexed: true for a table that stays small",
		},
	},
	{name: "one age index partial on what two passes share", yaml: "sweeps:\n  - name: s\n    passes:\n" +
		passYAML("audit_rows", "occurred_at", "where: t.state = 'closed' AND t.bucket = 'operational'") +
		strings.Replace(passYAML("audit_rows", "occurred_at", "where: t.bucket = 'debug' AND T.State='closed'"), "name: p", "name: q", 1),
		want: []string{
			"p.yaml:4: pass \"p\" of sweep \"s\": no index serves the batch select, so every batch would read all of table \"audit_rows\": create the index, which serves all 2 passes of the table that no index serves (s.p, s.q), or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON audit_rows (occurred_at) WHERE state = 'closed';",
			"p.yaml:9: pass \"q\" of sweep \"s\": no index serves the batch select, so every batch would read all of table \"audit_rows\": the index suggested for pass \"p\" of sweep \"s\" serves this pass too, or set allow_unindexed: true for a table that stays small",
		},
	},
	{name: "every problem at once", yaml: "sweeps:\n  - name: s\n    passes:\n" +
		passYAML("sesions", "expires_at") +
		strings.Replace(passYAML("notifications", "read_on"), "name: p", "name: q", 1) +
		strings.Replace(passYAML("sessions_unindexed", "expires_at"), "name: p", "name: r", 1),
		want: []string{
			"p.yaml:5: pass \"p\" of sweep \"s\": table \"sesions\" does not exist on the search_path (public): create it, or fix the name",
			"p.yaml:10: pass \"q\" of sweep \"s\": column \"read_on\" does not exist in table \"notifications\" (columns: id, account_id, kind, body, created_at, read_at)",
			"p.yaml:12: pass \"r\" of sweep \"s\": no index serves the batch select, so every batch would read all of table \"sessions_unindexed\": create the index, or set allow_unindexed: true for a table that stays small: CREATE INDEX CONCURRENTLY ON sessions_unindexed (expires_at);",
		},
	},

	// archive_to.
	{name: "archive accepted", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.audit_log")},
	{name: "archive of looser types refused", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.loose"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.loose\" holds column \"id\" as numeric, and \"audit_log\" as bigint: an archived value must be the one deleted, so the types must be the same; retype it: ALTER TABLE archive.loose ALTER COLUMN id TYPE bigint;",
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.loose\" holds column \"actor_account_id\" as text, and \"audit_log\" as uuid: an archived value must be the one deleted, so the types must be the same; retype it: ALTER TABLE archive.loose ALTER COLUMN actor_account_id TYPE uuid;",
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.loose\" holds column \"action\" as character varying(500), and \"audit_log\" as text: an archived value must be the one deleted, so the types must be the same; retype it: ALTER TABLE archive.loose ALTER COLUMN action TYPE text;",
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.loose\" holds column \"details\" as json, and \"audit_log\" as jsonb: an archived value must be the one deleted, so the types must be the same; retype it: ALTER TABLE archive.loose ALTER COLUMN details TYPE jsonb;",
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.loose\" holds column \"occurred_at\" as timestamp without time zone, and \"audit_log\" as timestamp with time zone: an archived value must be the one deleted, so the types must be the same; retype it: ALTER TABLE archive.loose ALTER COLUMN occurred_at TYPE timestamp with time zone;",
		}},
	{name: "archive a date column for a timestamptz", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.dated"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.dated\" holds column \"occurred_at\" as date, and \"audit_log\" as timestamp with time zone: an archived value must be the one deleted, so the types must be the same; retype it: ALTER TABLE archive.dated ALTER COLUMN occurred_at TYPE timestamp with time zone;",
		}},
	{name: "archive with a deferrable constraint trigger", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.deferred"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.deferred\" has deferrable constraint trigger forget: it fires at commit, after each batch's proof that the archive holds its rows; drop it, or recreate it NOT DEFERRABLE (it then fires before the proof)",
		}},
	{name: "archive with a DO INSTEAD rule", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.diverted"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.diverted\" has rule divert (ON INSERT DO INSTEAD): a rule rewrites the batch's insert, so rows may never reach the archive; drop it (DROP RULE … ON archive.diverted)",
		}},
	{name: "archive of a table without a primary key", yaml: pass("keyless", "at", "archive_to: archive.keyless"),
		want: []string{
			"p.yaml:8: pass \"p\" of sweep \"s\": archive_to needs a primary key of one column on \"keyless\": each batch reads its rows back from the archive by it, to prove they arrived as they left; add one (ALTER TABLE keyless ADD PRIMARY KEY (…))",
		}},
	{name: "archive partitioned accepted, mode single", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "mode: single", "archive_to: archive.partitioned")},
	{name: "archive missing", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.audit_logs"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.audit_logs\" does not exist: create it, or fix the name (CREATE TABLE archive.audit_logs (LIKE audit_log) makes one; for cold storage on another server, a postgres_fdw foreign table)",
		},
	},
	{name: "archive a view", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.recent"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to \"archive.recent\" is a view: name a table, or a postgres_fdw foreign table",
		},
	},
	{name: "archive the swept table, schema-qualified", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: public.audit_log"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to \"public.audit_log\" is the swept table itself: name another table",
		},
	},
	{name: "archive in sweeprail's schema", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: sweeprail.audit_log"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to \"sweeprail.audit_log\" is in schema sweeprail, sweeprail's own (its leases, run history and replay store): rows archived there would be read as its own; archive to a table of another schema",
		},
	},
	{name: "archive in a system schema", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: pg_catalog.pg_class"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to \"pg_catalog.pg_class\" is in system schema pg_catalog: archive to a table of your own schema",
		},
	},
	{name: "archive a column missing", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.narrow"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.narrow\" has no column \"actor_account_id\": every column of \"audit_log\" is archived, by name; add it: ALTER TABLE archive.narrow ADD COLUMN actor_account_id uuid;",
		},
	},
	{name: "archive a column of another type", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.mistyped"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.mistyped\" holds column \"details\" as integer, and \"audit_log\" as jsonb: an archived value must be the one deleted, so the types must be the same; retype it: ALTER TABLE archive.mistyped ALTER COLUMN details TYPE jsonb;",
		},
	},
	{name: "archive a generated column", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.generated"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.generated\" does not accept column \"occurred_at\" (timestamp with time zone in \"audit_log\", timestamp with time zone in the archive): cannot insert a non-DEFAULT value into column \"occurred_at\" (SQLSTATE 428C9); Column \"occurred_at\" is a generated column.",
		},
	},
	{name: "archive with a trigger", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.triggered"),
		warnings: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.triggered\" has triggers discard (BEFORE INSERT, archive_discard): each batch reads its rows back from the archive after its statement (and its AFTER triggers), by key and content, and rolls back (batch-error archive-short or archive-altered) when one is missing or changed",
		},
	},
	{name: "archive with a rule", yaml: pass("audit_log", "occurred_at", "where: t.retention_bucket = 'operational'", "archive_to: archive.rules"),
		want: []string{
			"p.yaml:9: pass \"p\" of sweep \"s\": archive_to table \"archive.rules\" has rule log_too (ON INSERT): a rule rewrites the batch's insert, so rows may never reach the archive; drop it (DROP RULE … ON archive.rules)",
		},
	},
}
