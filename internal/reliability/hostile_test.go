package reliability

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/dbtest"
	"github.com/sweeprail/sweeprail/internal/signing"
)

// auditSQL records, in the test database only, every write of a lease and every DELETE statement
// on the swept tables, with the session's application_name and the database's clock. A refused
// request must leave both untouched; the load test reads them to prove runs never overlap.
const auditSQL = `
CREATE TABLE reliability_lease_audit (id bigserial PRIMARY KEY, label text NOT NULL, owner uuid NOT NULL,
  op text NOT NULL, app text NOT NULL, at timestamptz NOT NULL);
CREATE FUNCTION reliability_audit_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO reliability_lease_audit (label, owner, op, app, at)
    VALUES (OLD.label, OLD.owner, TG_OP, current_setting('application_name'), clock_timestamp());
    RETURN OLD;
  END IF;
  INSERT INTO reliability_lease_audit (label, owner, op, app, at)
  VALUES (NEW.label, NEW.owner, TG_OP, current_setting('application_name'), clock_timestamp());
  RETURN NEW;
END $$;
CREATE TRIGGER reliability_audit_lease AFTER INSERT OR UPDATE OR DELETE ON sweeprail.sweep_lock
  FOR EACH ROW EXECUTE FUNCTION reliability_audit_lease();
CREATE TABLE reliability_delete_audit (id bigserial PRIMARY KEY, tbl text NOT NULL, app text NOT NULL, at timestamptz NOT NULL);
CREATE FUNCTION reliability_audit_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO reliability_delete_audit (tbl, app, at) VALUES (TG_TABLE_NAME, current_setting('application_name'), clock_timestamp());
  RETURN NULL;
END $$;
CREATE TRIGGER reliability_audit_delete AFTER DELETE ON notifications FOR EACH STATEMENT EXECUTE FUNCTION reliability_audit_delete();
CREATE TRIGGER reliability_audit_delete AFTER DELETE ON refresh_tokens FOR EACH STATEMENT EXECUTE FUNCTION reliability_audit_delete();
`

// dbState is everything a refused request could have touched.
type dbState struct {
	notifications tableState
	leaseWrites   int64
	// nonces counts the replay store's records: a request whose signature passed records its
	// nonce there, the one write a refused body may cause.
	nonces  int64
	deletes int64
	// sessions lists the api's database sessions with the start of their last query: a new
	// connection or any query at all, even a read, changes it.
	sessions string
}

func snapshot(t *testing.T, pool *pgxpool.Pool, app string) dbState {
	t.Helper()
	return dbState{
		notifications: notificationsState(t, pool),
		leaseWrites:   scalar[int64](t, pool, `SELECT count(*) FROM reliability_lease_audit`),
		deletes:       scalar[int64](t, pool, `SELECT count(*) FROM reliability_delete_audit`),
		nonces:        scalar[int64](t, pool, `SELECT count(*) FROM sweeprail.replay_nonce`),
		sessions: scalar[string](t, pool, `SELECT coalesce(string_agg(pid || '@' || coalesce(query_start::text, '-'), ',' ORDER BY pid), '')
FROM pg_stat_activity WHERE application_name = $1`, app),
	}
}

// settle waits until every session of app is idle with the pool's reset as its last statement
// (or no statement yet). The api resets each connection as it is released (internal/dbpool), in
// a goroutine that may still be running after the answer of the request that released it has
// been read: a snapshot taken then would see the reset's query start move.
func settle(t *testing.T, pool *pgxpool.Pool, app string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for scalar[int64](t, pool, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1
  AND (state <> 'idle' OR (query <> '' AND query <> $2))`, app, dbpool.ResetSQL) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the api's sessions did not settle within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHostileRequests sends a real api the hostile requests of docs/RELIABILITY.md. Each is refused with
// its 4xx and its error code, and does nothing in the database: no lease written, no DELETE
// statement run, no row changed, and not one query sent by the api (its sessions' last-query
// times stay as they were) — except, for a request whose signature passed and whose body was
// refused, the record of its nonce in the shared replay store.
//
// The in-process tests of internal/httpapi cover the same ground and more (TestSignature,
// TestBadBodies: method and body tampering, malformed headers, two signature headers, media
// types) against httptest; this one proves the built binary, with the configuration it boots
// from, behaves the same, and adds what only a real process shows: rotation finished by a
// restart without INTERNAL_SIGNING_KEY_PREVIOUS.
func TestHostileRequests(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t)
	pool := openPool(t, u)
	exec1(t, pool, auditSQL)
	seedNotifications(t, pool, 50, 10)

	// Rotation in progress: the new key is current, the old one previous; the old one still
	// works. Then the rotation is finished the way an operator does it: a restart without
	// INTERNAL_SIGNING_KEY_PREVIOUS.
	const newKey = signingKey
	t.Run("previous key accepted during rotation", func(t *testing.T) {
		rotating := startAPI(t, "reliability-hostile-rotating", u, map[string]string{
			"INTERNAL_SIGNING_KEY": newKey, "INTERNAL_SIGNING_KEY_PREVIOUS": previousKey,
		})
		a := send(signed{key: previousKey, path: "/internal/sweep-notifications", body: `{"dryRun": true}`}.request(t, rotating.url))
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("HTTP %d %v: %s, want 200 for the previous key while it is configured", a.status, a.err, a.body)
		}
		if err := rotating.terminate(t, 10*time.Second); err != nil {
			t.Fatalf("rotating api exited with %v", err)
		}
	})
	api := startAPI(t, "reliability-hostile", u, map[string]string{"INTERNAL_SIGNING_KEY": newKey})

	const route = "/internal/sweep-notifications"
	cases := []struct {
		name string
		req  signed
		// setup runs before the state is taken: the first, legitimate, use of a nonce.
		setup  func(t *testing.T, s signed)
		status int
		code   string
		// signatureOK: the signature passes and the body is refused; the nonce is then recorded
		// in the replay store (and the api's sessions ran that one statement), nothing else.
		signatureOK bool
	}{
		{name: "oversized body", status: http.StatusRequestEntityTooLarge, code: "body_too_large",
			req: signed{path: route, body: `{"dryRun": false, "pad": "` + strings.Repeat("x", 64<<10) + `"}`}},
		{name: "body not JSON", status: http.StatusBadRequest, code: "bad_request", signatureOK: true,
			req: signed{path: route, body: `dryRun=false&batchSize=100`}},
		{name: "unknown field", status: http.StatusBadRequest, code: "bad_request", signatureOK: true,
			req: signed{path: route, body: `{"batchSize": 100, "force": true}`}},
		{name: "batchSize 0", status: http.StatusBadRequest, code: "bad_request", signatureOK: true,
			req: signed{path: route, body: `{"batchSize": 0}`}},
		{name: "batchSize negative", status: http.StatusBadRequest, code: "bad_request", signatureOK: true,
			req: signed{path: route, body: `{"batchSize": -100}`}},
		{name: "batchSize over the cap", status: http.StatusBadRequest, code: "bad_request", signatureOK: true,
			req: signed{path: route, body: `{"batchSize": 50001}`}},
		{name: "batchSize huge", status: http.StatusBadRequest, code: "bad_request", signatureOK: true,
			req: signed{path: route, body: `{"batchSize": 9223372036854775808}`}},
		{name: "signature made for another route", status: http.StatusUnauthorized, code: "bad_signature",
			req: signed{path: "/internal/sweep-refresh-tokens", sentPath: route, body: `{}`}},
		// The same, after its legitimate use: refused on the MAC before the replay cache sees it.
		{name: "signature used on one route, replayed on another", status: http.StatusUnauthorized, code: "bad_signature",
			req: signed{nonce: signing.NewNonce(), path: "/internal/sweep-refresh-tokens", sentPath: route, body: `{}`},
			setup: func(t *testing.T, s signed) {
				// Its legitimate use, on the route it was made for.
				s.sentPath = ""
				if a := send(s.request(t, api.url)); a.err != nil || a.status != http.StatusOK {
					t.Fatalf("use on its own route: HTTP %d %v: %s", a.status, a.err, a.body)
				}
			}},
		{name: "query string added after signing", status: http.StatusUnauthorized, code: "bad_signature",
			req: signed{path: route, sentQ: "batchSize=50000", body: `{}`}},
		{name: "previous key after rotation finished", status: http.StatusUnauthorized, code: "bad_signature",
			req: signed{key: previousKey, path: route, body: `{}`}},
		{name: "timestamp 10 minutes old", status: http.StatusUnauthorized, code: "stale_timestamp",
			req: signed{at: time.Now().Add(-10 * time.Minute), path: route, body: `{}`}},
		{name: "timestamp 10 minutes ahead", status: http.StatusUnauthorized, code: "stale_timestamp",
			req: signed{at: time.Now().Add(10 * time.Minute), path: route, body: `{}`}},
		{name: "same nonce twice", status: http.StatusUnauthorized, code: "replayed",
			req: signed{nonce: signing.NewNonce(), path: route, body: `{}`},
			setup: func(t *testing.T, s signed) {
				// The first use is legitimate and runs; then there is work again for the replay
				// to do, had it been let through.
				if a := send(s.request(t, api.url)); a.err != nil || a.status != http.StatusOK {
					t.Fatalf("first use: HTTP %d %v: %s", a.status, a.err, a.body)
				}
				seedNotifications(t, pool, 50, 0)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.at.IsZero() {
				tc.req.at = time.Now()
			}
			if tc.setup != nil {
				tc.setup(t, tc.req)
			}
			settle(t, pool, api.app)
			before := snapshot(t, pool, api.app)
			if before.notifications.eligible == 0 {
				t.Fatal("no eligible rows: a request let through would prove nothing")
			}
			req := tc.req.request(t, api.url)
			if len(tc.req.body) > 1<<10 {
				// The server refuses a body over its cap from Content-Length, unread, and closes
				// the connection: a client still writing it could see the reset before the 413.
				req.Header.Set("Expect", "100-continue")
			}
			a := send(req)
			if a.err != nil {
				t.Fatal(a.err)
			}
			if a.status != tc.status {
				t.Fatalf("HTTP %d, want %d: %s", a.status, tc.status, a.body)
			}
			if code, msg := a.envelope(t); code != tc.code || msg == "" {
				t.Errorf("error %q %q, want %q with a message", code, msg, tc.code)
			}
			after := snapshot(t, pool, api.app)
			if tc.signatureOK {
				if after.nonces != before.nonces+1 {
					t.Errorf("%d nonces recorded, want the one of the signature that passed", after.nonces-before.nonces)
				}
				before.nonces, before.sessions = after.nonces, after.sessions
			}
			if after != before {
				t.Errorf("the refused request touched the database:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
	t.Logf("%d hostile requests tried", len(cases))
}
