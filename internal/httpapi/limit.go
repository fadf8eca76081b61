package httpapi

import (
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"
)

// dryRunSlots bounds the dry runs counting at once. Each holds a pooled connection for up to
// COUNT_TIMEOUT per statement, and nothing else bounds how many a key holder starts: fifty at
// once took every connection of the pool the runs need. Past the cap a dry run answers 429 at
// once rather than queueing for a connection.
type dryRunSlots struct {
	slots chan struct{}
	// retryAfter is the Retry-After of a 429, in seconds: the count timeout, the longest a slot's
	// count may take.
	retryAfter string
}

func newDryRunSlots(n int, countTimeout time.Duration) *dryRunSlots {
	secs := max(1, int64(math.Ceil(countTimeout.Seconds())))
	return &dryRunSlots{slots: make(chan struct{}, n), retryAfter: strconv.FormatInt(secs, 10)}
}

// acquire takes a slot without waiting; false when every slot is taken.
func (s *dryRunSlots) acquire() bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// release gives back a slot that acquire took.
func (s *dryRunSlots) release() { <-s.slots }

// refuse answers 429 busy, with the Retry-After RFC 9110 pairs with it.
func (s *dryRunSlots) refuse(w http.ResponseWriter, r *http.Request, logger *slog.Logger) {
	w.Header().Set("Retry-After", s.retryAfter)
	writeError(w, r, logger, newError(http.StatusTooManyRequests, codeBusy,
		"%d dry runs are counting already, the most this server runs at once (MAX_CONCURRENT_DRY_RUNS); retry in %ss",
		cap(s.slots), s.retryAfter))
}

// refuseQuery refuses a request that carries a query string, even an empty one ("?"): a sweep
// route takes its options in the JSON body only, and an operator's ?dryRun=true, signed with its
// query, was a real run that deleted rows. It runs after the signature, so an unsigned caller
// learns nothing from it.
func refuseQuery(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.RawQuery != "" || r.URL.ForceQuery {
				writeError(w, r, logger, newError(http.StatusBadRequest, codeUnexpectedQuery,
					`a sweep route takes no query string (got %q): send options in the JSON body, such as {"dryRun": true}`,
					clip([]byte(r.URL.RawQuery))))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
