package deploy

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestComposeConfig runs `docker compose config`, the compose file's own validation, where the
// client has the compose plugin. It needs no engine. It runs on a copy laid out like the
// repository, with .env.example as the .env that the file requires, so that the result does not
// depend on a developer's real .env.
func TestComposeConfig(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker client on PATH: compose.yaml is checked structurally only (TestComposeFile)")
	}
	if out, err := exec.Command(docker, "compose", "version").CombinedOutput(); err != nil {
		first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		t.Skipf("the docker client has no compose plugin (%s): compose.yaml is checked structurally only (TestComposeFile)", first)
	}
	root := t.TempDir()
	for src, dst := range map[string]string{
		composeFile:                             "deploy/compose.yaml",
		filepath.Join(repoRoot, ".env.example"): ".env",
		filepath.Join(repoRoot, "Dockerfile"):   "Dockerfile",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, dst)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dst), []byte(readFile(t, src)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(docker, "compose", "-f", filepath.Join(root, "deploy/compose.yaml"), "config", "-q")
	// Interpolation must see the file's defaults, not the caller's shell.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker compose config: %v\n%s", err, out)
	}
}

// composeServiceKeys are the keys of a compose service (the compose specification's service
// properties). A misspelt key (depends-on, stop_grace) is an error for compose config, which may
// not be available here; this catches it anyway.
var composeServiceKeys = strings.Fields(`annotations attach blkio_config build cap_add cap_drop cgroup
	cgroup_parent command configs container_name cpu_count cpu_percent cpu_period cpu_quota
	cpu_rt_period cpu_rt_runtime cpu_shares cpus cpuset credential_spec depends_on deploy develop
	device_cgroup_rules devices dns dns_opt dns_search domainname entrypoint env_file environment
	expose extends external_links extra_hosts gpus group_add healthcheck hostname image init ipc
	isolation label_file labels links logging mac_address mem_limit mem_reservation mem_swappiness
	memswap_limit models network_mode networks oom_kill_disable oom_score_adj pid pids_limit
	platform ports post_start pre_stop privileged profiles provider pull_policy read_only restart
	runtime scale secrets security_opt shm_size stdin_open stop_grace_period stop_signal
	storage_opt sysctls tmpfs tty ulimits use_api_socket user userns_mode uts volumes volumes_from
	working_dir`)

// TestComposeFile checks what docs/DESIGN.md and docs/DEPLOY.md fix for the compose deployment: the
// order of start-up, where the key comes from, and the stop grace against the shutdown bounds.
func TestComposeFile(t *testing.T) {
	b := defaultBounds(t)
	doc := yamlDocs(t, composeFile)[0]
	services, _ := get(doc, "services").(map[string]any)
	for _, name := range []string{"postgres", "migrate", "api", "cron"} {
		if services[name] == nil {
			t.Fatalf("compose.yaml has no %s service", name)
		}
	}
	for key := range doc.(map[string]any) {
		if !slices.Contains([]string{"name", "services", "volumes", "networks", "secrets", "configs"}, key) && !strings.HasPrefix(key, "x-") {
			t.Errorf("compose.yaml: unknown top-level key %q", key)
		}
	}
	for name, svc := range services {
		for key := range svc.(map[string]any) {
			if !slices.Contains(composeServiceKeys, key) && !strings.HasPrefix(key, "x-") {
				t.Errorf("compose.yaml services.%s: unknown key %q", name, key)
			}
		}
	}
	condition := func(svc, dep string) string { return str(get(services, svc, "depends_on", dep, "condition")) }
	duration := func(svc, key string) time.Duration {
		d, err := time.ParseDuration(str(get(services, svc, key)))
		if err != nil {
			t.Fatalf("compose.yaml services.%s.%s: %v", svc, key, err)
		}
		return d
	}

	t.Run("postgres", func(t *testing.T) {
		if img := str(get(services, "postgres", "image")); !strings.HasPrefix(img, "postgres:15") {
			t.Errorf("postgres image %q, want postgres:15", img)
		}
		if get(services, "postgres", "healthcheck", "test") == nil {
			t.Error("postgres has no healthcheck: migrate's service_healthy would never be met")
		}
	})
	t.Run("start-up order", func(t *testing.T) {
		for _, dep := range []struct{ svc, on, want string }{
			{"migrate", "postgres", "service_healthy"},
			{"api", "migrate", "service_completed_successfully"},
			{"cron", "api", "service_started"},
		} {
			if got := condition(dep.svc, dep.on); got != dep.want {
				t.Errorf("%s depends on %s with condition %q, want %q", dep.svc, dep.on, got, dep.want)
			}
		}
		if r := str(get(services, "migrate", "restart")); r != "no" && r != "" {
			t.Errorf("migrate restart %q: a one-shot job must not restart", r)
		}
	})
	// The stack's PostgreSQL is its own and the API serves the bundled catalog (no
	// SWEEP_POLICY_FILE), which sweeps the demo schema: api migrate up alone installs only
	// sweeprail's own schema, and the API would refuse to boot.
	t.Run("migrate installs the schema the served policy sweeps", func(t *testing.T) {
		cmd := stringList(t, "services.migrate.command", get(services, "migrate", "command"))
		policy := get(services, "api", "environment", "SWEEP_POLICY_FILE")
		if policy == nil && !slices.Equal(cmd, []string{"api", "migrate", "up", "--demo"}) {
			t.Errorf("migrate runs %q while the api serves the bundled catalog: want api migrate up --demo", cmd)
		}
	})
	t.Run("signing key from the uncommitted env file only", func(t *testing.T) {
		for _, svc := range []string{"api", "cron"} {
			files := list(get(services, svc, "env_file"))
			if f, ok := get(services, svc, "env_file").(string); ok {
				files = []any{f}
			}
			found := false
			for _, f := range files {
				p := str(f)
				if p == "" {
					p = str(get(f, "path"))
				}
				found = found || p == "../.env"
			}
			if !found {
				t.Errorf("%s: env_file does not name ../.env", svc)
			}
		}
		for name := range services {
			for k := range envMap(get(services, name, "environment")) {
				if strings.HasPrefix(k, "INTERNAL_SIGNING_KEY") {
					t.Errorf("services.%s.environment sets %s: the key belongs in the uncommitted .env only", name, k)
				}
			}
		}
		if !slices.Contains(trimmedLines([]byte(readFile(t, filepath.Join(repoRoot, ".gitignore")))), ".env") {
			t.Error(".gitignore does not list .env, the file that holds the key")
		}
	})
	t.Run("cron reaches the api", func(t *testing.T) {
		cmd := stringList(t, "cron.command", get(services, "cron", "command"))
		if !slices.Contains(cmd, "--every") && !slices.ContainsFunc(cmd, func(a string) bool { return strings.HasPrefix(a, "--every=") }) {
			t.Errorf("cron command %q does not loop (--every)", cmd)
		}
		u, err := url.Parse(envMap(get(services, "cron", "environment"))["API_URL"])
		if err != nil || u.Hostname() != "api" {
			t.Fatalf("cron API_URL %v (%v): want the api service", u, err)
		}
		_, port, _ := net.SplitHostPort(defaultListenAddr)
		if u.Port() != port {
			t.Errorf("cron API_URL port %q, the API listens on %q", u.Port(), port)
		}
	})
	t.Run("stop grace", func(t *testing.T) {
		if g := duration("api", "stop_grace_period"); g <= b.shutdownGrace {
			t.Errorf("api stop_grace_period %s must exceed SHUTDOWN_GRACE %s, or Docker kills the API mid-shutdown", g, b.shutdownGrace)
		}
		if g := duration("cron", "stop_grace_period"); g < b.serverWriteTimeout {
			t.Errorf("cron stop_grace_period %s is below SERVER_WRITE_TIMEOUT %s, within which the route in flight is answered", g, b.serverWriteTimeout)
		}
	})
}

// defaultListenAddr is LISTEN_ADDR's default (docs/DESIGN.md), the port every file must agree on.
const defaultListenAddr = ":8080"

// envMap reads a compose environment, in its map or its list ("K=V") form.
func envMap(v any) map[string]string {
	out := map[string]string{}
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			out[k] = str(val)
		}
	case []any:
		for _, e := range v {
			k, val, _ := strings.Cut(str(e), "=")
			out[k] = val
		}
	}
	return out
}
