package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sentinel marks the environment every command line is run with. The binaries mention it only
// once they have accepted their command line and gone on to use that environment; a flag, a
// subcommand or an argument they refuse is reported before, without it. So "the output names the
// sentinel" means "the real binary accepts this command line", whatever the command is:
//
//   - api serve: the configuration refuses INTERNAL_FETCH_TIMEOUT, naming its value, so it never
//     listens;
//   - api migrate …, api seed-demo …: the connection to port 1 is refused at once, and pgx names
//     the user and the database;
//   - sweepcron …: the configuration refuses INTERNAL_FETCH_TIMEOUT before any request;
//   - sweepcron curl …: it ignores the fetch timeout and prints a command naming API_URL's host.
const sentinel = "deploycheck"

func sentinelEnv() []string {
	return []string{
		"DATABASE_URL=postgres://" + sentinel + "@127.0.0.1:1/" + sentinel + "?sslmode=disable&connect_timeout=2",
		"API_URL=http://" + sentinel + ".invalid:1",
		"INTERNAL_SIGNING_KEY=" + strings.Repeat("0", 64),
		"INTERNAL_FETCH_TIMEOUT=" + sentinel,
	}
}

// raceEnabled is set by race_test.go when the tests run with -race (make test does): the
// binaries are then built with -race too, so that `go build` reuses the packages that the same
// `go test -race ./...` has just compiled instead of compiling everything a second time.
var raceEnabled bool

// buildBinaries builds the two commands of the image into a temporary directory.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/api", "./cmd/sweepcron")
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return dir
}

// accepts runs a real binary with args under the sentinel environment and reports whether it
// accepted the command line (see sentinel), with its output for the failure message.
func accepts(t *testing.T, bin string, args []string) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = sentinelEnv()
	cmd.WaitDelay = time.Second
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %q did not exit within 10s: the sentinel environment must make every command stop early\n%s", filepath.Base(bin), args, out)
	}
	return strings.Contains(string(out), sentinel), string(out)
}

// commandLine is one command that a deployment file runs.
type commandLine struct {
	where string
	argv  []string
	// inImage: it runs in the image, where a bare name resolves through the image's PATH. On a
	// host (systemd) it must be an absolute path.
	inImage bool
}

// image is what the Dockerfile's final stage gives the commands that run in it.
type image struct {
	// cmd is the default command (CMD); the image has no ENTRYPOINT.
	cmd []string
	// installed maps a path in the image to the binary it holds (api or sweepcron).
	installed map[string]string
	// path is the image's PATH.
	path []string
}

// loadImage reads what the commands need from the Dockerfile; TestDockerfile checks the rest.
func loadImage(t *testing.T) image {
	t.Helper()
	d, err := parseDockerfile(readFile(t, filepath.Join(repoRoot, "Dockerfile")))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	img := image{installed: map[string]string{}}
	for _, in := range d.final() {
		switch in.op {
		case "CMD":
			if err := json.Unmarshal([]byte(in.args), &img.cmd); err != nil {
				t.Fatalf("Dockerfile:%d: CMD must be in JSON (exec) form, since the image has no shell: %v", in.line, err)
			}
		case "ENTRYPOINT":
			t.Fatalf("Dockerfile:%d: the image holds two binaries, so it has no ENTRYPOINT: every command names the one it runs", in.line)
		case "COPY":
			fields := strings.Fields(in.args)
			from := false
			var paths []string
			for _, f := range fields {
				if strings.HasPrefix(f, "--from=") {
					from = true
				} else if !strings.HasPrefix(f, "--") {
					paths = append(paths, f)
				}
			}
			if !from || len(paths) < 2 {
				continue
			}
			dest := paths[len(paths)-1]
			for _, src := range paths[:len(paths)-1] {
				target := dest
				if strings.HasSuffix(dest, "/") {
					target = dest + path.Base(src)
				}
				img.installed[target] = path.Base(target)
			}
		case "ENV":
			for _, kv := range strings.Fields(in.args) {
				if v, ok := strings.CutPrefix(kv, "PATH="); ok {
					img.path = strings.Split(v, ":")
				}
			}
		}
	}
	if img.path == nil {
		t.Fatal("Dockerfile: the final stage sets no PATH; set it, so that a bare command name resolves the same under every runtime")
	}
	if img.cmd == nil {
		t.Fatal("Dockerfile: the final stage has no CMD")
	}
	return img
}

// isSweeprailImage reports whether an image reference names this project's image, whatever the
// registry and tag: sweeprail:local, registry.example.com/team/sweeprail:1.2@sha256:….
func isSweeprailImage(ref string) bool {
	ref, _, _ = strings.Cut(ref, "@")
	name := path.Base(ref)
	name, _, _ = strings.Cut(name, ":")
	return name == "sweeprail"
}

// composeCommands returns the command line of every service that runs the image.
func composeCommands(t *testing.T, file string, img image) []commandLine {
	t.Helper()
	doc := yamlDocs(t, file)[0]
	services, _ := get(doc, "services").(map[string]any)
	var out []commandLine
	for _, name := range slices.Sorted(maps.Keys(services)) {
		svc := services[name]
		if !isSweeprailImage(str(get(svc, "image"))) && get(svc, "build") == nil {
			continue
		}
		where := fmt.Sprintf("%s services.%s", filepath.Base(file), name)
		ep := stringList(t, where+".entrypoint", get(svc, "entrypoint"))
		cmd := stringList(t, where+".command", get(svc, "command"))
		// Compose: an entrypoint replaces the image's and drops its CMD; a command replaces CMD.
		var argv []string
		switch {
		case ep != nil:
			argv = append(ep, cmd...)
		case cmd != nil:
			argv = cmd
		default:
			argv = img.cmd
		}
		out = append(out, commandLine{where: where, argv: argv, inImage: true})
	}
	return out
}

// podSpec returns the pod template of a workload manifest, nil for other kinds.
func podSpec(doc any) any {
	switch str(get(doc, "kind")) {
	case "Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet":
		return get(doc, "spec", "template", "spec")
	case "CronJob":
		return get(doc, "spec", "jobTemplate", "spec", "template", "spec")
	case "Pod":
		return get(doc, "spec")
	}
	return nil
}

// kubernetesCommands returns the command line of every container (init containers included)
// that runs the image, in every manifest file under dir.
func kubernetesCommands(t *testing.T, dir string, img image) []commandLine {
	t.Helper()
	var out []commandLine
	for _, file := range walkFiles(t, dir, ".yaml") {
		for _, doc := range yamlDocs(t, file) {
			spec := podSpec(doc)
			for _, kind := range []string{"initContainers", "containers"} {
				for _, c := range list(get(spec, kind)) {
					if !isSweeprailImage(str(get(c, "image"))) {
						continue
					}
					where := fmt.Sprintf("%s %s/%s %s.%s", filepath.Base(file), get(doc, "kind"), get(doc, "metadata", "name"), kind, str(get(c, "name")))
					command := stringList(t, where+".command", get(c, "command"))
					args := stringList(t, where+".args", get(c, "args"))
					for _, a := range append(slices.Clone(command), args...) {
						if strings.Contains(a, "$(") {
							t.Fatalf("%s: %q: $(VAR) expansion is not supported by this check; keep command lines literal", where, a)
						}
					}
					// Kubernetes: command replaces ENTRYPOINT (and drops CMD), args replaces CMD.
					var argv []string
					switch {
					case command != nil:
						argv = append(command, args...)
					case args != nil:
						argv = args
					default:
						argv = img.cmd
					}
					out = append(out, commandLine{where: where, argv: argv, inImage: true})
				}
			}
		}
	}
	return out
}

// execKeys are the unit settings that run a command.
var execKeys = []string{"ExecCondition", "ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop", "ExecStopPost"}

// systemdCommands returns every command of the service units under dir.
func systemdCommands(t *testing.T, dir string) []commandLine {
	t.Helper()
	var out []commandLine
	for _, file := range walkFiles(t, dir, ".service") {
		u, err := parseUnit(readFile(t, file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, key := range execKeys {
			for i, v := range u["Service"][key] {
				where := fmt.Sprintf("%s %s[%d]", filepath.Base(file), key, i)
				// "-" (ignore failure), ":" (no expansion), "+" and "!" (privileges) change how
				// the command runs, not what it is; "@" (a separate argv[0]) would, so it is refused.
				v = strings.TrimLeft(v, "-:+!")
				if strings.HasPrefix(v, "@") {
					t.Fatalf("%s: the @ prefix is not supported by this check", where)
				}
				argv, err := shellFields(v)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				out = append(out, commandLine{where: where, argv: argv})
			}
		}
	}
	return out
}

// allCommandLines returns every command line that the Dockerfile, compose, Kubernetes and
// systemd files run.
func allCommandLines(t *testing.T, img image) []commandLine {
	t.Helper()
	lines := []commandLine{{where: "Dockerfile CMD", argv: img.cmd, inImage: true}}
	lines = append(lines, composeCommands(t, composeFile, img)...)
	lines = append(lines, kubernetesCommands(t, kubernetesDir, img)...)
	lines = append(lines, systemdCommands(t, systemdDir)...)
	return lines
}

// binaryOf returns the binary (api or sweepcron) that a command line runs.
func binaryOf(cl commandLine, img image) (string, error) {
	if len(cl.argv) == 0 {
		return "", fmt.Errorf("%s: empty command", cl.where)
	}
	exe := cl.argv[0]
	if !cl.inImage {
		if !filepath.IsAbs(exe) {
			return "", fmt.Errorf("%s: %q: a unit's command must be an absolute path", cl.where, exe)
		}
		name := filepath.Base(exe)
		if name != "api" && name != "sweepcron" {
			return "", fmt.Errorf("%s: %q runs neither api nor sweepcron", cl.where, exe)
		}
		return name, nil
	}
	if strings.Contains(exe, "/") {
		if name, ok := img.installed[exe]; ok {
			return name, nil
		}
		return "", fmt.Errorf("%s: %q is not installed in the image (it holds %v)", cl.where, exe, slices.Sorted(maps.Keys(img.installed)))
	}
	for _, dir := range img.path {
		if name, ok := img.installed[path.Join(dir, exe)]; ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%s: %q is not found on the image's PATH %v (installed: %v)", cl.where, exe, img.path, slices.Sorted(maps.Keys(img.installed)))
}

// mutation is a command line with one flag or subcommand renamed.
type mutation struct {
	argv []string
	flag bool
}

// mutations renames, one at a time, every flag of a command line and every word that is not a
// flag's value (a subcommand). A value after "--flag value" is left alone: whether the flag takes
// one is the binary's business, and a free-form value (a duration, a name list) could be renamed
// and still be accepted.
func mutations(argv []string) []mutation {
	var out []mutation
	for i := 1; i < len(argv); i++ {
		tok := argv[i]
		m := slices.Clone(argv)
		switch {
		case strings.HasPrefix(tok, "-"):
			name, value, hasValue := strings.Cut(tok, "=")
			m[i] = name + "-renamed"
			if hasValue {
				m[i] += "=" + value
			}
			out = append(out, mutation{argv: m, flag: true})
		case i == 1 || !strings.HasPrefix(argv[i-1], "-") || strings.Contains(argv[i-1], "="):
			m[i] = tok + "-renamed"
			out = append(out, mutation{argv: m})
		}
	}
	return out
}

// TestCommandLines runs every command line of the deployment files against the real binaries:
// the executable must be one the image (or the host install) holds, and the binary must accept
// every subcommand and flag. A renamed flag fails here, not in production.
func TestCommandLines(t *testing.T) {
	img := loadImage(t)
	lines := allCommandLines(t, img)
	// Dockerfile CMD, compose migrate/api/cron, Kubernetes migrate/api/sweepcron, systemd
	// migrate/api/sweepcron: fewer means the extraction lost some.
	if len(lines) < 10 {
		t.Fatalf("found %d command lines, want at least 10: %v", len(lines), lines)
	}
	bin := buildBinaries(t)
	for _, cl := range lines {
		if slices.ContainsFunc(cl.argv, func(a string) bool { return strings.Contains(a, sentinel) }) {
			t.Fatalf("%s: %q contains %q, which this test uses as its sentinel", cl.where, cl.argv, sentinel)
		}
	}

	for _, cl := range lines {
		t.Run(cl.where, func(t *testing.T) {
			name, err := binaryOf(cl, img)
			if err != nil {
				t.Fatal(err)
			}
			if ok, out := accepts(t, filepath.Join(bin, name), cl.argv[1:]); !ok {
				t.Errorf("%s: the real %s refuses %q:\n%s", cl.where, name, cl.argv, out)
			}
		})
	}

	// The check above would pass against any binary that accepts anything. Each mutation of
	// each command line must be refused, or the check proves nothing for that line.
	t.Run("renamed flags and subcommands are refused", func(t *testing.T) {
		var flags, words int
		for _, cl := range lines {
			name, err := binaryOf(cl, img)
			if err != nil {
				continue // reported above
			}
			for _, m := range mutations(cl.argv) {
				if ok, out := accepts(t, filepath.Join(bin, name), m.argv[1:]); ok {
					t.Errorf("%s: the mutated %q was accepted, so this test cannot tell it from the real one:\n%s", cl.where, m.argv, out)
				}
				if m.flag {
					flags++
				} else {
					words++
				}
			}
		}
		if flags == 0 || words == 0 {
			t.Errorf("mutated %d flags and %d subcommands: the files no longer exercise both kinds of check", flags, words)
		}
	})

	// The same, end to end through a file: a copy of compose.yaml with the cron's flag renamed
	// must fail the check.
	t.Run("a manifest with a renamed flag fails", func(t *testing.T) {
		text := readFile(t, composeFile)
		const flag = `"--every"`
		if !strings.Contains(text, flag) {
			t.Fatalf("%s no longer contains %s; update this test", composeFile, flag)
		}
		broken := filepath.Join(t.TempDir(), "compose.yaml")
		if err := os.WriteFile(broken, []byte(strings.Replace(text, flag, `"--evry"`, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		refused := 0
		for _, cl := range composeCommands(t, broken, img) {
			name, err := binaryOf(cl, img)
			if err != nil {
				t.Fatal(err)
			}
			if ok, _ := accepts(t, filepath.Join(bin, name), cl.argv[1:]); !ok {
				refused++
			}
		}
		if refused != 1 {
			t.Errorf("the copy with --evry has %d refused command lines, want 1", refused)
		}
	})
}
