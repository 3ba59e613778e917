package commands_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/internal/testskip"
)

// TestMain reports, in a plain go test run, the client tests that were
// skipped for want of a client library.
func TestMain(m *testing.M) {
	code := m.Run()
	testskip.Report(code) // a skipped client test is otherwise silent in go test ./...
	os.Exit(code)
}

// startServer runs a server with the given rules (the built-in defaults
// when none) for the test.
func startServer(t testing.TB, defs ...rules.Def) *testserver.Server {
	t.Helper()
	return testserver.Start(t, testserver.Options{Rules: defs})
}

func TestAllowPeekReset(t *testing.T) { testserver.Models(t, testAllowPeekReset) }

func testAllowPeekReset(t *testing.T) {
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		ts := startServer(t, testserver.Def("r", "token_bucket", "5", "1s", ""))
		ctx := context.Background()
		c := ts.Client(t, protocol)
		for i := range 5 {
			got := testserver.Decision(t, c.Do(ctx, "RL.ALLOW", "k", "r"))
			want := [6]int64{1, 5, int64(4 - i), 0, int64(200 * (i + 1)), 0}
			if got != want {
				t.Fatalf("allow %d: %v, want %v", i, got, want)
			}
		}
		if got := testserver.Decision(t, c.Do(ctx, "RL.ALLOW", "k", "r")); got != [6]int64{0, 5, 0, 200, 1000, 0} {
			t.Fatalf("6th: %v", got)
		}
		// The client that waits retry_after_ms gets in.
		ts.Clock.Advance(200 * time.Millisecond)
		if got := testserver.Decision(t, c.Do(ctx, "RL.PEEK", "k", "r")); got != [6]int64{1, 5, 1, 0, 800, 0} {
			t.Fatalf("peek after 200ms: %v", got)
		}
		if got := testserver.Decision(t, c.Do(ctx, "RL.ALLOW", "k", "r", 1)); got[0] != 1 {
			t.Fatalf("after waiting: %v", got)
		}
		// Peek does not create state.
		if got := testserver.Decision(t, c.Do(ctx, "RL.PEEK", "fresh", "r", 5)); got != [6]int64{1, 5, 5, 0, 0, 0} {
			t.Fatalf("peek on a new key: %v", got)
		}
		if n, _ := c.DBSize(ctx).Result(); n != 1 {
			t.Fatalf("DBSIZE %d after peeking a new key, want 1", n)
		}
		if n, err := c.Do(ctx, "RL.RESET", "k", "r").Int(); err != nil || n != 1 {
			t.Fatalf("reset: %v %v", n, err)
		}
		if n, err := c.Do(ctx, "RL.RESET", "k", "r").Int(); err != nil || n != 0 {
			t.Fatalf("second reset: %v %v", n, err)
		}
		if got := testserver.Decision(t, c.Do(ctx, "RL.ALLOW", "k", "r", 5)); got[0] != 1 {
			t.Fatalf("after reset: %v", got)
		}
	})
}

func TestLeakyBucketReportsDelay(t *testing.T) { testserver.Models(t, testLeakyBucketReportsDelay) }

func testLeakyBucketReportsDelay(t *testing.T) {
	ts := startServer(t, testserver.Def("q", "leaky_bucket", "10", "1s", "3"))
	c := ts.Client(t, 2)
	ctx := context.Background()
	var delays []int64
	for range 3 {
		delays = append(delays, testserver.Decision(t, c.Do(ctx, "RL.ALLOW", "job", "q"))[5])
	}
	if fmt.Sprint(delays) != "[0 100 200]" {
		t.Fatalf("delays %v, want [0 100 200]", delays)
	}
}

func TestErrors(t *testing.T) { testserver.Models(t, testErrors) }

func testErrors(t *testing.T) {
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		ts := startServer(t, testserver.Def("r", "token_bucket", "5", "1s", ""))
		c := ts.Client(t, protocol)
		c.Do(context.Background(), "CLIENT", "SETNAME", "tester") // pins nothing; just a second command on the conn
		tests := []struct {
			args []any
			want string
		}{
			{[]any{"NOPE", "a", "b"}, "ERR unknown command 'NOPE', with args beginning with: 'a' 'b' "},
			{[]any{"nope"}, "ERR unknown command 'nope', with args beginning with: "},
			{[]any{"RL.ALLOW", "k"}, "ERR wrong number of arguments for 'rl.allow' command"},
			{[]any{"rl.allow", "k", "r", "1", "extra"}, "ERR wrong number of arguments for 'rl.allow' command"},
			{[]any{"RL.RESET", "k"}, "ERR wrong number of arguments for 'rl.reset' command"},
			{[]any{"RL.ALLOW", "k", "r", "0"}, "ERR invalid cost '0': must be a positive integer"},
			{[]any{"RL.ALLOW", "k", "r", "-1"}, "ERR invalid cost '-1': must be a positive integer"},
			{[]any{"RL.PEEK", "k", "r", "-9223372036854775808"}, "ERR invalid cost '-9223372036854775808': must be a positive integer"},
			{[]any{"RL.ALLOW", "k", "r", "1.5"}, "ERR value is not an integer or out of range"},
			{[]any{"RL.ALLOW", "k", "r", "99999999999999999999"}, "ERR value is not an integer or out of range"},
			{[]any{"RL.PEEK", "k", "r", "x"}, "ERR value is not an integer or out of range"},
			{[]any{"RL.ALLOW", "k", "missing"}, "ERR unknown rule 'missing'"},
			{[]any{"RL.RESET", "k", "missing"}, "ERR unknown rule 'missing'"},
			{[]any{"RL.ALLOW", "k", "r", "6"}, "ERR cost 6 exceeds the capacity 5 of rule 'r'; such a request could never be allowed"},
			{[]any{"RL.RULE", "SET", "x", "token_bucket", "0", "1s"}, "ERR invalid limit '0': must be an integer from 1 to 1000000000"},
			{[]any{"RL.RULE", "SET", "x", "magic", "1", "1s"}, "ERR invalid algorithm 'magic'"},
			{[]any{"RL.RULE", "SET", "x", "token_bucket", "1", "1y"}, "ERR invalid window '1y'"},
			{[]any{"RL.RULE", "SET", "x y", "token_bucket", "1", "1s"}, "ERR invalid name 'x y'"},
			{[]any{"RL.RULE", "SET", "x", "fixed_window", "1", "1s", "BURST", "4"}, "ERR invalid burst '4': only token_bucket and leaky_bucket take a burst"},
			{[]any{"RL.RULE", "SET", "x", "sliding_log", "100001", "1s"}, "ERR invalid limit '100001': sliding_log keeps one entry per admitted unit"},
			{[]any{"RL.RULE", "SET", "x", "token_bucket", "1", "1s", "BRUST", "4"}, "ERR syntax error"},
			{[]any{"RL.RULE", "SET", "x"}, "ERR wrong number of arguments for 'rl.rule|set' command"},
			{[]any{"RL.RULE", "GET", "missing"}, "ERR unknown rule 'missing'"},
			{[]any{"RL.RULE", "FROB"}, "ERR unknown subcommand 'FROB'. Try RL.RULE HELP."},
			{[]any{"CLIENT", "FROB"}, "ERR unknown subcommand 'FROB'. Try CLIENT HELP."},
			{[]any{"CLIENT", "SETNAME", "a b"}, "ERR Client names cannot contain spaces, newlines or special characters."},
			{[]any{"CLIENT", "SETINFO", "colour", "red"}, "ERR Unrecognized option 'colour'"},
			{[]any{"SELECT", "1"}, "ERR DB index is out of range"},
			{[]any{"SELECT", "x"}, "ERR value is not an integer or out of range"},
			{[]any{"HELLO", "4"}, "NOPROTO unsupported protocol version"},
			{[]any{"HELLO", "x"}, "ERR Protocol version is not an integer or out of range"},
			{[]any{"HELLO", "3", "FROB"}, "ERR Syntax error in HELLO option 'FROB'"},
			{[]any{"PING", "a", "b"}, "ERR wrong number of arguments for 'ping' command"},
			{[]any{"ECHO"}, "ERR wrong number of arguments for 'echo' command"},
			{[]any{"COMMAND", "FROB"}, "ERR unknown subcommand 'FROB'. Try COMMAND HELP."},
		}
		for _, tt := range tests {
			if got := testserver.RedisError(t, c, tt.args...); !strings.HasPrefix(got, tt.want) {
				t.Errorf("%v:\n got %q\nwant %q", tt.args, got, tt.want)
			}
		}
		// A failed RL.RULE SET changed nothing, and the connection (and
		// server) keep serving.
		if err := c.Do(context.Background(), "RL.RULE", "GET", "x").Err(); err == nil {
			t.Error("a rejected RL.RULE SET created the rule")
		}
		if got := testserver.Decision(t, c.Do(context.Background(), "RL.ALLOW", "k", "r")); got[0] != 1 {
			t.Fatalf("after errors: %v", got)
		}
	})
}

func TestConnectionCommands(t *testing.T) { testserver.Models(t, testConnectionCommands) }

func testConnectionCommands(t *testing.T) {
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		ts := startServer(t)
		ctx := context.Background()
		c := ts.Client(t, protocol)
		if s, err := c.Ping(ctx).Result(); err != nil || s != "PONG" {
			t.Fatalf("PING: %q %v", s, err)
		}
		if s, err := c.Do(ctx, "PING", "hi there").Text(); err != nil || s != "hi there" {
			t.Fatalf("PING msg: %q %v", s, err)
		}
		if s, err := c.Echo(ctx, "x\r\ny").Result(); err != nil || s != "x\r\ny" {
			t.Fatalf("ECHO: %q %v", s, err)
		}
		if s, err := c.Do(ctx, "SELECT", "0").Text(); err != nil || s != "OK" {
			t.Fatalf("SELECT 0: %q %v", s, err)
		}
		// One connection for the stateful CLIENT commands.
		conn := c.Conn()
		defer conn.Close()
		if err := conn.ClientSetName(ctx, "worker-1").Err(); err != nil {
			t.Fatal(err)
		}
		if s, err := conn.ClientGetName(ctx).Result(); err != nil || s != "worker-1" {
			t.Fatalf("CLIENT GETNAME: %q %v", s, err)
		}
		id, err := conn.ClientID(ctx).Result()
		if err != nil || id < 1 {
			t.Fatalf("CLIENT ID: %d %v", id, err)
		}
		if err := conn.Do(ctx, "CLIENT", "SETINFO", "LIB-NAME", "mylib").Err(); err != nil {
			t.Fatal(err)
		}
		info, err := conn.Do(ctx, "CLIENT", "INFO").Text()
		want := fmt.Sprintf("id=%d ", id)
		if err != nil || !strings.HasPrefix(info, want) || !strings.Contains(info, " name=worker-1 ") ||
			!strings.Contains(info, "lib-name=mylib") || !strings.Contains(info, fmt.Sprintf("resp=%d", protocol)) {
			t.Fatalf("CLIENT INFO: %q %v", info, err)
		}
		hello, err := conn.Do(ctx, "HELLO", protocol, "SETNAME", "renamed").Result()
		if err != nil {
			t.Fatal(err)
		}
		if protocol == 3 {
			m := hello.(map[any]any)
			if m["proto"] != int64(3) || m["id"] != id || m["server"] != "rlserver" {
				t.Fatalf("HELLO 3: %v", m)
			}
		} else if len(hello.([]any)) != 14 {
			t.Fatalf("HELLO 2: %v", hello)
		}
		if s, _ := conn.ClientGetName(ctx).Result(); s != "renamed" {
			t.Fatalf("HELLO SETNAME: %q", s)
		}

		tm, err := c.Time(ctx).Result()
		if err != nil || tm.UnixNano()/1000 != testserver.T0/1000 {
			t.Fatalf("TIME: %v %v, want the injected clock", tm, err)
		}
		count, err := c.Do(ctx, "COMMAND", "COUNT").Int()
		if err != nil || count < 40 {
			t.Fatalf("COMMAND COUNT: %d %v", count, err)
		}
		infos, err := c.Do(ctx, "COMMAND", "INFO", "rl.allow", "nosuch").Slice()
		if err != nil || len(infos) != 2 || infos[1] != nil {
			t.Fatalf("COMMAND INFO: %v %v", infos, err)
		}
		if entry := infos[0].([]any); entry[0] != "rl.allow" || entry[1] != int64(-3) || entry[3] != int64(1) {
			t.Fatalf("COMMAND INFO rl.allow: %v", entry)
		}
		if _, err := c.Do(ctx, "COMMAND", "DOCS").Result(); err != nil {
			t.Fatalf("COMMAND DOCS: %v", err)
		}
		if all, err := c.Do(ctx, "COMMAND").Slice(); err != nil || len(all) != count {
			t.Fatalf("COMMAND: %d entries, %v", len(all), err)
		}

		c.Do(ctx, "RL.ALLOW", "a", "api")
		c.Do(ctx, "RL.ALLOW", "b", "api")
		c.Do(ctx, "RL.ALLOW", "a", "burst")
		if n, err := c.DBSize(ctx).Result(); err != nil || n != 3 {
			t.Fatalf("DBSIZE: %d %v", n, err)
		}
		text, err := c.Info(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"# Server\r\n", "redis_version:", "# Clients\r\nconnected_clients:",
			"# Memory\r\nused_memory:", "# Stats\r\n", "total_commands_processed:",
			"# Keyspace\r\ndb0:keys=3,expires=0,avg_ttl=0\r\n", "# Ratelimit\r\n", "rl_keys:3\r\n"} {
			if !strings.Contains(text, want) {
				t.Errorf("INFO lacks %q:\n%s", want, text)
			}
		}
		if text, _ := c.Info(ctx, "memory").Result(); strings.Contains(text, "# Server") || !strings.Contains(text, "used_memory:") {
			t.Errorf("INFO memory: %s", text)
		}
		if text, _ := c.Info(ctx, "nosuchsection").Result(); text != "" {
			t.Errorf("INFO of an unknown section: %q", text)
		}
		rl, err := c.Do(ctx, "RL.INFO").Text()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"rl_keys:3\r\n", "rl_rules:7\r\n", "rl_shards:4\r\n", "rl_allowed_total:3\r\n",
			"rl_denied_total:0\r\n", "rl_rule_api:keys=2,allowed=2,denied=0\r\n", "rl_rule_burst:keys=1,allowed=1,denied=0\r\n"} {
			if !strings.Contains(rl, want) {
				t.Errorf("RL.INFO lacks %q:\n%s", want, rl)
			}
		}
		if s, err := c.Do(ctx, "QUIT").Text(); err != nil || s != "OK" {
			t.Fatalf("QUIT: %q %v", s, err)
		}
	})
}

func TestRuleCommands(t *testing.T) { testserver.Models(t, testRuleCommands) }

func testRuleCommands(t *testing.T) {
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		ts := startServer(t, testserver.Def("api", "token_bucket", "10", "1m", ""))
		ctx := context.Background()
		c := ts.Client(t, protocol)
		rule := func(name string) map[string]any {
			v, err := c.Do(ctx, "RL.RULE", "GET", name).Result()
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]any{}
			switch r := v.(type) {
			case []any:
				for i := 0; i < len(r); i += 2 {
					m[r[i].(string)] = r[i+1]
				}
			case map[any]any:
				for k, v := range r {
					m[k.(string)] = v
				}
			}
			return m
		}
		if got := fmt.Sprint(rule("api")); got != "map[algorithm:token_bucket burst:0 limit:10 mode:enforce name:api window:1m]" {
			t.Fatalf("GET: %s", got)
		}
		for range 4 {
			c.Do(ctx, "RL.ALLOW", "k", "api")
		}
		// Lower the limit and add a burst: the 4 spent carry over.
		if err := c.Do(ctx, "RL.RULE", "SET", "api", "token_bucket", "6", "1m", "burst", "6").Err(); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(rule("api")); got != "map[algorithm:token_bucket burst:6 limit:6 mode:enforce name:api window:1m]" {
			t.Fatalf("GET after SET: %s", got)
		}
		if got := testserver.Decision(t, c.Do(ctx, "RL.PEEK", "k", "api")); got[1] != 6 || got[2] != 2 {
			t.Fatalf("after lowering the limit: %v", got)
		}
		// A new algorithm starts keys fresh.
		c.Do(ctx, "RL.RULE", "SET", "api", "fixed_window", "6", "1m")
		if got := testserver.Decision(t, c.Do(ctx, "RL.PEEK", "k", "api")); got[2] != 6 {
			t.Fatalf("after changing the algorithm: %v", got)
		}
		c.Do(ctx, "RL.ALLOW", "k", "api")
		c.Do(ctx, "RL.RULE", "SET", "other", "sliding_log", "3", "10s")
		list, err := c.Do(ctx, "RL.RULE", "LIST").Slice()
		if err != nil || len(list) != 2 {
			t.Fatalf("LIST: %v %v", list, err)
		}
		if n, _ := c.Do(ctx, "RL.RULE", "DEL", "api").Int(); n != 1 {
			t.Fatal("DEL of an existing rule did not return 1")
		}
		if n, _ := c.Do(ctx, "RL.RULE", "DEL", "api").Int(); n != 0 {
			t.Fatal("DEL of a missing rule did not return 0")
		}
		if n, _ := c.DBSize(ctx).Result(); n != 0 {
			t.Fatalf("deleting the rule left %d keys", n)
		}
		if got := testserver.RedisError(t, c, "RL.ALLOW", "k", "api"); got != "ERR unknown rule 'api'" {
			t.Fatalf("after DEL: %s", got)
		}
		if help, err := c.Do(ctx, "RL.RULE", "HELP").Slice(); err != nil || len(help) < 5 {
			t.Fatalf("HELP: %v %v", help, err)
		}
	})
}

func TestPipelineKeepsOrder(t *testing.T) { testserver.Models(t, testPipelineKeepsOrder) }

func testPipelineKeepsOrder(t *testing.T) {
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		ts := startServer(t, testserver.Def("r", "fixed_window", "5", "1m", ""))
		ctx := context.Background()
		c := ts.Client(t, protocol)
		p := c.Pipeline()
		var cmds []*redis.Cmd
		add := func(args ...any) { cmds = append(cmds, p.Do(ctx, args...)) }
		for i := range 7 {
			add("RL.ALLOW", "k", "r")
			add("RL.ALLOW", fmt.Sprintf("other-%d", i), "r")
		}
		add("PING")
		add("RL.ALLOW", "k", "missing")
		add("RL.RULE", "SET", "r", "fixed_window", "9", "1m") // raises the ceiling for what follows
		add("RL.ALLOW", "k", "r")
		add("RL.PEEK", "k", "r", "9")
		p.Exec(ctx)
		for i := range 7 {
			got := testserver.Decision(t, cmds[2*i])
			if got[0] != map[bool]int64{true: 1, false: 0}[i < 5] || got[2] != int64(max(4-i, 0)) {
				t.Fatalf("allow %d on k: %v", i, got)
			}
			if got := testserver.Decision(t, cmds[2*i+1]); got != [6]int64{1, 5, 4, 0, 60000, 0} {
				t.Fatalf("allow on other-%d: %v", i, got)
			}
		}
		if s, _ := cmds[14].Text(); s != "PONG" {
			t.Fatalf("PING in the pipeline: %v", cmds[14].Val())
		}
		if err := cmds[15].Err(); err == nil || err.Error() != "ERR unknown rule 'missing'" {
			t.Fatalf("error in the pipeline: %v", err)
		}
		if got := testserver.Decision(t, cmds[17]); got[0] != 1 || got[2] != 3 {
			t.Fatalf("allow after raising the limit in the same pipeline: %v", got)
		}
		if got := testserver.Decision(t, cmds[18]); got[0] != 0 || got[2] != 3 {
			t.Fatalf("peek at the end: %v", got)
		}
	})
}

// TestConcurrentConnectionsAdmitExactlyTheLimit has 64 connections race on
// one key; the window is a day, so nothing refills during the test and
// exactly the limit must be admitted.
func TestConcurrentConnectionsAdmitExactlyTheLimit(t *testing.T) {
	testserver.Models(t, testConcurrentConnectionsAdmitExactlyTheLimit)
}

func testConcurrentConnectionsAdmitExactlyTheLimit(t *testing.T) {
	algs := []string{"token_bucket", "leaky_bucket", "fixed_window", "sliding_log", "sliding_counter"}
	var defs []rules.Def
	for _, a := range algs {
		defs = append(defs, testserver.Def(a, a, "500", "24h", ""))
	}
	ts := startServer(t, defs...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) {
			var admitted, denied atomic.Int64
			var wg sync.WaitGroup
			for i := range 64 {
				wg.Go(func() {
					c := redis.NewClient(&redis.Options{Addr: ts.Addr, PoolSize: 1, Protocol: 2 + i%2})
					defer c.Close()
					for range 5 {
						p := c.Pipeline()
						var cmds []*redis.Cmd
						for range 4 {
							cmds = append(cmds, p.Do(ctx, "RL.ALLOW", "hot", alg))
						}
						if _, err := p.Exec(ctx); err != nil {
							t.Error(err)
							return
						}
						for _, cmd := range cmds {
							d, err := testserver.ParseDecision(cmd)
							if err != nil {
								t.Error(err)
								return
							}
							if d[0] == 1 {
								admitted.Add(1)
							} else {
								denied.Add(1)
							}
						}
					}
				})
			}
			wg.Wait()
			if admitted.Load() != 500 || denied.Load() != 64*20-500 {
				t.Fatalf("admitted %d, denied %d; want exactly 500 admitted of %d", admitted.Load(), denied.Load(), 64*20)
			}
		})
	}
}

func TestServerSurvivesGarbage(t *testing.T) { testserver.Models(t, testServerSurvivesGarbage) }

func testServerSurvivesGarbage(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	c := ts.Client(t, 2)
	for _, junk := range []string{"*2\r\n$3\r\nfoo\r\n", "*x\r\n", "$5\r\nhello\r\n", "*1\r\n$-5\r\n", "\x00\x01\x02\r\n"} {
		raw := testserver.DialRaw(t, ts.Addr)
		raw.Write([]byte(junk))
		raw.Close()
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("server stopped serving after garbage: %v", err)
	}
}
