package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/rltest"
)

var bin *rltest.Binary

func TestMain(m *testing.M) {
	bin = rltest.Build()
	code := m.Run()
	bin.Remove()
	os.Exit(code)
}

// TestTheExampleAsDocumented runs the example's API with its own rules and
// limits files against a real rlserver, as docs/gateway.md describes it:
// the sixth order of a minute is refused with 429 and the draft's fields,
// another user is not affected, health checks are not limited.
func TestTheExampleAsDocumented(t *testing.T) {
	rules, err := os.ReadFile("rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := rltest.Start(t, bin, string(rules))
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	// The example's limits, with a timeout a loaded test machine keeps
	// (the 20 ms deadline is not what this test is about).
	limits, err := os.ReadFile("limits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "limits.yaml")
	os.WriteFile(path, []byte(strings.Replace(string(limits), "timeout: 20ms", "timeout: 10s", 1)), 0o644)
	handler, lim, err := protect(api(), rdb, path, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close(context.Background())
	srv := httptest.NewServer(handler)
	defer srv.Close()

	post := func(user string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/orders", nil)
		req.Header.Set("X-User", user)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i := range 5 {
		if resp := post("alice"); resp.StatusCode != http.StatusCreated {
			t.Fatalf("order %d: %s", i+1, resp.Status)
		}
	}
	resp := post("alice")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		resp.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.HasPrefix(resp.Header.Get("RateLimit"), `"orders";r=0;t=`) {
		t.Fatalf("sixth order: %s %v", resp.Status, resp.Header)
	}
	if resp := post("bob"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("bob's first order: %s", resp.Status)
	}
	for range 3 {
		resp, err := srv.Client().Get(srv.URL + "/healthz")
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		resp.Body.Close()
	}
}

// TestGatewayDocQuickstart: the quick start in docs/gateway.md builds, and
// its main is under 20 lines, as the page says.
func TestGatewayDocQuickstart(t *testing.T) {
	page, err := os.ReadFile("../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- snippet: quickstart -->\n```go\n(.*?)```\n").FindSubmatch(page)
	if m == nil {
		t.Fatal("docs/gateway.md has no quickstart snippet")
	}
	body := regexp.MustCompile(`(?s)func main\(\) \{\n(.*?)\n\}`).FindSubmatch(m[1])
	if body == nil || strings.Count(string(body[1]), "\n")+1 >= 20 {
		t.Fatalf("the quick start's main is not under 20 lines:\n%s", m[1])
	}
	// Inside the module (so its imports resolve), in a directory ./...
	// patterns skip.
	dir, err := os.MkdirTemp(".", "_quickstart")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), m[1], 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", os.DevNull, "./"+dir)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the quick start does not build: %v\n%s", err, out)
	}
}
