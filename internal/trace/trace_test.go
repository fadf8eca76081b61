package trace

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sweeprail/sweeprail/internal/otlptest"
)

// TestNew covers when tracing is on and which configurations are refused.
func TestNew(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		for name, environ := range map[string]map[string]string{
			"no endpoint":       {},
			"empty endpoint":    {"OTEL_EXPORTER_OTLP_ENDPOINT": ""},
			"only other OTEL_*": {"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"},
			"SDK disabled":      {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "TRUE"},
		} {
			t.Run(name, func(t *testing.T) {
				tr, err := New(context.Background(), environ, "sweeprail-api", nil)
				if err != nil {
					t.Fatal(err)
				}
				if tr.Enabled() {
					t.Error("Enabled() = true")
				}
				next := &nopHandler{}
				if h := tr.Handler(next); h != http.Handler(next) {
					t.Errorf("Handler wrapped the handler: %T", h)
				}
				ctx, span := tr.StartRun(context.Background(), "s", "r")
				if span.span.IsRecording() || TraceID(ctx) != "" {
					t.Error("a span of the off tracing records or has a trace id")
				}
				span.End(Result{Rows: 1})
				if err := tr.Shutdown(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
	})

	t.Run("the process environment is not read", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
		tr, err := New(context.Background(), map[string]string{}, "sweeprail-api", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Enabled() {
			t.Error("tracing is on from os.Getenv, not from the environ map")
		}
	})

	t.Run("on", func(t *testing.T) {
		for name, environ := range map[string]map[string]string{
			"endpoint":        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			"traces endpoint": {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector/v1/traces"},
			"everything": {
				"OTEL_SDK_DISABLED":                 "false",
				"OTEL_EXPORTER_OTLP_ENDPOINT":       "https://user:pw@collector:4318/otlp",
				"OTEL_EXPORTER_OTLP_HEADERS":        "authorization=Bearer%20x, x-scope = ops",
				"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2500",
				"OTEL_EXPORTER_OTLP_COMPRESSION":    "gzip",
				"OTEL_EXPORTER_OTLP_PROTOCOL":       "http/json",
				"OTEL_SERVICE_NAME":                 "api-eu",
				"OTEL_RESOURCE_ATTRIBUTES":          "deployment.environment=prod,service.version=1.2",
				"OTEL_TRACES_SAMPLER":               "parentbased_traceidratio",
				"OTEL_TRACES_SAMPLER_ARG":           "0.25",
			},
		} {
			t.Run(name, func(t *testing.T) {
				tr, err := New(context.Background(), environ, "sweeprail-api", nil)
				if err != nil {
					t.Fatal(err)
				}
				if !tr.Enabled() {
					t.Error("Enabled() = false")
				}
				// Nothing was exported, so shutting down sends nothing to the absent collector.
				if err := tr.Shutdown(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
	})

	t.Run("refused", func(t *testing.T) {
		on := "OTEL_EXPORTER_OTLP_ENDPOINT"
		for _, tc := range []struct {
			name    string
			environ map[string]string
			want    []string
			// hidden must not appear in the error: a credential.
			hidden string
		}{
			{"no scheme", map[string]string{on: "collector:4318"}, []string{on, "collector:4318"}, ""},
			{"grpc scheme", map[string]string{on: "grpc://collector:4317"}, []string{on}, ""},
			{"password hidden", map[string]string{on: "ftp://u:hunter2@collector"}, []string{on, "u:xxxxx@"}, "hunter2"},
			{"traces endpoint wins", map[string]string{on: "http://ok:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "nope"}, []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}, ""},
			{"timeout", map[string]string{on: "http://c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, []string{"OTEL_EXPORTER_OTLP_TIMEOUT", `"10s"`, "milliseconds"}, ""},
			{"zero timeout", map[string]string{on: "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "0"}, []string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"}, ""},
			{"compression", map[string]string{on: "http://c:4318", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, []string{"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"}, ""},
			{"grpc", map[string]string{on: "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc is not built in"}, ""},
			{"headers", map[string]string{on: "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer s3cret,broken"}, []string{"OTEL_EXPORTER_OTLP_HEADERS", "element 2"}, "s3cret"},
			{"header encoding", map[string]string{on: "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=%zzs3cret"}, []string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key"}, "s3cret"},
			{"sampler", map[string]string{on: "http://c:4318", "OTEL_TRACES_SAMPLER": "sometimes"}, []string{"OTEL_TRACES_SAMPLER", "sometimes"}, ""},
			{"sampler arg", map[string]string{on: "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, []string{"OTEL_TRACES_SAMPLER_ARG", `"2"`}, ""},
			{"resource", map[string]string{on: "http://c:4318", "OTEL_RESOURCE_ATTRIBUTES": "a=b,c"}, []string{"OTEL_RESOURCE_ATTRIBUTES", "element 2"}, ""},
			{"certificate file", map[string]string{on: "https://c:4318", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"}, []string{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem"}, ""},
			{"client cert without key", map[string]string{on: "https://c:4318", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/c.pem"}, []string{"OTEL_EXPORTER_OTLP_CLIENT_KEY", "together"}, ""},
			{"disabled", map[string]string{"OTEL_SDK_DISABLED": "yes"}, []string{"OTEL_SDK_DISABLED", `"yes"`}, ""},
			{"every problem at once", map[string]string{on: "c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "x", "OTEL_TRACES_SAMPLER": "y"},
				[]string{on, "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_TRACES_SAMPLER"}, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := New(context.Background(), tc.environ, "sweeprail-api", nil)
				if err == nil {
					t.Fatal("accepted")
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if tc.hidden != "" && strings.Contains(err.Error(), tc.hidden) {
					t.Errorf("error %q shows the secret %q", err, tc.hidden)
				}
			})
		}
	})
}

type nopHandler struct{}

func (*nopHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

// TestExport sends spans to a real OTLP/HTTP receiver, configured only by the environ map: the
// endpoint and its path, headers, compression and service name all come from the map, and the
// process environment, set to other values, loses to it.
func TestExport(t *testing.T) {
	for _, tc := range []struct {
		name     string
		environ  func(url string) map[string]string
		wantPath string
	}{
		{"base endpoint", func(u string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u + "/base"}
		}, "/base/v1/traces"},
		{"traces endpoint as given", func(u string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://unused:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": u + "/custom"}
		}, "/custom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The exporter would read these itself; the explicit options from the map win.
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=from-process")
			t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "none")
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/process")
			c := otlptest.New(t)
			environ := tc.environ(c.URL)
			environ["OTEL_EXPORTER_OTLP_HEADERS"] = "authorization=Bearer%20s3cret,x-tenant=ops"
			environ["OTEL_EXPORTER_OTLP_COMPRESSION"] = "gzip"
			environ["OTEL_SERVICE_NAME"] = "api-test"
			environ["OTEL_RESOURCE_ATTRIBUTES"] = "deployment.environment=ci"
			tr, err := New(context.Background(), environ, "sweeprail-api", nil)
			if err != nil {
				t.Fatal(err)
			}
			_, span := tr.StartRun(context.Background(), "notifications", "run-1")
			span.End(Result{Rows: 3, StopReason: "exhausted"})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tr.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			got := c.Exports()
			if len(got) != 1 {
				t.Fatalf("the collector got %d exports, want 1", len(got))
			}
			e := got[0]
			if e.Err != nil {
				t.Fatalf("decode the export: %v", e.Err)
			}
			if e.Path != tc.wantPath {
				t.Errorf("path %q, want %q", e.Path, tc.wantPath)
			}
			for k, want := range map[string]string{
				"Authorization":    "Bearer s3cret",
				"X-Tenant":         "ops",
				"Content-Encoding": "gzip",
				"Content-Type":     "application/x-protobuf",
			} {
				if v := e.Header.Get(k); v != want {
					t.Errorf("header %s = %q, want %q", k, v, want)
				}
			}
			rs := e.Req.GetResourceSpans()
			if len(rs) != 1 {
				t.Fatalf("%d resource spans", len(rs))
			}
			res := map[string]string{}
			for _, kv := range rs[0].GetResource().GetAttributes() {
				res[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			if res["service.name"] != "api-test" || res["deployment.environment"] != "ci" {
				t.Errorf("resource %v, want service.name=api-test deployment.environment=ci", res)
			}
			var names []string
			for _, ss := range rs[0].GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names = append(names, s.GetName())
				}
			}
			if len(names) != 1 || names[0] != SpanRun {
				t.Errorf("spans %q, want [%s]", names, SpanRun)
			}
		})
	}
}

// TestShutdownFlushBounded: a collector that never answers does not hold Shutdown past its
// context.
func TestShutdownFlushBounded(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	tr, err := New(context.Background(), map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}, "sweeprail-api", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.StartRun(context.Background(), "s", "r")
	span.End(Result{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tr.Shutdown(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Shutdown reported success although nothing was exported")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown outlived its context by 30s")
	}
}

func TestHeadersParse(t *testing.T) {
	h, err := parseHeaders(" a = 1 ,b=x%20y%2Cz,c=")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "1", "b": "x y,z", "c": ""}; !maps.Equal(h, want) {
		t.Errorf("parseHeaders = %v, want %v", h, want)
	}
}
