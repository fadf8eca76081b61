package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/nonce"
)

// TestReplayStoreUnreachable: the nonce of a signed request is checked in PostgreSQL, so while the
// database does not answer, a sweep route refuses the request, unrun, with 503
// database_unreachable (a scheduler retries it), not an internal error.
func TestReplayStoreUnreachable(t *testing.T) {
	t.Parallel()
	// A real store on a pool whose server is gone: nothing listens on port 1.
	dead, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	h := newHarness(t, func(o *options) { o.replayStore = nonce.New(dead) })
	h.seedNotifications(7)

	a := h.signed(http.MethodPost, "/internal/sweep-notifications", `{}`)
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("HTTP %d, want 503: %s", a.status, a.body)
	}
	if code, msg := envelope(t, a); code != "database_unreachable" || !strings.Contains(msg, "nothing ran") {
		t.Errorf("error %q %q, want database_unreachable saying nothing ran", code, msg)
	}
	if n := h.eligibleNotifications(); n != 7 {
		t.Errorf("eligible notifications went from 7 to %d", n)
	}
	if n := h.count(`SELECT count(*) FROM lease_audit`); n != 0 {
		t.Errorf("a request refused by the replay check took the lease")
	}
}
