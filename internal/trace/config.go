package trace

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// variables are the OTEL_* variables this package reads. Each exporter setting has a general
// form and a TRACES_ form, which wins when both are set, as the OpenTelemetry specification says.
type variables struct {
	SDKDisabled string `env:"OTEL_SDK_DISABLED"`

	Endpoint       string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	TracesEndpoint string `env:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"`
	// Headers hold credentials (an Authorization header, an API key): never shown in an error.
	Headers                 string `env:"OTEL_EXPORTER_OTLP_HEADERS"`
	TracesHeaders           string `env:"OTEL_EXPORTER_OTLP_TRACES_HEADERS"`
	Timeout                 string `env:"OTEL_EXPORTER_OTLP_TIMEOUT"`
	TracesTimeout           string `env:"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"`
	Compression             string `env:"OTEL_EXPORTER_OTLP_COMPRESSION"`
	TracesCompression       string `env:"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"`
	Protocol                string `env:"OTEL_EXPORTER_OTLP_PROTOCOL"`
	TracesProtocol          string `env:"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"`
	Certificate             string `env:"OTEL_EXPORTER_OTLP_CERTIFICATE"`
	TracesCertificate       string `env:"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"`
	ClientCertificate       string `env:"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"`
	TracesClientCertificate string `env:"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE"`
	ClientKey               string `env:"OTEL_EXPORTER_OTLP_CLIENT_KEY"`
	TracesClientKey         string `env:"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"`

	ServiceName        string `env:"OTEL_SERVICE_NAME"`
	ResourceAttributes string `env:"OTEL_RESOURCE_ATTRIBUTES"`
	Sampler            string `env:"OTEL_TRACES_SAMPLER"`
	SamplerArg         string `env:"OTEL_TRACES_SAMPLER_ARG"`
}

// Variables returns the names of every variable New reads, for checks that a deployment sets
// no variable the binaries ignore.
func Variables() []string {
	return []string{
		"OTEL_SDK_DISABLED",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
		"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
		"OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
		"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	}
}

// config is what New builds the provider from.
type config struct {
	enabled  bool
	exporter []otlptracehttp.Option
	resource *resource.Resource
	sampler  sdktrace.Sampler
}

// loadConfig reads and checks the variables, reporting every problem at once. The exporter
// options set every setting explicitly, so the exporter's own reading of the process
// environment never applies.
func loadConfig(environ map[string]string, service string) (config, error) {
	var v variables
	if err := env.ParseWithOptions(&v, env.Options{Environment: environ}); err != nil {
		return config{}, fmt.Errorf("tracing: %w", err)
	}
	var errs []error
	addf := func(format string, args ...any) { errs = append(errs, fmt.Errorf("tracing: "+format, args...)) }

	var c config
	switch strings.ToLower(strings.TrimSpace(v.SDKDisabled)) {
	case "", "false":
	case "true":
		return c, nil
	default:
		addf("OTEL_SDK_DISABLED=%q: want true or false", v.SDKDisabled)
	}
	if v.Endpoint == "" && v.TracesEndpoint == "" {
		return c, errors.Join(errs...)
	}
	c.enabled = true

	endpoint, err := endpointURL(v.Endpoint, v.TracesEndpoint)
	if err != nil {
		addf("%w", err)
	}
	c.exporter = append(c.exporter, otlptracehttp.WithEndpointURL(endpoint))

	name, raw := pick("HEADERS", v.Headers, v.TracesHeaders)
	headers, err := parseHeaders(raw)
	if err != nil {
		addf("%s: %w", name, err)
	}
	c.exporter = append(c.exporter, otlptracehttp.WithHeaders(headers))

	timeout := 10 * time.Second
	if name, raw := pick("TIMEOUT", v.Timeout, v.TracesTimeout); raw != "" {
		ms, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil || ms <= 0 {
			addf("%s=%q: want a positive number of milliseconds", name, raw)
		} else {
			timeout = time.Duration(ms) * time.Millisecond
		}
	}
	c.exporter = append(c.exporter, otlptracehttp.WithTimeout(timeout))

	compression := otlptracehttp.NoCompression
	switch name, raw := pick("COMPRESSION", v.Compression, v.TracesCompression); raw {
	case "", "none":
	case "gzip":
		compression = otlptracehttp.GzipCompression
	default:
		addf("%s=%q: want gzip or none", name, raw)
	}
	c.exporter = append(c.exporter, otlptracehttp.WithCompression(compression))

	encoding := otlptracehttp.EncodingProtobuf
	switch name, raw := pick("PROTOCOL", v.Protocol, v.TracesProtocol); raw {
	case "", "http/protobuf":
	case "http/json":
		encoding = otlptracehttp.EncodingJSON
	default:
		// grpc would need the gRPC exporter and its dependencies, for no gain over HTTP.
		addf("%s=%q: want http/protobuf or http/json (grpc is not built in)", name, raw)
	}
	c.exporter = append(c.exporter, otlptracehttp.WithEncoding(encoding))

	// The exporter refuses a TLS configuration for an http:// endpoint, so one is given only for
	// https://, where it also keeps the exporter from reading certificate files named in the
	// process environment.
	if strings.HasPrefix(endpoint, "https://") {
		tlsCfg, err := tlsConfig(v)
		if err != nil {
			addf("%w", err)
		}
		c.exporter = append(c.exporter, otlptracehttp.WithTLSClientConfig(tlsCfg))
	} else if endpoint != "" {
		for _, n := range []string{"CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
			if name, file := pick(n, environ["OTEL_EXPORTER_OTLP_"+n], environ["OTEL_EXPORTER_OTLP_TRACES_"+n]); file != "" {
				addf("%s=%q: the endpoint is http://, which uses no TLS", name, file)
			}
		}
	}

	c.resource, err = buildResource(service, v.ServiceName, v.ResourceAttributes)
	if err != nil {
		addf("%w", err)
	}
	c.sampler, err = sampler(v.Sampler, v.SamplerArg)
	if err != nil {
		addf("%w", err)
	}
	return c, errors.Join(errs...)
}

// pick returns the TRACES_ form of a setting when set, else the general one, with the name of the
// variable it came from.
func pick(suffix, general, traces string) (string, string) {
	if traces != "" {
		return "OTEL_EXPORTER_OTLP_TRACES_" + suffix, traces
	}
	return "OTEL_EXPORTER_OTLP_" + suffix, general
}

// endpointURL is where spans go. The general endpoint is a base URL to which /v1/traces is
// appended; the TRACES_ one is used as given (its empty path meaning /), as the specification says.
func endpointURL(base, traces string) (string, error) {
	name, raw := pick("ENDPOINT", base, traces)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%s=%q: want an http:// or https:// URL with a host, such as http://otel-collector:4318", name, redact(raw))
	}
	if traces != "" {
		if u.Path == "" {
			u.Path = "/"
		}
	} else {
		u.Path = path.Join("/", u.Path, "v1/traces")
	}
	return u.String(), nil
}

// redact drops a URL's password, which a collector URL may carry.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}

// parseHeaders reads "key=value,key2=value2" with percent-encoded values. Errors name the element
// by position, never its value, which is often a credential.
func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return h, nil
	}
	for i, el := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(el, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("element %d is not key=value", i+1)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("element %d (%s): value is not percent-encoded", i+1, k)
		}
		h[k] = val
	}
	return h, nil
}

// tlsConfig reads the CA and client certificate files. Without them it returns the default
// configuration, which verifies against the system roots.
func tlsConfig(v variables) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if name, file := pick("CERTIFICATE", v.Certificate, v.TracesCertificate); file != "" {
		pem, err := os.ReadFile(file)
		if err != nil {
			return cfg, fmt.Errorf("%s=%q: %w", name, file, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return cfg, fmt.Errorf("%s=%q: no PEM certificate in the file", name, file)
		}
		cfg.RootCAs = pool
	}
	certName, cert := pick("CLIENT_CERTIFICATE", v.ClientCertificate, v.TracesClientCertificate)
	keyName, key := pick("CLIENT_KEY", v.ClientKey, v.TracesClientKey)
	switch {
	case cert == "" && key == "":
	case cert == "" || key == "":
		return cfg, fmt.Errorf("%s and %s must be set together", certName, keyName)
	default:
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return cfg, fmt.Errorf("%s=%q, %s=%q: %w", certName, cert, keyName, key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// buildResource names the service: OTEL_SERVICE_NAME, else a service.name in
// OTEL_RESOURCE_ATTRIBUTES, else the binary's default.
func buildResource(service, serviceName, attrs string) (*resource.Resource, error) {
	var kvs []attribute.KeyValue
	if strings.TrimSpace(attrs) != "" {
		for i, el := range strings.Split(attrs, ",") {
			k, v, ok := strings.Cut(el, "=")
			k = strings.TrimSpace(k)
			val, err := url.PathUnescape(strings.TrimSpace(v))
			if !ok || k == "" || err != nil {
				return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES=%q: element %d is not key=percent-encoded-value", attrs, i+1)
			}
			if k == "service.name" {
				service = val
				continue
			}
			kvs = append(kvs, attribute.String(k, val))
		}
	}
	if s := strings.TrimSpace(serviceName); s != "" {
		service = s
	}
	kvs = append(kvs, attribute.String("service.name", service))
	return resource.NewSchemaless(kvs...), nil
}

// sampler reads OTEL_TRACES_SAMPLER and its argument. The default, parentbased_always_on, keeps
// the caller's decision: sweepcron marks its calls sampled.
func sampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(arg), 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio within 0–1", arg)
		}
		return r, nil
	}
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		r, err := ratio()
		return sdktrace.TraceIDRatioBased(r), err
	case "parentbased_traceidratio":
		r, err := ratio()
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), err
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio or their parentbased_ forms", name)
}
