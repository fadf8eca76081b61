package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sweeprail/sweeprail/internal/config"
	"github.com/sweeprail/sweeprail/internal/policy"
)

// Paths are relative to this package's directory, where go test runs the tests.
const (
	repoRoot      = ".."
	composeFile   = "compose.yaml"
	kubernetesDir = "kubernetes"
	systemdDir    = "systemd"
	alertsFile    = "prometheus/alerts.yaml"
	alertsTest    = "prometheus/alerts_test.yaml"
	secretFile    = "kubernetes/secret.template.yaml"
)

// isCI reports whether the tests run under CI, where a missing tool is a failure, not a skip.
func isCI() bool { return os.Getenv("CI") == "true" }

// readFile returns a file's text or fails the test.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// decodeYAML decodes every document of a YAML stream into plain Go values. Decoding into `any`
// (not yaml.Node) makes yaml.v3 refuse duplicate keys and resolve anchors and merge keys, as
// kubectl and compose do.
func decodeYAML(r io.Reader) ([]any, error) {
	dec := yaml.NewDecoder(r)
	var docs []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, err
		}
		if v != nil { // an empty document, e.g. after a trailing ---
			docs = append(docs, v)
		}
	}
}

// yamlDocs decodes a YAML file or fails the test.
func yamlDocs(t *testing.T, path string) []any {
	t.Helper()
	docs, err := decodeYAML(strings.NewReader(readFile(t, path)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return docs
}

// get walks nested maps by key; nil when a step is missing or not a map.
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// intOf reads a YAML integer; ok is false when v is not one.
func intOf(v any) (int, bool) {
	n, ok := v.(int)
	return n, ok
}

// strings of a YAML list of scalars, or of a single string split on spaces (compose's short form).
func stringList(t *testing.T, where string, v any) []string {
	t.Helper()
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return strings.Fields(v)
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				t.Fatalf("%s: %v is not a string (quote numbers and booleans in a command)", where, e)
			}
			out = append(out, s)
		}
		return out
	}
	t.Fatalf("%s: want a list of strings, got %T", where, v)
	return nil
}

// envNames returns every environment variable that the binaries read, from the env tags of the
// configuration structs, so that a misspelt variable in a manifest (silently ignored at run time)
// fails here.
func envNames() map[string]bool {
	names := map[string]bool{}
	for _, typ := range []reflect.Type{reflect.TypeFor[config.API](), reflect.TypeFor[config.Cron]()} {
		for i := range typ.NumField() {
			if tag, ok := typ.Field(i).Tag.Lookup("env"); ok {
				name, _, _ := strings.Cut(tag, ",")
				names[name] = true
			}
		}
	}
	return names
}

// bounds are the defaults of the timeouts that the deployment files must respect.
type bounds struct {
	shutdownGrace      time.Duration
	serverWriteTimeout time.Duration
	fetchTimeout       time.Duration
	// routes is the number of requests one sweepcron tick makes: one per bundled sweep plus the
	// discovery GET /internal/sweeps, each bounded by the fetch timeout.
	routes int
}

// tickBound is the longest one sweepcron tick can take: every request at the fetch timeout.
func (b bounds) tickBound() time.Duration { return b.fetchTimeout * time.Duration(b.routes) }

// defaultBounds reads the defaults from the configuration package itself, so that a changed
// default re-checks every file that depends on it.
func defaultBounds(t *testing.T) bounds {
	t.Helper()
	api, err := config.LoadAPI(map[string]string{"DATABASE_URL": "postgres://localhost/sweeprail"})
	if err != nil {
		t.Fatalf("API defaults: %v", err)
	}
	cron, err := config.LoadCron(map[string]string{"API_URL": "http://localhost:8080", "INTERNAL_SIGNING_KEY": strings.Repeat("k", 32)})
	if err != nil {
		t.Fatalf("cron defaults: %v", err)
	}
	return bounds{
		shutdownGrace:      api.ShutdownGrace,
		serverWriteTimeout: api.ServerWriteTimeout,
		fetchTimeout:       cron.FetchTimeout,
		routes:             len(policy.Catalog()) + 1,
	}
}

// unit is a parsed systemd unit file: section → key → values, in order (keys may repeat).
type unit map[string]map[string][]string

// last returns the effective value of a key (the last assignment wins in systemd).
func (u unit) last(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// parseUnit reads a systemd unit file: [Section] headers, Key=Value lines, # and ; comments,
// backslash continuations.
func parseUnit(text string) (unit, error) {
	u := unit{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	var pending string
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if pending == "" && (line == "" || line[0] == '#' || line[0] == ';') {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending += cont + " "
			continue
		}
		line, pending = pending+line, ""
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("line %d: %q is neither a [Section] nor Key=Value in a section", n, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		u[section][key] = append(u[section][key], value)
	}
	return u, sc.Err()
}

var spanPart = regexp.MustCompile(`^(\d+)([a-z]*)$`)

// parseTimespan reads a systemd time span such as "30s", "15min", "2min 30s" or "90" (seconds).
// It knows the units a unit file here would use; others are an error, never a guess.
func parseTimespan(s string) (time.Duration, error) {
	units := map[string]time.Duration{
		"": time.Second, "s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
		"ms": time.Millisecond, "msec": time.Millisecond,
		"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
		"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return 0, errors.New("empty time span")
	}
	var total time.Duration
	for _, f := range fields {
		m := spanPart.FindStringSubmatch(f)
		if m == nil {
			return 0, fmt.Errorf("time span %q: cannot read %q", s, f)
		}
		n, _ := strconv.Atoi(m[1])
		u, ok := units[m[2]]
		if !ok {
			return 0, fmt.Errorf("time span %q: unknown unit %q", s, m[2])
		}
		total += time.Duration(n) * u
	}
	return total, nil
}

// dockerfile is the parsed Dockerfile: its stages, each a list of instructions.
type dockerfile struct {
	stages [][]instruction
}

type instruction struct {
	line int
	op   string // upper case: FROM, RUN, COPY…
	args string
}

func (d dockerfile) final() []instruction { return d.stages[len(d.stages)-1] }

// parseDockerfile splits a Dockerfile into instructions: comments and blank lines dropped,
// backslash continuations joined (comment lines inside them skipped, as Docker does).
func parseDockerfile(text string) (dockerfile, error) {
	var d dockerfile
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		start := i + 1
		var b strings.Builder
		for {
			cont, more := strings.CutSuffix(line, `\`)
			b.WriteString(cont)
			if !more {
				break
			}
			b.WriteString(" ")
			for i++; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "#"); i++ {
			}
			if i >= len(lines) {
				return d, fmt.Errorf("line %d: continuation at end of file", start)
			}
			line = strings.TrimSpace(lines[i])
		}
		op, args, _ := strings.Cut(b.String(), " ")
		in := instruction{line: start, op: strings.ToUpper(op), args: strings.TrimSpace(args)}
		if in.op == "FROM" {
			d.stages = append(d.stages, nil)
		} else if len(d.stages) == 0 {
			if in.op != "ARG" {
				return d, fmt.Errorf("line %d: %s before the first FROM", start, in.op)
			}
			continue
		}
		d.stages[len(d.stages)-1] = append(d.stages[len(d.stages)-1], in)
	}
	if len(d.stages) == 0 {
		return d, errors.New("no FROM")
	}
	return d, nil
}

// shellFields splits a command's text on blanks. Quotes, variables and globs would need a shell
// (or systemd's own rules) to mean what they say: they are refused, so that the command checked
// is exactly the one that runs.
func shellFields(s string) ([]string, error) {
	if strings.ContainsAny(s, "\"'$`*?\\;|&<>") {
		return nil, fmt.Errorf("%q: quotes, variables, globs and shell operators are not supported here; keep command lines literal", s)
	}
	return strings.Fields(s), nil
}

// trimmedLines returns the non-empty lines of b.
func trimmedLines(b []byte) []string {
	var out []string
	for l := range bytes.Lines(b) {
		if s := strings.TrimSpace(string(l)); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// walkFiles lists the files under dir whose names end with one of the suffixes.
func walkFiles(t *testing.T, dir string, suffixes ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, s := range suffixes {
			if !d.IsDir() && strings.HasSuffix(path, s) {
				out = append(out, path)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
