package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/sweeprail/sweeprail/internal/httpapi"
	"github.com/sweeprail/sweeprail/internal/metrics"
	"github.com/sweeprail/sweeprail/internal/policy"
)

const dashboardFile = "grafana/sweeprail.json"

// pendingMetrics are names the dashboard may use before internal/metrics exports them, because
// another change adds them. The test fails once a pending name is exported, so the entry is
// removed then and the name is checked like every other.
var pendingMetrics = map[string]string{}

// requiredMetrics are the series the dashboard exists to show: dropping a panel that
// reads one of them fails here.
var requiredMetrics = []string{
	"sweeprail_runs_total",
	"sweeprail_rows_deleted_total",
	"sweeprail_rows_processed_total",
	"sweeprail_batch_duration_seconds_bucket",
	"sweeprail_throttled_seconds_total",
	"sweeprail_last_success_timestamp_seconds",
	"sweeprail_auth_failures_total",
	"sweeprail_retention_lag_seconds",
}

// grafanaVars are the values the dashboard's variables are replaced with before promtool reads
// an expression. Any other $ left in an expression fails the test, so a misspelt variable is not
// hidden by the replacement.
var grafanaVars = map[string]string{
	"sweep":           ".*",
	"__rate_interval": "5m",
	"__interval":      "1m",
	"__range":         "1d",
}

// datasourceUID is what every panel and query must name: the dashboard's datasource variable, so
// an import into any Grafana picks that Grafana's own Prometheus.
const datasourceUID = "${datasource}"

type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *datasourceRef  `json:"datasource"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	GridPos    gridPos        `json:"gridPos"`
	Datasource *datasourceRef `json:"datasource"`
	Targets    []target       `json:"targets"`
	// Panels are the panels of a collapsed row.
	Panels []panel `json:"panels"`
}

type gridPos struct {
	X, Y, W, H int
}

type target struct {
	RefID      string         `json:"refId"`
	Expr       string         `json:"expr"`
	Datasource *datasourceRef `json:"datasource"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// query is one PromQL expression of the dashboard and where it stands, for messages and for the
// recording rule promtool checks it as.
type query struct {
	where string
	// record is a valid metric name made from where.
	record string
	expr   string
}

// TestGrafanaDashboard checks deploy/grafana/sweeprail.json: strict JSON, the shape Grafana
// imports (panels with targets, the datasource templated), every PromQL expression valid for
// promtool, and every metric it names one that /metrics exports.
func TestGrafanaDashboard(t *testing.T) {
	raw := []byte(readFile(t, dashboardFile))
	d, err := parseDashboard(raw)
	if err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exported := exportedMetrics(t)

	t.Run("shape", func(t *testing.T) {
		for _, err := range checkDashboardShape(d) {
			t.Error(err)
		}
	})

	qs, err := dashboardQueries(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("promtool", func(t *testing.T) {
		promtool := lookPromtool(t)
		for _, q := range qs {
			t.Run(q.record, func(t *testing.T) {
				t.Parallel()
				if err := promtoolCheck(t, promtool, []query{q}); err != nil {
					t.Errorf("%s: %q: %v", q.where, q.expr, err)
				}
			})
		}
	})

	t.Run("metrics exported", func(t *testing.T) {
		for _, err := range checkMetricNames(qs, exported) {
			t.Error(err)
		}
		for name, why := range pendingMetrics {
			if exported[name] {
				t.Errorf("%s is exported now: remove it from pendingMetrics (%s)", name, why)
			}
		}
	})

	t.Run("covers the issue", func(t *testing.T) {
		used := map[string]bool{}
		for _, q := range qs {
			for _, n := range metricNames(q.expr) {
				used[n] = true
			}
		}
		for _, m := range requiredMetrics {
			if !used[m] {
				t.Errorf("no query of the dashboard reads %s", m)
			}
		}
	})
}

// TestGrafanaChecksCanFail breaks the dashboard one way at a time and expects the matching check
// to refuse it, so that a check which passes everything cannot go unnoticed.
func TestGrafanaChecksCanFail(t *testing.T) {
	good, err := parseDashboard([]byte(readFile(t, dashboardFile)))
	if err != nil {
		t.Fatal(err)
	}
	exported := exportedMetrics(t)
	clone := func() dashboard {
		var d dashboard
		b, _ := json.Marshal(good)
		_ = json.Unmarshal(b, &d)
		return d
	}

	t.Run("duplicate key", func(t *testing.T) {
		if _, err := parseDashboard([]byte(`{"title":"a","title":"b","panels":[]}`)); err == nil {
			t.Error("a duplicate key was accepted")
		}
	})
	t.Run("trailing data", func(t *testing.T) {
		if _, err := parseDashboard([]byte(`{"title":"a"} {}`)); err == nil {
			t.Error("a second JSON value was accepted")
		}
	})

	shape := map[string]func(*dashboard){
		"fixed datasource": func(d *dashboard) {
			d.Panels[0].Datasource = &datasourceRef{Type: "prometheus", UID: "P1809F7CD0C75ACF3"}
		},
		"target datasource": func(d *dashboard) {
			d.Panels[1].Targets[0].Datasource = &datasourceRef{Type: "prometheus", UID: "prom"}
		},
		"no targets":         func(d *dashboard) { d.Panels[2].Targets = nil },
		"empty expr":         func(d *dashboard) { d.Panels[0].Targets[0].Expr = " " },
		"repeated refId":     func(d *dashboard) { d.Panels[0].Targets = append(d.Panels[0].Targets, d.Panels[0].Targets[0]) },
		"repeated panel id":  func(d *dashboard) { d.Panels[1].ID = d.Panels[0].ID },
		"off the grid":       func(d *dashboard) { d.Panels[0].GridPos.X = 20 },
		"no datasource var":  func(d *dashboard) { d.Templating.List = d.Templating.List[1:] },
		"no uid":             func(d *dashboard) { d.UID = "" },
		"no schemaVersion":   func(d *dashboard) { d.SchemaVersion = 0 },
		"panel without type": func(d *dashboard) { d.Panels[0].Type = "" },
	}
	for name, breakIt := range shape {
		t.Run(name, func(t *testing.T) {
			d := clone()
			breakIt(&d)
			if errs := checkDashboardShape(d); len(errs) == 0 {
				t.Error("checkDashboardShape accepted it")
			}
		})
	}

	t.Run("unknown variable", func(t *testing.T) {
		d := clone()
		d.Panels[0].Targets[0].Expr = `sum(rate(sweeprail_runs_total{sweep=~"$sweeps"}[5m]))`
		if _, err := dashboardQueries(d); err == nil {
			t.Error("an unknown $variable was accepted")
		}
	})
	t.Run("unexported metric", func(t *testing.T) {
		d := clone()
		d.Panels[0].Targets[0].Expr = `sum by (sweep) (rate(sweeprail_rows_delete_total[5m]))`
		qs, err := dashboardQueries(d)
		if err != nil {
			t.Fatal(err)
		}
		if errs := checkMetricNames(qs, exported); len(errs) == 0 {
			t.Error("a metric /metrics does not export was accepted")
		}
	})
	t.Run("bad PromQL", func(t *testing.T) {
		promtool := lookPromtool(t)
		bad := query{where: "broken", record: "dashboard:broken", expr: `sum by (sweep (rate(sweeprail_runs_total[5m]))`}
		if err := promtoolCheck(t, promtool, []query{bad}); err == nil {
			t.Error("promtool accepted a broken expression")
		}
	})
}

// TestMetricNames pins the small PromQL reader the exported-metrics check relies on.
func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sweeprail_runs_total`, []string{"sweeprail_runs_total"}},
		{`sum by (sweep, outcome) (increase(sweeprail_runs_total{outcome="batch-error", sweep=~"a|b"}[30m]))`, []string{"sweeprail_runs_total"}},
		{`histogram_quantile(0.99, sum by (le) (rate(x_bucket{a="}"}[5m])))`, []string{"x_bucket"}},
		{`time() - max(max_over_time(g[6h] offset 1h30m)) > 2 * 3600 and on (sweep) group_left (pass) h > 1e9`, []string{"g", "h"}},
		{`sum(rate(a[5m])) without (instance) / ignoring(x) sum(b) unless c or d`, []string{"a", "b", "c", "d"}},
		{`label_replace(up, "dst", "$1", "src", "(.*)") > bool 0`, []string{"up"}},
		{`sum(a:recorded:rate5m) by (job) @ end()`, []string{"a:recorded:rate5m"}},
		{`vector(1) + Inf - NaN`, nil},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
				t.Errorf("metricNames = %q, want %q", got, tc.want)
			}
		})
	}
}

// parseDashboard decodes the dashboard strictly: one JSON value, no key twice in any object.
func parseDashboard(raw []byte) (dashboard, error) {
	var d dashboard
	if err := checkJSONKeys(raw); err != nil {
		return d, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&d); err != nil {
		return d, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return d, errors.New("data after the dashboard object")
	}
	return d, nil
}

// checkJSONKeys refuses a key repeated within one object: encoding/json keeps the last silently,
// and so might Grafana, which makes the first one a lie to whoever reads the file.
func checkJSONKeys(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	// One frame per open object or array; objects track their keys and whether the next string
	// token is a key.
	type frame struct {
		keys     map[string]bool
		wantsKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, wantsKey: true})
			case '[':
				stack = append(stack, &frame{})
			case '}', ']':
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].keys != nil {
					stack[len(stack)-1].wantsKey = true
				}
			}
			continue
		case string:
			if top != nil && top.keys != nil && top.wantsKey {
				if top.keys[v] {
					return fmt.Errorf("key %q appears twice in one object (offset %d)", v, dec.InputOffset())
				}
				top.keys[v] = true
				top.wantsKey = false
				continue
			}
		}
		// A scalar value ends an object member.
		if top != nil && top.keys != nil {
			top.wantsKey = true
		}
	}
}

// allPanels flattens the panels, collapsed rows included.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// checkDashboardShape checks what Grafana needs to import the file and what keeps it portable:
// every data panel reads the templated datasource and has queries.
func checkDashboardShape(d dashboard) []error {
	var errs []error
	addf := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if d.Title == "" || d.UID == "" {
		addf("the dashboard needs a title and a uid (the uid keeps links stable across imports)")
	}
	if d.SchemaVersion <= 0 {
		addf("no schemaVersion: Grafana would migrate the file as if from the oldest schema")
	}
	hasDS := false
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && string(v.Query) == `"prometheus"` {
			hasDS = true
		}
		if v.Type == "query" && !templated(v.Datasource) {
			addf("variable %s: datasource %+v, want uid %s", v.Name, v.Datasource, datasourceUID)
		}
	}
	if !hasDS {
		addf(`no templating variable {"name":"datasource","type":"datasource","query":"prometheus"}`)
	}
	ps := allPanels(d.Panels)
	if len(ps) == 0 {
		addf("no panels")
	}
	ids := map[int]string{}
	for _, p := range ps {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if prev, ok := ids[p.ID]; ok {
			addf("%s: id %d is also %s's", where, p.ID, prev)
		}
		ids[p.ID] = where
		if p.Type == "" || p.Title == "" {
			addf("%s: needs a type and a title", where)
		}
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			addf("%s: gridPos %+v is off Grafana's 24-column grid", where, g)
		}
		if p.Type == "row" {
			continue
		}
		if !templated(p.Datasource) {
			addf("%s: datasource %+v, want uid %s", where, p.Datasource, datasourceUID)
		}
		if len(p.Targets) == 0 {
			addf("%s: no targets", where)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				addf("%s: target refId %q is empty or repeated", where, tg.RefID)
			}
			refs[tg.RefID] = true
			if strings.TrimSpace(tg.Expr) == "" {
				addf("%s, target %s: empty expr", where, tg.RefID)
			}
			if tg.Datasource != nil && !templated(tg.Datasource) {
				addf("%s, target %s: datasource %+v, want uid %s", where, tg.RefID, tg.Datasource, datasourceUID)
			}
		}
	}
	return errs
}

func templated(ds *datasourceRef) bool {
	return ds != nil && ds.Type == "prometheus" && ds.UID == datasourceUID
}

var (
	labelValuesRE = regexp.MustCompile(`^\s*label_values\((.+),\s*([a-zA-Z_]\w*)\s*\)\s*$`)
	recordRE      = regexp.MustCompile(`[^a-zA-Z0-9_:]+`)
	// varRE matches a Grafana variable, $name or ${name}, its whole name.
	varRE = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)
)

// dashboardQueries returns every PromQL expression of the dashboard with Grafana's variables
// replaced: the panels' targets and the metric of each label_values() variable.
func dashboardQueries(d dashboard) ([]query, error) {
	var qs []query
	add := func(where, expr string) error {
		e := varRE.ReplaceAllStringFunc(expr, func(v string) string {
			m := varRE.FindStringSubmatch(v)
			if val, ok := grafanaVars[m[1]+m[2]]; ok {
				return val
			}
			return v
		})
		if strings.Contains(e, "$") {
			return fmt.Errorf("%s: %q uses a variable the test does not know (add it to grafanaVars if the dashboard defines it)", where, expr)
		}
		rec := "dashboard:" + strings.Trim(recordRE.ReplaceAllString(where, "_"), "_")
		qs = append(qs, query{where: where, record: rec, expr: e})
		return nil
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			// The older form: the query as a plain string.
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				return nil, fmt.Errorf("variable %s: query: %w", v.Name, err)
			}
		}
		m := labelValuesRE.FindStringSubmatch(q.Query)
		if m == nil {
			return nil, fmt.Errorf("variable %s: query %q is not label_values(<selector>, <label>)", v.Name, q.Query)
		}
		if err := add("variable "+v.Name, m[1]); err != nil {
			return nil, err
		}
	}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			if err := add(fmt.Sprintf("panel %d %s %s", p.ID, p.Title, tg.RefID), tg.Expr); err != nil {
				return nil, err
			}
		}
	}
	return qs, nil
}

// lookPromtool finds promtool the way TestAlertRules does: skip on a developer's machine, fail
// under CI.
func lookPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if isCI() {
			t.Fatal("promtool is not on PATH; CI must install it (Debian package prometheus, see .ci/run)")
		}
		t.Skip("promtool is not on PATH (Debian: apt-get install prometheus)")
	}
	return p
}

// promtoolCheck writes qs as recording rules and runs promtool check rules over them: promtool
// has no command for a bare expression, and a rule file makes it parse each one fully.
func promtoolCheck(t *testing.T, promtool string, qs []query) error {
	t.Helper()
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for _, q := range qs {
		rules = append(rules, rule{Record: q.record, Expr: q.expr})
	}
	doc := map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard.rules.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("promtool check rules: %w\n%s", err, out)
	}
	return nil
}

// exportedMetrics lists the series names /metrics serves, from a registry built the way
// cmd/api's serve builds it, over the bundled catalog. A histogram exports _bucket, _sum and
// _count, never its bare name.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if _, err := metrics.New(reg, httpapi.MetricLabels(policy.Catalog())); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		name := f.GetName()
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	return out
}

// checkMetricNames refuses a metric no family of /metrics exports and that is not pending.
func checkMetricNames(qs []query, exported map[string]bool) []error {
	var errs []error
	for _, q := range qs {
		for _, n := range metricNames(q.expr) {
			if !exported[n] && pendingMetrics[n] == "" {
				errs = append(errs, fmt.Errorf("%s: %s is not exported by /metrics", q.where, n))
			}
		}
	}
	return errs
}

var (
	// stringRE matches PromQL string literals, whose text is never a metric name.
	stringRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'` + "|`[^`]*`")
	// matchersRE and rangeRE match label matchers and range or subquery brackets (strings are
	// already blanked, so a brace or bracket inside a label value cannot end them early).
	matchersRE = regexp.MustCompile(`\{[^}]*\}`)
	rangeRE    = regexp.MustCompile(`\[[^\]]*\]`)
	// groupingRE matches label lists: by (…), without (…), on (…), ignoring (…), group_left (…).
	groupingRE = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	// tokenRE reads a number (with any duration or exponent suffix) or an identifier.
	tokenRE = regexp.MustCompile(`\d[\w.]*|[a-zA-Z_:][\w:]*`)
)

// promqlWords are PromQL's keywords and constants, which read like identifiers.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true,
	"ignoring": true, "group_left": true, "group_right": true, "offset": true, "bool": true,
	"inf": true, "nan": true,
}

// metricNames returns the metric names an expression selects, in order, each once. It is a small
// reader, not a PromQL parser: promtool has checked the syntax already, and the dashboard does not
// select by {__name__=…}. An identifier followed by "(" is a function or an aggregation.
func metricNames(expr string) []string {
	s := stringRE.ReplaceAllString(expr, `""`)
	s = matchersRE.ReplaceAllString(s, "{}")
	s = rangeRE.ReplaceAllString(s, "[]")
	s = groupingRE.ReplaceAllString(s, " ")
	var out []string
	for _, loc := range tokenRE.FindAllStringIndex(s, -1) {
		tok := s[loc[0]:loc[1]]
		if tok[0] >= '0' && tok[0] <= '9' || promqlWords[strings.ToLower(tok)] {
			continue
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue
		}
		if !slices.Contains(out, tok) {
			out = append(out, tok)
		}
	}
	return out
}
