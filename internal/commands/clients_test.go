package commands_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/internal/testskip"
)

// The client patterns of docs/compatibility.md, run by client libraries
// nobody here wrote: go-redis (RESP2 and RESP3), redis-cli, redis-py and
// ioredis. Each runs against a server with a frozen clock and the rule
// "five" (fixed_window, 5 per minute), and asserts exact replies. A missing
// tool skips its test with a message saying how to install it; .ci/run
// installs them all.

const clientsDir = "../../testdata/clients"

func compatServer(t *testing.T) *testserver.Server {
	return startServer(t, testserver.Def("five", "fixed_window", "5", "1m", ""))
}

func TestGoRedisPatterns(t *testing.T) { testserver.Models(t, testGoRedisPatterns) }

func testGoRedisPatterns(t *testing.T) {
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		ts := compatServer(t)
		c := ts.Client(t, protocol)
		ctx := context.Background()

		// The Redis docs' INCR limiter inside MULTI/EXEC.
		for want := int64(1); want <= 2; want++ {
			var incr *redis.IntCmd
			var expire *redis.BoolCmd
			if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				incr = p.Incr(ctx, "ip:1")
				expire = p.Expire(ctx, "ip:1", 10*time.Second)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if incr.Val() != want || !expire.Val() {
				t.Fatalf("transaction %d: INCR %d, EXPIRE %v", want, incr.Val(), expire.Val())
			}
		}
		if ttl := c.TTL(ctx, "ip:1").Val(); ttl != 10*time.Second {
			t.Fatalf("TTL %v", ttl)
		}
		// INCR, then EXPIRE when the count is 1.
		if n := c.Incr(ctx, "ip:2").Val(); n != 1 || !c.Expire(ctx, "ip:2", 10*time.Second).Val() || c.Incr(ctx, "ip:2").Val() != 2 {
			t.Fatal("INCR then EXPIRE")
		}
		// The key expires with the clock, even if nobody reads it.
		ts.Clock.Advance(10 * time.Second)
		if n, err := c.Exists(ctx, "ip:1", "ip:2").Result(); err != nil || n != 0 {
			t.Fatalf("after the TTL: EXISTS %d %v", n, err)
		}

		// SET NX PX.
		if ok, _ := c.SetNX(ctx, "lock:1", "holder", 1500*time.Millisecond).Result(); !ok {
			t.Fatal("SET NX PX on a new key")
		}
		if ok, _ := c.SetNX(ctx, "lock:1", "other", 1500*time.Millisecond).Result(); ok {
			t.Fatal("SET NX PX on a taken key")
		}
		if v := c.Get(ctx, "lock:1").Val(); v != "holder" {
			t.Fatalf("GET %q", v)
		}
		ts.Clock.Advance(1500 * time.Millisecond)
		if err := c.Get(ctx, "lock:1").Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("GET after expiry: %v", err)
		}

		// CL.THROTTLE vectors, including "2 s later".
		throttle := func(args ...any) string {
			v, err := c.Do(ctx, append([]any{"CL.THROTTLE"}, args...)...).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprint(v)
		}
		for _, tt := range []struct {
			args []any
			want string
		}{
			{[]any{"user123", 15, 30, 60}, "[0 16 15 -1 2]"},
			{[]any{"k", 0, 1, 2, 1}, "[0 1 0 -1 2]"},
			{[]any{"k", 0, 1, 2, 1}, "[1 1 0 2 2]"},
			{[]any{"k2", 5, 5, 3600}, "[0 6 5 -1 720]"},
		} {
			if got := throttle(tt.args...); got != tt.want {
				t.Fatalf("CL.THROTTLE %v: %s, want %s", tt.args, got, tt.want)
			}
		}
		ts.Clock.Advance(2 * time.Second)
		if got := throttle("k", 0, 1, 2, 1); got != "[0 1 0 -1 2]" {
			t.Fatalf("CL.THROTTLE 2 s later: %s", got)
		}

		// Pipelined RL.ALLOW: seven at a limit of five.
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for range 7 {
				p.Do(ctx, "RL.ALLOW", "client:1", "five")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		allowed := 0
		for _, cmd := range cmds {
			if testserver.Decision(t, cmd.(*redis.Cmd))[0] == 1 {
				allowed++
			}
		}
		if allowed != 5 {
			t.Fatalf("pipelined: %d allowed, want 5", allowed)
		}

		// Errors are redis.Error.
		for _, args := range [][]any{{"NOSUCHCMD"}, {"RL.ALLOW", "k", "five", "abc"}} {
			var re redis.Error
			if err := c.Do(ctx, args...).Err(); !errors.As(err, &re) {
				t.Fatalf("%v: %v is not a redis.Error", args, err)
			}
		}
	})
}

// TestMultiIsAtomic: writers move a unit between two keys (on different
// shards) inside MULTI while readers read both inside MULTI; a reader must
// never see the move half done.
func TestMultiIsAtomic(t *testing.T) { testserver.Models(t, testMultiIsAtomic) }

func testMultiIsAtomic(t *testing.T) {
	ts := compatServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	setup := ts.Client(t, 2)
	setup.Set(ctx, "a", 1000, 0)
	setup.Set(ctx, "b", 1000, 0)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			c := redis.NewClient(&redis.Options{Addr: ts.Addr, PoolSize: 1, Protocol: 2 + i%2})
			defer c.Close()
			for range 150 {
				if i%2 == 0 {
					c.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.Decr(ctx, "a")
						p.Incr(ctx, "b")
						return nil
					})
					continue
				}
				var a, b *redis.StringCmd
				if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
					a, b = p.Get(ctx, "a"), p.Get(ctx, "b")
					return nil
				}); err != nil {
					t.Error(err)
					return
				}
				x, _ := a.Int()
				y, _ := b.Int()
				if x+y != 2000 {
					t.Errorf("read a=%d b=%d mid-transaction", x, y)
					return
				}
			}
		})
	}
	wg.Wait()
	if a, b := setup.Get(ctx, "a").Val(), setup.Get(ctx, "b").Val(); a != "-200" || b != "2200" {
		t.Fatalf("after 8×150 moves: a=%s b=%s", a, b)
	}
}

func TestRedisCliPatterns(t *testing.T) { testserver.Models(t, testRedisCliPatterns) }

func testRedisCliPatterns(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		testskip.Skip(t, "redis-cli", "apt-get install redis-tools")
	}
	ts := compatServer(t)
	host, port, _ := strings.Cut(ts.Addr, ":")
	run := func(stdin string, args ...string) string {
		cmd := exec.Command(cli, append([]string{"-h", host, "-p", port}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil && !strings.Contains(string(out), "ERR") {
			t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tests := []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"MULTI INCR EXPIRE EXEC", "MULTI\nINCR ip:1\nEXPIRE ip:1 10\nEXEC\n", nil, "OK\nQUEUED\nQUEUED\n1\n1\n"},
		{"INCR then EXPIRE at 1", "INCR ip:2\nEXPIRE ip:2 10\nINCR ip:2\nTTL ip:2\n", nil, "1\n1\n2\n10\n"},
		{"SET NX PX", "SET lock:1 holder NX PX 1500\nSET lock:1 other NX PX 1500\nPTTL lock:1\n", nil, "OK\n\n1500\n"},
		{"CL.THROTTLE user123", "", []string{"CL.THROTTLE", "user123", "15", "30", "60"}, "0\n16\n15\n-1\n2\n"},
		{"CL.THROTTLE k twice", "CL.THROTTLE k 0 1 2 1\nCL.THROTTLE k 0 1 2 1\n", nil, "0\n1\n0\n-1\n2\n1\n1\n0\n2\n2\n"},
		{"CL.THROTTLE k2", "", []string{"CL.THROTTLE", "k2", "5", "5", "3600"}, "0\n6\n5\n-1\n720\n"},
		{"seven RL.ALLOW at five", strings.Repeat("RL.ALLOW client:1 five\n", 7), nil,
			"1\n5\n4\n0\n60000\n0\n1\n5\n3\n0\n60000\n0\n1\n5\n2\n0\n60000\n0\n1\n5\n1\n0\n60000\n0\n" +
				"1\n5\n0\n0\n60000\n0\n0\n5\n0\n60000\n60000\n0\n0\n5\n0\n60000\n60000\n0\n"},
		{"unknown command", "", []string{"NOSUCHCMD", "x"}, "ERR unknown command 'NOSUCHCMD', with args beginning with: 'x' \n\n"}, // redis-cli adds a blank line after an error
		{"bad argument", "", []string{"RL.ALLOW", "k", "five", "abc"}, "ERR value is not an integer or out of range\n\n"},
	}
	for _, tt := range tests {
		if got := run(tt.stdin, tt.args...); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

func TestRedisPyPatterns(t *testing.T) { testserver.Models(t, testRedisPyPatterns) }

func testRedisPyPatterns(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import redis").Run(); err != nil {
		testskip.Skip(t, "redis-py", "apt-get install python3-redis")
	}
	ts := compatServer(t)
	runScript(t, py, filepath.Join(clientsDir, "redis_py.py"), ts.Addr)
}

func TestIoredisPatterns(t *testing.T) { testserver.Models(t, testIoredisPatterns) }

func testIoredisPatterns(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testskip.Skip(t, "node", "apt-get install nodejs npm")
	}
	dir := filepath.Join(clientsDir, "ioredis")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ioredis")); err != nil {
		testskip.Skip(t, "ioredis", "npm ci --prefix testdata/clients/ioredis")
	}
	ts := compatServer(t)
	runScript(t, node, filepath.Join(dir, "patterns.js"), ts.Addr)
}

func runScript(t *testing.T, interpreter, script, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, interpreter, script)
	cmd.Env = append(os.Environ(), "RLSERVER_ADDR="+addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(script), err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
