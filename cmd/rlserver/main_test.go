package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// syncBuffer is a bytes.Buffer safe for the server's logger and the test to
// share; wrote is signalled after every write.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var addrInLog = regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)

// startRun runs the whole program in-process on an ephemeral port and
// returns its address; the program stops when the test ends.
func startRun(t *testing.T, args ...string) string {
	t.Helper()
	addr, _ := startRunWith(t, nil, args...)
	return addr
}

func TestServesBuiltInDefaults(t *testing.T) {
	addr := startRun(t)
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	v, err := c.Do(context.Background(), "RL.ALLOW", "user:1", "burst").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != int64(1) || v[1] != int64(10) {
		t.Fatalf("RL.ALLOW on the built-in 'burst' rule: %v", v)
	}
}

func TestServesARulesFile(t *testing.T) {
	addr := startRun(t, "--rules", "../../testdata/rules/good.yaml", "--shards", "8")
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	ctx := context.Background()
	if v, err := c.Do(ctx, "RL.ALLOW", "alice", "login", "5").Slice(); err != nil || v[2] != int64(0) {
		t.Fatalf("login rule from the file: %v %v", v, err)
	}
	info, _ := c.Do(ctx, "RL.INFO").Text()
	if !strings.Contains(info, "rl_shards:8\r\n") || !strings.Contains(info, "rl_rules:3\r\n") {
		t.Fatalf("RL.INFO: %s", info)
	}
	if err := c.Do(ctx, "RL.ALLOW", "alice", "token_bucket").Err(); err == nil {
		t.Fatal("a rules file should replace the built-in rules")
	}
}

func TestRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "rules.yaml")
	os.WriteFile(bad, []byte("rules:\n  - {name: api, algorithm: token_bucket, limit: 10, window: 1s}\n  - {name: login, algorithm: fixed_window, limit: 5, window: 1d}\n"), 0o644)
	tests := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--rules", bad}, 1, []string{bad, "rule 2 (login)", "field window", "'1d'"}},
		{[]string{"--rules", filepath.Join(dir, "missing.yaml")}, 1, []string{"missing.yaml", "no such file"}},
		{[]string{"--shards", "3"}, 2, []string{"--shards 3", "power of two"}},
		{[]string{"--nope"}, 2, []string{"flag provided but not defined: -nope"}},
		{[]string{"stray"}, 2, []string{`unexpected argument "stray"`}},
		{[]string{"--maxkeys-policy", "lru"}, 2, []string{`--maxkeys-policy "lru": must be evict or reject`}},
		{[]string{"--snapshot-interval", "-1s"}, 2, []string{"must not be negative"}},
		{[]string{"--addr", "256.0.0.1:1", "--protected-mode=false"}, 1, []string{"listen on 256.0.0.1:1"}},
		{[]string{"--addr", "0.0.0.0:6380"}, 2, []string{"not a loopback address and no password is set", "--requirepass-file", "--protected-mode=false"}},
		{[]string{"--addr", ":6380"}, 2, []string{"not a loopback address"}},
		{[]string{"--tls-cert", "x.pem"}, 2, []string{"--tls-cert and --tls-key go together"}},
		{[]string{"--requirepass-file", filepath.Join(dir, "nopass")}, 2, []string{"--requirepass-file", "no such file"}},
		{[]string{"--log-format", "xml"}, 2, []string{`--log-format "xml": must be text or json`}},
		{[]string{"--metrics-addr", "256.0.0.1:1"}, 1, []string{"--metrics-addr"}},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		code := run(context.Background(), nil, append([]string{"--data-dir", ""}, tt.args...), &out, &out)
		if code != tt.code {
			t.Errorf("%v: exit %d, want %d; output:\n%s", tt.args, code, tt.code, out.String())
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tt.args, w, out.String())
			}
		}
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), nil, []string{"--version"}, &out, &out); code != 0 || !strings.HasPrefix(out.String(), "rlserver ") {
		t.Fatalf("--version: %d %q", code, out.String())
	}
}

func TestHelpGroupsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), nil, []string{"--help"}, &out, &out); code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	// Every flag parseConfig defines must be printed under a group heading.
	seen := 0
	for _, g := range flagGroups {
		if !strings.Contains(out.String(), "\n"+g.title+":\n") {
			t.Errorf("--help lacks the group %q", g.title)
		}
		for _, name := range g.flags {
			seen++
			if !strings.Contains(out.String(), "  --"+name+" ") {
				t.Errorf("--help lacks --%s", name)
			}
		}
	}
	if n := strings.Count(out.String(), "\n  --"); n != seen {
		t.Errorf("--help lists %d flags, the groups %d: a flag is in no group", n, seen)
	}
}

func TestProtectedModeAllowsLoopbackAndPasswords(t *testing.T) {
	for _, args := range [][]string{
		{"--addr", "127.0.0.1:6380"}, {"--addr", "[::1]:6380"}, {"--addr", "localhost:6380"},
		{"--addr", "0.0.0.0:6380", "--requirepass", "secret"},
		{"--addr", "0.0.0.0:6380", "--protected-mode=false"},
	} {
		if _, err := parseConfig(args, io.Discard); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

func TestTimeoutTakesSecondsOrDurations(t *testing.T) {
	for arg, want := range map[string]time.Duration{"300": 300 * time.Second, "0": 0, "90s": 90 * time.Second, "5m": 5 * time.Minute} {
		c, err := parseConfig([]string{"--timeout", arg}, io.Discard)
		if err != nil || c.idleTimeout != want {
			t.Errorf("--timeout %s: %v, %v", arg, c.idleTimeout, err)
		}
	}
	if _, err := parseConfig([]string{"--timeout", "soon"}, io.Discard); err == nil {
		t.Error("--timeout soon accepted")
	}
}
