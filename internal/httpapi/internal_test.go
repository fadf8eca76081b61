package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sweeprail/sweeprail/internal/dbpool"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/signing"
	"github.com/sweeprail/sweeprail/internal/sweep"
	"github.com/sweeprail/sweeprail/internal/wire"
)

// TestRecoverPanic: a panic before the answer began answers the 500 envelope and is logged; one
// after it began aborts the connection, so the client never takes a cut answer for a whole one.
func TestRecoverPanic(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler http.HandlerFunc
		// aborted: the client must see a broken answer, not a status.
		aborted bool
	}{
		{"before the answer", func(http.ResponseWriter, *http.Request) { panic("boom") }, false},
		{"after the answer began", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"partial":`)
			w.(http.Flusher).Flush()
			panic("boom")
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			logger := slog.New(slog.NewJSONHandler(&logs, nil))
			h := requestID(accessLog(logger, time.Now)(recoverPanic(logger)(tc.handler)))
			srv := httptest.NewServer(h)
			// The test server logs the aborted connection; keep the output clean.
			srv.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
			defer srv.Close()

			resp, err := http.Get(srv.URL)
			if tc.aborted {
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				if err == nil {
					t.Fatal("the client read a whole answer from a handler that panicked midway")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body errorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusInternalServerError || body.Error != codeInternal || body.Message == "" {
				t.Errorf("HTTP %d %+v, want 500 internal", resp.StatusCode, body)
			}
			if !strings.Contains(logs.String(), `"msg":"panic"`) || !strings.Contains(logs.String(), `"status":500`) {
				t.Errorf("panic not logged as a 500:\n%s", logs.String())
			}
		})
	}
}

// TestErrorAnswer covers the error-to-status table for errors no route test reaches.
func TestErrorAnswer(t *testing.T) {
	t.Parallel()
	status, body := errorAnswer(errors.New("something internal with a secret"))
	if status != http.StatusInternalServerError || body.Error != codeInternal || strings.Contains(body.Message, "secret") {
		t.Errorf("an unexpected error answers %d %+v, want 500 internal without its text", status, body)
	}
}

// FuzzDecodeSweepRequest: no body makes the decoder panic, and whatever it accepts is in range.
func FuzzDecodeSweepRequest(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"dryRun":true}`, `{"batchSize":100}`, `{"batchSize":0}`, `{} {}`, `[`, `{"a":`, `null`, `{"dryRun":true,"dryRun":false}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeSweepRequest(body)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != http.StatusBadRequest {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		if req.BatchSize != 0 && (req.BatchSize < wire.MinRequestBatchSize || req.BatchSize > wire.MaxRequestBatchSize) {
			t.Fatalf("accepted batchSize %d", req.BatchSize)
		}
		if !json.Valid(body) && strings.Trim(string(body), " \t\r\n") != "" {
			t.Fatalf("accepted invalid JSON %q", body)
		}
	})
}

// TestEnsureSigned: the /internal router checks the signature itself when a request reaches it
// without passing signInternal (here: a mux built without it), and does not check twice a
// request that did pass (a second check would refuse it as replayed).
func TestEnsureSigned(t *testing.T) {
	const key = "ensure-signed-test-key-0123456789abcdef"
	pool, err := dbpool.NewPool(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1") // never connects
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	settings := sweep.Settings{Deadline: time.Minute, StatementTimeout: time.Second, LockTimeout: time.Second, CountTimeout: time.Second,
		BatchSize: 1000, MinBatchSize: 100, MaxBatchSize: 20000, BatchTarget: 100 * time.Millisecond, MaxBatches: 10}
	runner, err := sweep.NewRunner(sweep.Config{Pool: pool, Specs: policy.Catalog(), Settings: settings, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	deps := Deps{Logger: slog.New(slog.DiscardHandler), Runner: runner,
		Verifier: signing.NewVerifier([][]byte{[]byte(key)}, time.Minute, time.Now, 10), MaxDryRuns: 1, BodyTimeout: time.Second}
	check := requireSignature(deps.Logger, deps.Verifier, nil, deps.BodyTimeout, nil)

	bare := chi.NewRouter() // no signInternal in front
	addRoutes(bare, deps, check)
	full := chi.NewRouter()
	full.Use(signInternal(check))
	addRoutes(full, deps, check)

	for name, h := range map[string]http.Handler{"without signInternal": bare, "with signInternal": full} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/internal/sweeps", nil))
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("unsigned: HTTP %d, want 401: %s", rec.Code, rec.Body)
			}
			req := httptest.NewRequest(http.MethodGet, "/internal/sweeps", nil)
			signing.SignRequest(req, nil, []byte(key), time.Now())
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Errorf("signed: HTTP %d, want 200: %s", rec.Code, rec.Body)
			}
		})
	}
}
