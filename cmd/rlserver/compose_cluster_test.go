package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/rlserver/rlserver/internal/cluster"
)

// TestComposeClusterFile holds compose.cluster.yaml to docs/cluster.md's
// copy, and checks what it configures: three nodes whose environment (with
// the image's) is a valid cluster-mode configuration announcing their
// service names, and a one-shot service that creates the cluster of them.
func TestComposeClusterFile(t *testing.T) {
	file, err := os.ReadFile("../../compose.cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/cluster.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+string(file)+"```\n") {
		t.Error("docs/cluster.md's compose.cluster.yaml differs from the file")
	}
	var f struct {
		Services map[string]struct {
			Environment map[string]string
			Entrypoint  []string
		}
	}
	if err := yaml.Unmarshal(file, &f); err != nil {
		t.Fatal(err)
	}
	pass := filepath.Join(t.TempDir(), "rlpass")
	os.WriteFile(pass, []byte("secret"), 0o644)
	// The Dockerfile's ENV, which every container has.
	image := []string{"RLSERVER_ADDR=0.0.0.0:6380", "RLSERVER_DATA_DIR=/data", "RLSERVER_METRICS_ADDR=0.0.0.0:9121"}
	var nodes []string
	for _, name := range []string{"node1", "node2", "node3"} {
		svc, ok := f.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		env := append([]string(nil), image...)
		for k, v := range svc.Environment {
			if k == "RLSERVER_REQUIREPASS_FILE" {
				v = pass
			}
			env = append(env, k+"="+v)
		}
		cfg, err := loadConfig(nil, env)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.clusterMode != "on" || cfg.clusterAnnounce != name+":6380" || cfg.password != "secret" {
			t.Errorf("%s: cluster %q, announced at %q, password set %v", name, cfg.clusterMode, cfg.clusterAnnounce, cfg.password != "")
		}
		nodes = append(nodes, name+":6380")
	}
	init := f.Services["cluster-init"].Entrypoint
	want := append([]string{"/usr/local/bin/rlserver", "cluster", "create"}, nodes...)
	if strings.Join(init, " ") != strings.Join(want, " ") {
		t.Errorf("cluster-init runs %q, want %q", init, want)
	}
	for _, a := range nodes {
		if _, _, err := cluster.SplitAddr(a); err != nil {
			t.Errorf("node address %s: %v", a, err)
		}
	}
}
