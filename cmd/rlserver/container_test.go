package main

import (
	"debug/elf"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// No Docker engine runs here, so these tests run what the container would:
// the binary the Dockerfile builds, with the Dockerfile's ENV, ENTRYPOINT
// and HEALTHCHECK, plus the settings of the `docker run` line in its
// comment or of compose.yaml (environment, secrets, volumes). Paths inside
// the container (/data, /run/secrets/...) become temporary ones; the
// server listens on 127.0.0.1 port 0 instead of 0.0.0.0:6380 once the
// container's own addresses have passed validation (protected mode).

// image is what the Dockerfile says about the running container.
type image struct {
	env         []string // ENV, as KEY=VALUE
	entrypoint  []string
	healthcheck []string
	volume      string
	buildLine   string
}

func readDockerfile(t *testing.T) image {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var img image
	jsonArray := func(s string) []string {
		var out []string
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			t.Fatalf("Dockerfile: %q is not a JSON array: %v", s, err)
		}
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "ENV "):
			img.env = append(img.env, strings.Fields(strings.TrimPrefix(line, "ENV "))...)
		case strings.HasPrefix(line, "ENTRYPOINT "):
			img.entrypoint = jsonArray(strings.TrimPrefix(line, "ENTRYPOINT "))
		case strings.HasPrefix(line, "HEALTHCHECK "):
			_, cmd, _ := strings.Cut(line, " CMD ")
			img.healthcheck = jsonArray(cmd)
		case strings.HasPrefix(line, "VOLUME "):
			img.volume = jsonArray(strings.TrimPrefix(line, "VOLUME "))[0]
		case strings.HasPrefix(line, "RUN CGO_ENABLED=0 go build"):
			img.buildLine = line
		}
	}
	if len(img.entrypoint) == 0 || len(img.healthcheck) == 0 || img.volume == "" {
		t.Fatalf("Dockerfile lacks ENTRYPOINT, HEALTHCHECK or VOLUME: %+v", img)
	}
	return img
}

// container is one way of running the image: its environment and
// arguments, as the container sees them, and docker's stop grace.
type container struct {
	env     []string
	args    []string
	secrets map[string]bool // paths under /run/secrets
	volumes []string        // container paths mounted
	grace   time.Duration   // docker stop's SIGTERM-to-SIGKILL time
}

// dockerRunForm reads the `docker run` line of the Dockerfile's comment.
func dockerRunForm(t *testing.T) container {
	t.Helper()
	b, _ := os.ReadFile("../../Dockerfile")
	text := regexp.MustCompile(`\\\n#\s*`).ReplaceAllString(string(b), " ")
	m := regexp.MustCompile(`(?m)^#\s*docker run (.*)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("the Dockerfile's comment shows no docker run line")
	}
	c := container{secrets: map[string]bool{}, grace: 10 * time.Second}
	words := strings.Fields(m[1])
	for i := 0; i < len(words); i++ {
		switch w := words[i]; w {
		case "-e":
			i++
			c.env = append(c.env, words[i])
		case "-v":
			i++
			parts := strings.Split(strings.Trim(words[i], `"`), ":")
			if strings.HasPrefix(parts[1], "/run/secrets/") {
				c.secrets[parts[1]] = true
			} else {
				c.volumes = append(c.volumes, parts[1])
			}
		case "-p", "--name":
			i++
		case "-d":
		case "--stop-timeout":
			i++
			s, err := time.ParseDuration(words[i] + "s")
			if err != nil {
				t.Fatal(err)
			}
			c.grace = s
		default:
			if strings.HasPrefix(w, "-") {
				t.Fatalf("docker run option %s: unknown to this test", w)
			}
			c.args = words[i+1:] // after the image name
			return c
		}
	}
	return c
}

// composeForm reads compose.yaml's rlserver service.
func composeForm(t *testing.T) container {
	t.Helper()
	b, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Build           string            `yaml:"build"`
			Command         []string          `yaml:"command"`
			Environment     map[string]string `yaml:"environment"`
			Secrets         []string          `yaml:"secrets"`
			Volumes         []string          `yaml:"volumes"`
			StopGracePeriod string            `yaml:"stop_grace_period"`
		} `yaml:"services"`
		Secrets map[string]struct {
			File string `yaml:"file"`
		} `yaml:"secrets"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	svc, ok := f.Services["rlserver"]
	if !ok || svc.Build != "." {
		t.Fatalf("compose.yaml: no rlserver service built from this directory: %+v", f.Services)
	}
	c := container{args: svc.Command, secrets: map[string]bool{}, grace: 10 * time.Second}
	for k, v := range svc.Environment {
		c.env = append(c.env, k+"="+v)
	}
	for _, s := range svc.Secrets {
		if f.Secrets[s].File == "" {
			t.Fatalf("compose.yaml: secret %s has no file", s)
		}
		c.secrets["/run/secrets/"+s] = true
	}
	for _, v := range svc.Volumes {
		c.volumes = append(c.volumes, strings.Split(v, ":")[1])
	}
	if svc.StopGracePeriod != "" {
		if c.grace, err = time.ParseDuration(svc.StopGracePeriod); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := f.Services["prometheus"]; !ok {
		t.Fatal("compose.yaml: no prometheus service")
	}
	return c
}

// TestContainerFormsServeAndPassTheirHealthCheck runs the image's binary as
// each documented form would, and its HEALTHCHECK beside it.
func TestContainerFormsServeAndPassTheirHealthCheck(t *testing.T) {
	t.Parallel()
	img := readDockerfile(t)
	for name, form := range map[string]func(*testing.T) container{"docker run": dockerRunForm, "compose": composeForm} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runContainer(t, img, form(t))
		})
	}
}

func runContainer(t *testing.T, img image, c container) {
	// The container's filesystem: the volume and the secrets.
	root := t.TempDir()
	hostPath := func(p string) string { return filepath.Join(root, p) }
	const password = "container-s3cret"
	for p := range c.secrets {
		os.MkdirAll(filepath.Dir(hostPath(p)), 0o755)
		os.WriteFile(hostPath(p), []byte(password+"\n"), 0o644)
	}
	if !slices.Contains(c.volumes, img.volume) {
		t.Fatalf("%s (the image's VOLUME) is not mounted: volumes %v", img.volume, c.volumes)
	}
	// The container's environment: the image's, then the form's.
	env := append(append([]string{}, img.env...), c.env...)
	for i, kv := range env {
		for _, p := range append([]string{img.volume}, slices.Collect(maps.Keys(c.secrets))...) {
			kv = strings.ReplaceAll(kv, "="+p, "="+hostPath(p))
		}
		env[i] = kv
	}
	args := append(append([]string{}, img.entrypoint[1:]...), c.args...)

	// As configured, the container passes validation, protected mode
	// included (it listens on 0.0.0.0), and persists to its volume.
	cfg, err := loadConfig(args, env)
	if err != nil {
		t.Fatalf("the container's settings are refused: %v", err)
	}
	if cfg.dataDir != hostPath(img.volume) || cfg.password != password {
		t.Fatalf("data dir %q (want the volume), password %q (want the secret's)", cfg.dataDir, cfg.password)
	}
	if c.grace <= cfg.shutdownGrace {
		t.Errorf("docker stops the container after %v, before rlserver's shutdown budget of %v ends", c.grace, cfg.shutdownGrace)
	}

	// Served on loopback, port 0.
	local := make([]string, len(env))
	for i, kv := range env {
		kv = strings.ReplaceAll(kv, "0.0.0.0:6380", "127.0.0.1:0")
		local[i] = strings.ReplaceAll(kv, "0.0.0.0:9121", "127.0.0.1:0")
	}
	p := spawnEnv(t, local, args...)
	if p.metrics == "" {
		t.Fatalf("the container serves no metrics:\n%s", p.out.String())
	}

	// The health check runs with the container's environment only.
	hc := exec.Command(binary(t), img.healthcheck[1:]...)
	for i, a := range hc.Args {
		hc.Args[i] = strings.ReplaceAll(a, "127.0.0.1:6380", p.addr)
	}
	hc.Env = local
	if out, err := hc.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "PONG" {
		t.Fatalf("HEALTHCHECK %v: %v %s", hc.Args, err, out)
	}

	// Prometheus scrapes the metrics port the image serves on.
	prom, err := os.ReadFile("../../deploy/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(prom), `"rlserver:9121"`) || !slices.Contains(img.env, "RLSERVER_METRICS_ADDR=0.0.0.0:9121") {
		t.Fatalf("deploy/prometheus.yml does not scrape the image's metrics address:\n%s", prom)
	}
	res, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "rl_rules ") {
		t.Fatalf("/metrics: %d\n%.300s", res.StatusCode, body)
	}
}

// TestDockerfileBuild checks the test binary is built as the Dockerfile
// builds it, and that the result is static (it runs on distroless/static).
func TestDockerfileBuild(t *testing.T) {
	t.Parallel()
	img := readDockerfile(t)
	if !strings.Contains(img.buildLine, `go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/rlserver ./cmd/rlserver`) {
		t.Fatalf("the Dockerfile's build line changed (%q): update dockerBuildFlags to build the same way", img.buildLine)
	}
	f, err := elf.Open(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary is dynamically linked (has an interpreter)")
		}
	}
	out, err := exec.Command(binary(t), "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "rlserver test-docker" {
		t.Fatalf("--version: %v %q", err, out)
	}
}

// TestDockerignore keeps the build context to the sources.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", "data/", "node_modules/", "rlpass"} {
		if !slices.Contains(strings.Fields(string(b)), want) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
}
