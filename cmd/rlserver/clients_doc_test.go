package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testskip"
)

// The snippets of docs/clients.md, run against a real server with the
// built-in rules. Go snippets live here, between "docs/clients.md: NAME"
// markers, and the test checks the page shows them as written, except that
// the page dials "127.0.0.1:6380" where the code dials addr, and prints
// with fmt.Printf( where the code writes fmt.Fprintf(w, . The Python,
// JavaScript and redis-cli snippets are taken from the page and run with
// the server's port in place of 6380.

// --- docs/clients.md: go-allow ---
// Decision is RL.ALLOW's reply.
type Decision struct {
	Allowed                       bool
	Limit, Remaining              int64
	RetryAfter, ResetAfter, Delay time.Duration
}

// Allow asks rlserver whether key may spend cost units of rule. It reads
// the reply in either protocol: a map in RESP3 (go-redis's default), an
// array in RESP2.
func Allow(ctx context.Context, rdb *redis.Client, key, rule string, cost int64) (Decision, error) {
	res, err := rdb.Do(ctx, "RL.ALLOW", key, rule, cost).Result()
	if err != nil {
		return Decision{}, err // redis.Error for ERR unknown rule 'x' and the like
	}
	var f [6]int64
	switch r := res.(type) {
	case map[interface{}]interface{}: // RESP3
		for i, name := range []string{"allowed", "limit", "remaining", "retry_after_ms", "reset_after_ms", "delay_ms"} {
			f[i], _ = r[name].(int64)
		}
	case []interface{}: // RESP2
		for i := range min(len(r), len(f)) {
			f[i], _ = r[i].(int64)
		}
	default:
		return Decision{}, fmt.Errorf("RL.ALLOW: unexpected reply %T", res)
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	return Decision{Allowed: f[0] == 1, Limit: f[1], Remaining: f[2],
		RetryAfter: ms(f[3]), ResetAfter: ms(f[4]), Delay: ms(f[5])}, nil
}

// --- end ---

// goUse is the go-use snippet; it prints to w what the page's prints.
func goUse(ctx context.Context, w io.Writer, addr string) error {
	// --- docs/clients.md: go-use ---
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	d, err := Allow(ctx, rdb, "user:42", "burst", 1)
	if err != nil {
		return err
	}
	if d.Allowed {
		fmt.Fprintf(w, "allowed, %d left\n", d.Remaining)
	} else {
		fmt.Fprintf(w, "denied, retry in %v\n", d.RetryAfter)
	}
	// --- end ---
	return nil
}

func goRESP2(ctx context.Context, w io.Writer, addr string) error {
	// --- docs/clients.md: go-resp2 ---
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer rdb.Close()
	// [allowed, limit, remaining, retry_after_ms, reset_after_ms, delay_ms]
	v, err := rdb.Do(ctx, "RL.ALLOW", "user:42", "burst").Int64Slice()
	if err != nil {
		return err
	}
	if v[0] == 1 {
		fmt.Fprintf(w, "allowed, %d left\n", v[2])
	} else {
		fmt.Fprintf(w, "denied, retry in %d ms\n", v[3])
	}
	// --- end ---
	return nil
}

// snippets returns the page's fenced code blocks by the name in the
// <!-- snippet: NAME --> comment before each.
func snippets(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)<!-- snippet: ([a-z0-9-]+) -->\n```[a-z]*\n(.*?)```\n").FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// goSnippets returns this file's marked regions, unindented.
func goSnippets(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("clients_doc_test.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)\n(\t*)// --- docs/clients\.md: ([a-z0-9-]+) ---\n(.*?)\n\t*// --- end ---`).FindAllStringSubmatch(string(b), -1) {
		indent := m[1]
		var lines []string
		for _, line := range strings.Split(m[3], "\n") {
			lines = append(lines, strings.TrimPrefix(line, indent))
		}
		text := strings.TrimSpace(strings.Join(lines, "\n")) + "\n"
		text = strings.ReplaceAll(text, "Addr: addr", `Addr: "127.0.0.1:6380"`)
		out[m[2]] = strings.ReplaceAll(text, "fmt.Fprintf(w, ", "fmt.Printf(")
	}
	return out
}

func TestClientDocsGoSnippets(t *testing.T) {
	t.Parallel()
	page, code := snippets(t), goSnippets(t)
	for _, name := range []string{"go-allow", "go-use", "go-resp2"} {
		if page[name] != code[name] {
			t.Errorf("docs/clients.md's %s differs from clients_doc_test.go's:\n--- page\n%s--- test\n%s", name, page[name], code[name])
		}
	}
	addr := startRun(t)
	ctx := context.Background()
	for _, protocol := range []int{2, 3} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: protocol})
		defer rdb.Close()
		key := fmt.Sprintf("resp%d", protocol)
		d, err := Allow(ctx, rdb, key, "burst", 1)
		if err != nil || d != (Decision{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: time.Second}) {
			t.Errorf("Allow over RESP%d: %+v %v", protocol, d, err)
		}
		d, err = Allow(ctx, rdb, key, "burst", 10)
		if err != nil || d.Allowed || d.RetryAfter <= 0 || d.Remaining != 9 {
			t.Errorf("Allow over RESP%d past the limit: %+v %v", protocol, d, err)
		}
		var re redis.Error
		if _, err := Allow(ctx, rdb, key, "nosuchrule", 1); err == nil || !strings.Contains(err.Error(), "unknown rule") || !errors.As(err, &re) {
			t.Errorf("Allow of an unknown rule over RESP%d: %v", protocol, err)
		}
	}
	// The page's claim: the obvious Int64Slice fails over RESP3.
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if _, err := rdb.Do(ctx, "RL.ALLOW", "user:1", "burst").Int64Slice(); err == nil || !strings.Contains(err.Error(), "unexpected type=map") {
		t.Errorf("Int64Slice over RESP3: %v", err)
	}
	// go-use and go-resp2 print "allowed, 9 left" on a fresh server.
	for name, snippet := range map[string]func(context.Context, io.Writer, string) error{"go-use": goUse, "go-resp2": goRESP2} {
		var out strings.Builder
		if err := snippet(ctx, &out, startRun(t)); err != nil || out.String() != "allowed, 9 left\n" {
			t.Errorf("%s: %v, printed %q", name, err, out.String())
		}
	}
}

// TestClientDocsOtherLanguages runs the page's Python, JavaScript and
// redis-cli snippets, each against a fresh server.
func TestClientDocsOtherLanguages(t *testing.T) {
	t.Parallel()
	page := snippets(t)
	onPort := func(snippet, addr string) string {
		_, port, _ := strings.Cut(addr, ":")
		return strings.ReplaceAll(snippet, "6380", port)
	}
	t.Run("python", func(t *testing.T) {
		t.Parallel()
		py := "/usr/bin/python3"
		if exec.Command(py, "-c", "import redis").Run() != nil {
			testskip.Skip(t, "redis-py", "apt-get install python3-redis")
		}
		out, err := exec.Command(py, "-c", onPort(page["python"], startRun(t))).CombinedOutput()
		if err != nil || string(out) != "allowed, 9 left\n" {
			t.Fatalf("%v: %s", err, out)
		}
	})
	t.Run("ioredis", func(t *testing.T) {
		t.Parallel()
		node, err := exec.LookPath("node")
		if err != nil {
			testskip.Skip(t, "node", "apt-get install nodejs npm")
		}
		modules, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "clients", "ioredis", "node_modules"))
		if _, err := os.Stat(filepath.Join(modules, "ioredis")); err != nil {
			testskip.Skip(t, "ioredis", "npm ci --prefix testdata/clients/ioredis")
		}
		cmd := exec.Command(node, "-e", onPort(page["ioredis"], startRun(t)))
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		if out, err := cmd.CombinedOutput(); err != nil || string(out) != "allowed, 9 left\n" {
			t.Fatalf("%v: %s", err, out)
		}
	})
	t.Run("redis-cli", func(t *testing.T) {
		t.Parallel()
		cli, err := exec.LookPath("redis-cli")
		if err != nil {
			testskip.Skip(t, "redis-cli", "apt-get install redis-tools")
		}
		b, _ := os.ReadFile("../../docs/clients.md")
		m := regexp.MustCompile("(?s)```console\n\\$ redis-cli -p 6380 (RL\\.ALLOW [^\n]*)\n(.*?)```").FindStringSubmatch(string(b))
		if m == nil {
			t.Fatal("no redis-cli example on the page")
		}
		_, port, _ := strings.Cut(startRun(t), ":")
		out, err := exec.Command(cli, append([]string{"-p", port}, strings.Fields(m[1])...)...).CombinedOutput()
		// Not on a terminal, redis-cli prints the values alone.
		want := regexp.MustCompile(`(?m)^\d+\) \(integer\) `).ReplaceAllString(m[2], "")
		if err != nil || string(out) != want {
			t.Fatalf("redis-cli %s: %v\n got %q\nwant %q", m[1], err, out, want)
		}
	})
}
