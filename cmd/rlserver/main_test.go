package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"

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

// startedLine is the start-up log line; its addr= is the RESP address.
var startedLine = regexp.MustCompile(`msg="rlserver started".* addr=(127\.0\.0\.1:\d+)`)

// startRun runs the whole program in-process on an ephemeral port and
// returns its address; the program stops when the test ends.
func startRun(t *testing.T, args ...string) string {
	t.Helper()
	addr, _ := startRunWith(t, nil, args...)
	return addr
}

func TestServesBuiltInDefaults(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
