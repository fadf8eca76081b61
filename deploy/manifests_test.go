package deploy

import (
	"bufio"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDockerfile checks the image docs/DEPLOY.md describes: a static, stripped build of both binaries
// into a minimal non-root runtime image, and a build context that cannot carry secrets.
func TestDockerfile(t *testing.T) {
	d, err := parseDockerfile(readFile(t, filepath.Join(repoRoot, "Dockerfile")))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	if len(d.stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s), want a builder and a runtime stage", len(d.stages))
	}
	img := loadImage(t)
	for _, name := range []string{"api", "sweepcron"} {
		if img.installed["/usr/local/bin/"+name] != name {
			t.Errorf("the runtime stage does not install /usr/local/bin/%s (installed: %v)", name, img.installed)
		}
	}

	var builds []string
	for _, stage := range d.stages[:len(d.stages)-1] {
		for _, in := range stage {
			if in.op == "RUN" && strings.Contains(in.args, "go build") {
				builds = append(builds, in.args)
			}
		}
	}
	build := strings.Join(builds, "\n")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w"`, "--mount=type=cache", "./cmd/api", "./cmd/sweepcron"} {
		if !strings.Contains(build, want) {
			t.Errorf("no go build in the builder stage has %s", want)
		}
	}

	final := d.final()
	from := final[0].args
	if !strings.Contains(from, "distroless/static") && from != "scratch" {
		t.Errorf("runtime stage FROM %s: want distroless static (or scratch)", from)
	}
	var user string
	var exposed []string
	for _, in := range final {
		switch in.op {
		case "USER":
			user = in.args
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		case "HEALTHCHECK":
			if in.args != "NONE" {
				t.Errorf("Dockerfile:%d: a HEALTHCHECK cannot run in distroless (no shell, no curl)", in.line)
			}
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("runtime USER %q: want a numeric non-root uid, which Kubernetes' runAsNonRoot can verify", user)
	}
	if !slices.Contains(exposed, "8080") {
		t.Errorf("runtime stage EXPOSE %v: want 8080, LISTEN_ADDR's default", exposed)
	}

	t.Run(".dockerignore", func(t *testing.T) {
		lines := trimmedLines([]byte(readFile(t, filepath.Join(repoRoot, ".dockerignore"))))
		var patterns []string
		for _, l := range lines {
			if !strings.HasPrefix(l, "#") {
				patterns = append(patterns, l)
			}
		}
		// An allowlist keeps secrets and the throwaway database out of every build context.
		if len(patterns) == 0 || patterns[0] != "*" {
			t.Fatalf(".dockerignore must start by excluding everything (*), then list what the build needs; got %v", patterns)
		}
		for _, p := range patterns {
			for _, secret := range []string{".env", ".sweeprail-key", ".tmp", ".git"} {
				if strings.HasPrefix(p, "!") && strings.Contains(p, secret) {
					t.Errorf(".dockerignore re-includes %q, which holds %s", p, secret)
				}
			}
		}
	})
}

// TestKubernetes checks the manifests against docs/DESIGN.md's bounds and docs/DEPLOY.md: two probed API
// replicas that shut down within their grace, a CronJob that cannot overlap itself or be cut
// short by its deadline, and a Secret template that never holds a key.
func TestKubernetes(t *testing.T) {
	b := defaultBounds(t)
	objects := map[string]any{} // "Kind/name" → manifest
	files := map[string][]string{}
	for _, file := range walkFiles(t, kubernetesDir, ".yaml") {
		for _, doc := range yamlDocs(t, file) {
			kind, name := str(get(doc, "kind")), str(get(doc, "metadata", "name"))
			if kind == "" || (name == "" && kind != "Kustomization") {
				t.Errorf("%s: a document without kind or metadata.name", file)
			}
			key := kind + "/" + name
			if objects[key] != nil {
				t.Errorf("%s: %s is defined twice", file, key)
			}
			objects[key] = doc
			files[filepath.Base(file)] = append(files[filepath.Base(file)], key)
		}
	}
	deploy := objects["Deployment/sweeprail-api"]
	cron := objects["CronJob/sweepcron"]
	svc := objects["Service/sweeprail-api"]
	secret := objects["Secret/sweeprail"]
	if deploy == nil || cron == nil || svc == nil || secret == nil {
		t.Fatalf("want Deployment/sweeprail-api, Service/sweeprail-api, CronJob/sweepcron and Secret/sweeprail; have %v", slices.Sorted(maps.Keys(objects)))
	}

	t.Run("every container is locked down", func(t *testing.T) {
		known := envNames()
		for _, obj := range []any{deploy, cron} {
			spec := podSpec(obj)
			what := str(get(obj, "kind"))
			if get(spec, "securityContext", "runAsNonRoot") != true {
				t.Errorf("%s: pod securityContext.runAsNonRoot is not true", what)
			}
			for _, kind := range []string{"initContainers", "containers"} {
				for _, c := range list(get(spec, kind)) {
					where := fmt.Sprintf("%s %s.%s", what, kind, str(get(c, "name")))
					if get(c, "securityContext", "readOnlyRootFilesystem") != true {
						t.Errorf("%s: readOnlyRootFilesystem is not true", where)
					}
					if get(c, "securityContext", "allowPrivilegeEscalation") != false {
						t.Errorf("%s: allowPrivilegeEscalation is not false", where)
					}
					if get(c, "resources", "requests") == nil || get(c, "resources", "limits", "memory") == nil {
						t.Errorf("%s: want resource requests and a memory limit", where)
					}
					for _, e := range list(get(c, "env")) {
						if n := str(get(e, "name")); !known[n] {
							t.Errorf("%s: env %s is read by neither binary", where, n)
						}
						if ref := get(e, "valueFrom", "secretKeyRef"); ref != nil {
							if k := str(get(ref, "key")); get(secret, "stringData", k) == nil && get(ref, "optional") != true {
								t.Errorf("%s: secretKeyRef key %q is not in the Secret template", where, k)
							}
						}
					}
				}
			}
		}
	})

	t.Run("api deployment", func(t *testing.T) {
		if n, _ := intOf(get(deploy, "spec", "replicas")); n != 2 {
			t.Errorf("replicas %d, want 2 (the lease makes more than one safe)", n)
		}
		spec := podSpec(deploy)
		var api any
		for _, c := range list(get(spec, "containers")) {
			if str(get(c, "name")) == "api" {
				api = c
			}
		}
		if api == nil {
			t.Fatal("no container named api")
		}
		if p := str(get(api, "livenessProbe", "httpGet", "path")); p != "/healthz" {
			t.Errorf("liveness probe on %q, want /healthz (it never touches the database)", p)
		}
		if p := str(get(api, "readinessProbe", "httpGet", "path")); p != "/readyz" {
			t.Errorf("readiness probe on %q, want /readyz (database and migrations)", p)
		}
		grace, _ := intOf(get(spec, "terminationGracePeriodSeconds"))
		preStop, _ := intOf(get(api, "lifecycle", "preStop", "sleep", "seconds"))
		if need := time.Duration(preStop)*time.Second + b.shutdownGrace; time.Duration(grace)*time.Second <= need {
			t.Errorf("terminationGracePeriodSeconds %d must exceed the preStop sleep (%ds) + SHUTDOWN_GRACE (%s)", grace, preStop, b.shutdownGrace)
		}
		migrates := false
		for _, c := range list(get(spec, "initContainers")) {
			migrates = migrates || slices.Equal(stringList(t, "initContainers.command", get(c, "command")), []string{"api", "migrate", "up"})
		}
		if !migrates {
			t.Error("no initContainer runs api migrate up")
		}
		// The Service must reach the pods: its selector on their labels, its target port theirs.
		labels, _ := get(deploy, "spec", "template", "metadata", "labels").(map[string]any)
		selector, _ := get(svc, "spec", "selector").(map[string]any)
		if len(selector) == 0 {
			t.Error("the Service has no selector")
		}
		for k, v := range selector {
			if labels[k] != v {
				t.Errorf("Service selector %s=%v does not match the pod labels %v", k, v, labels)
			}
		}
		var portNames []any
		for _, p := range list(get(api, "ports")) {
			portNames = append(portNames, get(p, "name"), get(p, "containerPort"))
		}
		for _, p := range list(get(svc, "spec", "ports")) {
			if !slices.Contains(portNames, get(p, "targetPort")) {
				t.Errorf("Service targetPort %v is not a port of the api container %v", get(p, "targetPort"), portNames)
			}
		}
	})

	t.Run("cronjob", func(t *testing.T) {
		if p := str(get(cron, "spec", "concurrencyPolicy")); p != "Forbid" {
			t.Errorf("concurrencyPolicy %q, want Forbid", p)
		}
		job := get(cron, "spec", "jobTemplate", "spec")
		if n, ok := intOf(get(job, "backoffLimit")); !ok || n != 0 {
			t.Errorf("backoffLimit %v, want 0: the next tick is the retry", get(job, "backoffLimit"))
		}
		if p := str(get(podSpec(cron), "restartPolicy")); p != "Never" {
			t.Errorf("restartPolicy %q, want Never", p)
		}
		deadline, _ := intOf(get(job, "activeDeadlineSeconds"))
		if time.Duration(deadline)*time.Second <= b.tickBound() {
			t.Errorf("activeDeadlineSeconds %d must exceed INTERNAL_FETCH_TIMEOUT × (sweeps + discovery) = %s × %d = %s",
				deadline, b.fetchTimeout, b.routes, b.tickBound())
		}
		grace, _ := intOf(get(podSpec(cron), "terminationGracePeriodSeconds"))
		if time.Duration(grace)*time.Second < b.serverWriteTimeout {
			t.Errorf("terminationGracePeriodSeconds %d is below SERVER_WRITE_TIMEOUT %s, within which the route in flight is answered", grace, b.serverWriteTimeout)
		}
		svcPorts := list(get(svc, "spec", "ports"))
		if len(svcPorts) == 0 {
			t.Fatal("the Service has no ports")
		}
		apiURLs := 0
		for _, c := range list(get(podSpec(cron), "containers")) {
			for _, e := range list(get(c, "env")) {
				if str(get(e, "name")) != "API_URL" {
					continue
				}
				apiURLs++
				u, err := url.Parse(str(get(e, "value")))
				if err != nil || u.Hostname() != str(get(svc, "metadata", "name")) {
					t.Errorf("API_URL %q does not name the Service %v", get(e, "value"), get(svc, "metadata", "name"))
				}
				if p := fmt.Sprint(get(svcPorts[0], "port")); u.Port() != p {
					t.Errorf("API_URL port %q, the Service listens on %s", u.Port(), p)
				}
			}
		}
		if apiURLs != 1 {
			t.Errorf("the CronJob sets API_URL %d times, want once", apiURLs)
		}
	})

	t.Run("secret template holds no key", func(t *testing.T) {
		data, _ := get(secret, "stringData").(map[string]any)
		if get(secret, "data") != nil {
			t.Error("the template has data:; keep placeholders in stringData")
		}
		for k, v := range data {
			if strings.Contains(k, "signing-key") && str(v) != "" {
				t.Errorf("stringData.%s is not empty: never commit a key, even an example one (a 32-byte placeholder would be accepted)", k)
			}
		}
	})

	t.Run("kustomization", func(t *testing.T) {
		k := objects["Kustomization/"]
		var resources []string
		for _, r := range list(get(k, "resources")) {
			resources = append(resources, str(r))
		}
		for file := range files {
			switch {
			case file == "kustomization.yaml":
			case file == filepath.Base(secretFile):
				if slices.Contains(resources, file) {
					t.Errorf("kustomization.yaml applies %s: every deploy would overwrite the real key", file)
				}
			case !slices.Contains(resources, file):
				t.Errorf("kustomization.yaml does not list %s", file)
			}
		}
		for _, r := range resources {
			if files[r] == nil {
				t.Errorf("kustomization.yaml lists %s, which does not exist", r)
			}
		}
	})
}

// TestSystemd checks the units against the bounds, and with systemd-analyze where it is
// installed.
func TestSystemd(t *testing.T) {
	b := defaultBounds(t)
	units := map[string]unit{}
	for _, file := range walkFiles(t, systemdDir, ".service", ".timer") {
		u, err := parseUnit(readFile(t, file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		units[filepath.Base(file)] = u
	}
	api, cron, timer := units["sweeprail-api.service"], units["sweepcron.service"], units["sweepcron.timer"]
	if api == nil || cron == nil || timer == nil {
		t.Fatalf("want sweeprail-api.service, sweepcron.service and sweepcron.timer; have %v", slices.Sorted(maps.Keys(units)))
	}
	span := func(u unit, file, key string) time.Duration {
		t.Helper()
		d, err := parseTimespan(u.last("Service", key))
		if err != nil {
			t.Fatalf("%s %s: %v", file, key, err)
		}
		return d
	}

	for file, u := range map[string]unit{"sweeprail-api.service": api, "sweepcron.service": cron} {
		if got := u.last("Service", "EnvironmentFile"); got != "/etc/sweeprail/env" {
			t.Errorf("%s: EnvironmentFile=%s, want /etc/sweeprail/env", file, got)
		}
		for key, want := range map[string]string{"DynamicUser": "yes", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes"} {
			if got := u.last("Service", key); got != want {
				t.Errorf("%s: %s=%s, want %s", file, key, got, want)
			}
		}
	}
	if d := span(api, "sweeprail-api.service", "TimeoutStopSec"); d <= b.shutdownGrace {
		t.Errorf("sweeprail-api.service: TimeoutStopSec %s must exceed SHUTDOWN_GRACE %s", d, b.shutdownGrace)
	}
	if got := cron.last("Service", "Type"); got != "oneshot" {
		t.Errorf("sweepcron.service: Type=%s, want oneshot", got)
	}
	// A oneshot's start is its whole run, unbounded by default: a hung tick would block the timer.
	if d := span(cron, "sweepcron.service", "TimeoutStartSec"); d <= b.tickBound() {
		t.Errorf("sweepcron.service: TimeoutStartSec %s must exceed INTERNAL_FETCH_TIMEOUT × (sweeps + discovery) = %s", d, b.tickBound())
	}
	if d := span(cron, "sweepcron.service", "TimeoutStopSec"); d < b.serverWriteTimeout {
		t.Errorf("sweepcron.service: TimeoutStopSec %s is below SERVER_WRITE_TIMEOUT %s, within which the route in flight is answered", d, b.serverWriteTimeout)
	}
	if timer.last("Timer", "OnCalendar") != "*:0/15" {
		t.Errorf("sweepcron.timer: OnCalendar=%s, want every 15 minutes (*:0/15)", timer.last("Timer", "OnCalendar"))
	}
	if timer.last("Timer", "Persistent") != "true" {
		t.Error("sweepcron.timer: want Persistent=true, so a tick missed while down runs at boot")
	}
	if d, err := parseTimespan(timer.last("Timer", "RandomizedDelaySec")); err != nil || d > 5*time.Minute {
		t.Errorf("sweepcron.timer: RandomizedDelaySec=%s (%v): want a small delay, at most 5min of a 15min period", timer.last("Timer", "RandomizedDelaySec"), err)
	}

	t.Run("systemd-analyze verify", func(t *testing.T) { verifyUnits(t) })
}

// verifyUnits runs systemd-analyze verify, which knows every directive of this systemd, on
// copies of the units whose commands point at freshly built binaries (verify checks that they
// exist). It exits 0 even for an unknown key, so any output at all is a failure.
func verifyUnits(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not on PATH; the units are checked structurally only")
	}
	bin := buildBinaries(t)
	dir := t.TempDir()
	var copies []string
	for _, file := range walkFiles(t, systemdDir, ".service", ".timer") {
		text := strings.ReplaceAll(readFile(t, file), "/usr/local/bin/", bin+"/")
		dst := filepath.Join(dir, filepath.Base(file))
		if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, dst)
	}
	cmd := exec.Command(sa, append([]string{"verify", "--man=no"}, copies...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

var envLine = regexp.MustCompile(`^#?\s*([A-Z][A-Z0-9_]*)=(.*)$`)

// TestEnvExample checks .env.example: the key ships empty (fail-closed), and every variable it
// sets or shows commented out is one the binaries read.
func TestEnvExample(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := envNames()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := envLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		if !known[m[1]] {
			t.Errorf(".env.example: %s is read by neither binary", m[1])
		}
		if !strings.HasPrefix(sc.Text(), "#") {
			vars[m[1]] = m[2]
		}
	}
	if v, ok := vars["INTERNAL_SIGNING_KEY"]; !ok || v != "" {
		t.Errorf(".env.example: want INTERNAL_SIGNING_KEY= set and empty (fail-closed), got %q (set: %v)", v, ok)
	}
	if v := vars["INTERNAL_SIGNING_KEY_PREVIOUS"]; v != "" {
		t.Errorf(".env.example: INTERNAL_SIGNING_KEY_PREVIOUS=%q, want empty", v)
	}
	// The compose services that run the image read only variables the binaries know, too.
	services, _ := get(yamlDocs(t, composeFile)[0], "services").(map[string]any)
	for name, svc := range services {
		if !isSweeprailImage(str(get(svc, "image"))) {
			continue
		}
		for k := range envMap(get(svc, "environment")) {
			if !known[k] {
				t.Errorf("compose.yaml services.%s: environment %s is read by neither binary", name, k)
			}
		}
	}
}
