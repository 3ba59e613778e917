package layering

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rlserver/rlserver"

// allowed lists, for every package of the module, the module's packages it
// may import directly. A package missing here fails the test: adding one
// means deciding where it sits. The rules, from the bottom up:
//
//   - algorithms, ttl, clock, the RESP codec and the small helpers import
//     nothing of the module;
//   - the keyspace imports neither the service nor any protocol;
//   - the snapshot format imports no protocol and no service;
//   - the service is the only way front ends reach the keyspace: no front
//     end (server, commands, and later gRPC, cluster) imports keyspace,
//     snapshot or ttl.
var allowed = map[string][]string{
	// The bottom: pure maths, the timing wheel, the clock, the RESP codec,
	// the data types, small helpers.
	"internal/algorithms": {},
	"internal/ttl":        {},
	"internal/clock":      {},
	"internal/resp":       {},
	"internal/values":     {},
	"internal/scripting":  {},
	"internal/yamldoc":    {},
	"internal/rules":      {"internal/algorithms", "internal/yamldoc"},
	"internal/records":    {"internal/algorithms"},

	// The keyspace and what persists it.
	"internal/keyspace": {"internal/algorithms", "internal/records", "internal/rules", "internal/ttl"},
	"internal/snapshot": {"internal/algorithms", "internal/rules", "internal/keyspace", "internal/values"},

	// The use cases.
	"internal/service": {"internal/algorithms", "internal/rules", "internal/keyspace", "internal/snapshot"},

	// Front ends: connections and the Redis command table, the Envoy rate
	// limit service, the cluster's topology and forwarding; and what reports
	// on them. None reaches the keyspace but through the service.
	"internal/server": {"internal/resp"},
	"internal/commands": {"internal/algorithms", "internal/rules", "internal/service", "internal/resp", "internal/server",
		"internal/values", "internal/scripting", "internal/cluster", "internal/cluster/forward"},
	"internal/envoy":           {"internal/algorithms", "internal/rules", "internal/envoy/config", "internal/service", "internal/h2grpc"},
	"internal/h2grpc":          {},
	"internal/envoy/config":    {"internal/algorithms", "internal/rules", "internal/yamldoc"},
	"internal/cluster":         {},
	"internal/cluster/forward": {},
	"internal/cluster/admin":   {"internal/cluster", "internal/cluster/forward"},
	"internal/cluster/owner":   {"internal/algorithms", "internal/cluster", "internal/cluster/forward", "internal/rules", "internal/service"},
	"internal/metrics":         {"internal/service", "internal/server"},

	// The program, which wires everything.
	"cmd/rlserver": {"internal/algorithms", "internal/clock", "internal/commands", "internal/keyspace", "internal/metrics", "internal/scripting",
		"internal/resp", "internal/rules", "internal/server", "internal/service", "internal/snapshot", "internal/yamldoc",
		"internal/envoy", "internal/envoy/config", "internal/cluster", "internal/cluster/admin", "internal/cluster/forward", "internal/cluster/owner"},

	// The public Go client and its middleware: rlserver from the outside.
	"client":                   {},
	"client/httplimit":         {"client", "internal/algorithms", "internal/rules", "internal/yamldoc"},
	"client/internal/resptest": {"internal/algorithms"},
	"examples/httpapi":         {"client/httplimit"},

	// Test support and benchmarks.
	"internal/testserver":                {"internal/cluster", "internal/commands", "internal/keyspace", "internal/resp", "internal/rules", "internal/server", "internal/service", "internal/snapshot"},
	"internal/testskip":                  {},
	"internal/rltest":                    {},
	"internal/layering":                  {},
	"internal/envoy/envoytest":           {"internal/algorithms", "internal/envoy", "internal/rules"},
	"internal/cluster/internal/fakenode": {"internal/testskip"},
	"bench/harness":                      {},
	"bench/grpcload":                     {},
	"bench/grpcfake":                     {"internal/envoy", "internal/envoy/envoytest"},
}

// frontEnds may reach the keyspace only through the service.
var frontEnds = []string{"internal/server", "internal/commands", "internal/envoy", "internal/envoy/config",
	"internal/cluster", "internal/cluster/forward", "internal/cluster/admin", "internal/cluster/owner", "internal/metrics", "client", "client/httplimit"}

// forbiddenToFrontEnds are the packages behind the service.
var forbiddenToFrontEnds = []string{"internal/keyspace", "internal/snapshot", "internal/ttl"}

type listed struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	GoFiles      []string
	Dir          string
}

// packages lists the module's packages with `go list -json`.
func packages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// root is the module's directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }

// internal returns the module's packages among imports.
func internal(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if strings.HasPrefix(imp, module+"/") {
			out = append(out, rel(imp))
		}
	}
	return out
}

func TestLayering(t *testing.T) {
	for _, p := range packages(t) {
		name := rel(p.ImportPath)
		may, known := allowed[name]
		if !known {
			t.Errorf("%s is not in the layering table: add it to allowed, with what it may import", name)
			continue
		}
		for _, imp := range internal(p.Imports) {
			if !slices.Contains(may, imp) {
				t.Errorf("%s imports %s, which the layering does not allow", name, imp)
			}
		}
		if slices.Contains(frontEnds, name) {
			for _, imp := range internal(append(p.TestImports, p.XTestImports...)) {
				if slices.Contains(forbiddenToFrontEnds, imp) {
					t.Logf("%s's tests import %s (allowed in tests, to build a keyspace)", name, imp)
				}
			}
		}
	}
	for name, may := range allowed {
		if slices.Contains(frontEnds, name) {
			for _, f := range forbiddenToFrontEnds {
				if slices.Contains(may, f) {
					t.Errorf("the table lets front end %s import %s", name, f)
				}
			}
		}
	}
}

// nonTestLines counts the lines of p's non-test Go files.
func nonTestLines(t *testing.T, p listed) int {
	n := 0
	for _, f := range p.GoFiles {
		b, err := os.ReadFile(filepath.Join(p.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(b), "\n")
	}
	return n
}

// TestNoPackageHoldsAThird: no package holds more than a third of the
// module's non-test code, so no package is the whole server again.
func TestNoPackageHoldsAThird(t *testing.T) {
	total := 0
	lines := map[string]int{}
	for _, p := range packages(t) {
		n := nonTestLines(t, p)
		lines[rel(p.ImportPath)] = n
		total += n
	}
	for name, n := range lines {
		if 3*n > total {
			t.Errorf("%s holds %d of %d non-test lines, more than a third", name, n, total)
		}
	}
}

// maxFunctionLines bounds a non-test function's length.
const maxFunctionLines = 100

func TestNoLongFunctions(t *testing.T) {
	fset := token.NewFileSet()
	for _, p := range packages(t) {
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
				if end-start+1 > maxFunctionLines {
					t.Errorf("%s:%d: %s is %d lines long (at most %d)", rel(p.ImportPath)+"/"+name, start, fn.Name.Name, end-start+1, maxFunctionLines)
				}
			}
		}
	}
}
