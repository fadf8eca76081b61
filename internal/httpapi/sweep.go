package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/trace"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// sweepRequest is the body of POST /internal/sweep-<name>; both fields are optional.
type sweepRequest struct {
	DryRun bool
	// BatchSize is 0 when absent: the runner's setting applies.
	BatchSize int
}

// handleSweep serves POST /internal/sweep-<name>: a run, or with dryRun a count.
//
// The run goes under runCtx, not the request's context: a client that goes away must not cut a
// run midway (its deadline bounds it), and shutdown cancels runCtx so the run stops between
// batches and answers. A run that failed a batch answers 500 with the same body as a good one,
// since the body is what an operator needs to see the failure.
func handleSweep(logger *slog.Logger, runner *sweep.Runner, runCtx context.Context, dryRuns *dryRunSlots) http.Handler {
	known := map[string]bool{}
	for _, s := range runner.Specs() {
		known[s.Name] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "name")
		if !known[name] {
			writeError(w, r, logger, newError(http.StatusNotFound, codeUnknownSweep,
				"no sweep %q in the catalog: GET /internal/sweeps lists them", name))
			return
		}
		req, err := readSweepRequest(w, r)
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		// A server that is stopping starts nothing new: the caller retries on the next tick,
		// against a replica that is not going away.
		if runCtx.Err() != nil {
			w.Header().Set("Connection", "close")
			writeError(w, r, logger, newError(http.StatusServiceUnavailable, codeShuttingDown,
				"the server is shutting down; retry on the next tick"))
			return
		}
		if req.DryRun {
			serveDryRun(w, r, logger, runner, runCtx, name, dryRuns)
			return
		}
		// The run's spans join the request's trace; its cancellation stays runCtx's.
		res, err := runner.Run(trace.WithSpanFrom(runCtx, r.Context()), name,
			sweep.Options{BatchSize: req.BatchSize, RequestID: requestIDFrom(r.Context())})
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		status := http.StatusOK
		if res.Failed() {
			status = http.StatusInternalServerError
		}
		writeJSON(w, r, logger, status, res)
	})
}

// serveDryRun answers a count. It only reads, so unlike a run it may be cut: by a client that
// goes away, or by shutdown, which then need not wait for counts bounded only by COUNT_TIMEOUT.
func serveDryRun(w http.ResponseWriter, r *http.Request, logger *slog.Logger, runner *sweep.Runner, runCtx context.Context, name string, dryRuns *dryRunSlots) {
	if !dryRuns.acquire() {
		dryRuns.refuse(w, r, logger)
		return
	}
	defer dryRuns.release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(runCtx, cancel)
	defer stop()
	res, err := runner.DryRun(ctx, name)
	switch {
	case err == nil:
		writeJSON(w, r, logger, http.StatusOK, res)
	case errors.Is(err, sweep.ErrUnknownSweep):
		writeError(w, r, logger, err)
	case runCtx.Err() != nil:
		writeError(w, r, logger, newError(http.StatusServiceUnavailable, codeShuttingDown,
			"the server shut down during the dry run; retry"))
	default:
		// The caller is an operator holding the signing key; the database's own words are what
		// they need to fix a failing count.
		writeError(w, r, logger, &apiError{status: http.StatusInternalServerError, code: codeDryRunFailed,
			message: err.Error(), err: err})
	}
}

// readSweepRequest checks the Content-Type and decodes the body: empty is {}; otherwise exactly
// one JSON object with only the known fields, each once, with their exact names.
func readSweepRequest(w http.ResponseWriter, r *http.Request) (sweepRequest, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return sweepRequest{}, newError(http.StatusUnsupportedMediaType, codeUnsupportedMedia,
				"Content-Type %q is not accepted: send application/json, or no body", ct)
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return sweepRequest{}, err
		}
		return sweepRequest{}, badRequest("read the request body: %v", err)
	}
	return decodeSweepRequest(body)
}

// decodeSweepRequest decodes token by token rather than into a struct: encoding/json matches
// field names case-insensitively and lets a repeated key win silently, and in a request that
// chooses between deleting and counting, {"dryRun": true, "dryRun": false} must be refused,
// not guessed.
func decodeSweepRequest(body []byte) (sweepRequest, error) {
	var req sweepRequest
	// JSON's whitespace only: bytes.TrimSpace would also take \v or U+0085 for nothing.
	if len(bytes.Trim(body, " \t\r\n")) == 0 {
		return req, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return req, jsonError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return req, badRequest(`the body must be one JSON object such as {"dryRun": true}`)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return req, jsonError(err)
		}
		key, _ := tok.(string) // inside an object, More then Token yields a key
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return req, jsonError(err)
		}
		if seen[key] {
			return req, badRequest("field %q is given twice", key)
		}
		seen[key] = true
		switch key {
		case "dryRun":
			if err := json.Unmarshal(raw, &req.DryRun); err != nil || string(raw) == "null" {
				return req, badRequest("dryRun: want true or false, got %s", clip(raw))
			}
		case "batchSize":
			n, err := strconv.Atoi(string(raw))
			if err != nil || n < wire.MinRequestBatchSize || n > wire.MaxRequestBatchSize {
				return req, badRequest("batchSize: want a whole number within %d..%d, got %s",
					wire.MinRequestBatchSize, wire.MaxRequestBatchSize, clip(raw))
			}
			req.BatchSize = n
		default:
			return req, badRequest("unknown field %q: the body takes dryRun and batchSize", clip([]byte(key)))
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return req, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, badRequest("the body must hold exactly one JSON object, and it holds more")
	}
	return req, nil
}

// jsonError describes a JSON syntax error for the client.
func jsonError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return badRequest("the body is not valid JSON: %v (at byte %d)", err, se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest("the body is cut short: not a whole JSON object")
	}
	return badRequest("the body is not valid JSON: %v", err)
}

// clip shortens a client's value for a message: it is echoed back, and may be anything.
func clip(b []byte) string {
	const limit = 40
	if len(b) <= limit {
		return string(b)
	}
	return string(b[:limit]) + "…"
}
