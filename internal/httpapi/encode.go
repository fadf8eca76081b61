package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/sweep"
)

// The error codes of the envelope that are not a signing.Reason.
const (
	codeBadRequest           = "bad_request"
	codeBodyTooLarge         = "body_too_large"
	codeUnsupportedMedia     = "unsupported_media_type"
	codeNotFound             = "not_found"
	codeMethodNotAllowed     = "method_not_allowed"
	codeUnknownSweep         = "unknown_sweep"
	codeSigningNotConfigured = "signing_not_configured"
	codeShuttingDown         = "shutting_down"
	codeDryRunFailed         = "dry_run_failed"
	codeDatabaseUnreachable  = "database_unreachable"
	codeMigrationsPending    = "migrations_pending"
	codePolicyTablesMissing  = "policy_tables_missing"
	codeInternal             = "internal"
	codeBodyTimeout          = "body_timeout"
	codeUnexpectedQuery      = "unexpected_query"
	codeBusy                 = "busy"
)

// errorBody is the one error envelope of the API.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// apiError is an error that knows its answer. Handlers return these for what the client did
// wrong; anything else reaching writeError is an internal error.
type apiError struct {
	status  int
	code    string
	message string
	// err is the cause, logged but not shown.
	err error
}

func (e *apiError) Error() string {
	if e.err != nil {
		return e.code + ": " + e.message + ": " + e.err.Error()
	}
	return e.code + ": " + e.message
}

func (e *apiError) Unwrap() error { return e.err }

func newError(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, codeBadRequest, format, args...)
}

// signatureMessages explain each refusal to the client. The verifier's Detail goes to the log
// only: it is precise about what failed, which helps an operator and would help a forger.
var signatureMessages = map[signing.Reason]string{
	signing.ReasonMissing:   "the request has no " + signing.Header + " header",
	signing.ReasonMalformed: "the " + signing.Header + " header does not parse",
	signing.ReasonStale:     "the signature's timestamp is outside the accepted window: check the clocks",
	signing.ReasonBad:       "the signature does not match: check the signing key",
	signing.ReasonReplayed:  "this signature was already used: sign every request afresh",
}

// errorAnswer maps an error to its status and envelope: the one error-to-status table of the API.
func errorAnswer(err error) (int, errorBody) {
	var (
		ae  *apiError
		se  *signing.Error
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &ae):
		return ae.status, errorBody{Error: ae.code, Message: ae.message}
	case errors.As(err, &se):
		msg, ok := signatureMessages[se.Reason]
		if !ok {
			msg = "the signature was refused"
		}
		return http.StatusUnauthorized, errorBody{Error: string(se.Reason), Message: msg}
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, errorBody{Error: codeBodyTooLarge,
			Message: fmt.Sprintf("the request body is over the %d byte limit", mbe.Limit)}
	case errors.Is(err, signing.ErrReplayStore):
		// The nonce is checked in PostgreSQL: while the database is unreachable no signed
		// request can be admitted, and nothing ran; a scheduler retries a 503.
		return http.StatusServiceUnavailable, errorBody{Error: codeDatabaseUnreachable,
			Message: "the replay check could not reach the database, so the signed request was refused and nothing ran: retry when it answers"}
	case errors.Is(err, sweep.ErrUnknownSweep):
		return http.StatusNotFound, errorBody{Error: codeUnknownSweep, Message: "no such sweep: GET /internal/sweeps lists the catalog"}
	}
	return http.StatusInternalServerError, errorBody{Error: codeInternal, Message: "internal error; the server log has the details"}
}

// writeError answers err as its envelope. Server-side failures are logged with their cause;
// client mistakes are already in the access log.
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	status, body := errorAnswer(err)
	if status >= 500 {
		logger.Error("request failed", "request_id", requestIDFrom(r.Context()), "status", status, "code", body.Error, "err", err)
	}
	if status == http.StatusUnauthorized {
		// RFC 9110 asks a 401 to name the scheme that would succeed.
		w.Header().Set("WWW-Authenticate", signing.Header)
	}
	writeJSON(w, r, logger, status, body)
}

// writeJSON answers v as JSON with status: the one place that encodes an answer. It marshals
// before writing the header, so a value that fails to encode still becomes a proper 500.
func writeJSON(w http.ResponseWriter, r *http.Request, logger *slog.Logger, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		logger.Error("encode answer", "request_id", requestIDFrom(r.Context()), "err", err)
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal","message":"the answer could not be encoded"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	// A sweep answer is one run's, a readiness answer is this instant's: neither may be cached.
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// A failed write means the client went away or the write timeout passed; nothing to answer.
	_, _ = w.Write(append(b, '\n'))
}

// slogErrorLog adapts a slog.Logger to promhttp's error log.
type slogErrorLog struct{ logger *slog.Logger }

func (l slogErrorLog) Println(v ...any) {
	l.logger.Error("metrics exposition", "err", fmt.Sprint(v...))
}
