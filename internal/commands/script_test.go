package commands_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"net"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/testserver"
)

// rawConn sends commands and reads replies as the lines on the wire, so a
// test compares exact bytes (error texts above all: clients match them).
type rawConn struct {
	t  testing.TB
	c  net.Conn
	rd *bufio.Reader
}

func dialScript(t testing.TB, ts *testserver.Server) *rawConn {
	c := testserver.DialRaw(t, ts.Addr)
	return &rawConn{t: t, c: c, rd: bufio.NewReader(c)}
}

func (r *rawConn) send(args ...string) {
	r.t.Helper()
	if _, err := r.c.Write(testserver.EncodeCommand(args)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) read() string {
	r.t.Helper()
	lines, err := testserver.ReadReply(r.rd)
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.Join(lines, " ")
}

func (r *rawConn) do(args ...string) string {
	r.t.Helper()
	r.send(args...)
	return r.read()
}

func sha(src string) string {
	s := sha1.Sum([]byte(src))
	return hex.EncodeToString(s[:])
}

func TestScriptCommands(t *testing.T) { testserver.Models(t, testScriptCommands) }

func testScriptCommands(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{})
	c := dialScript(t, ts)
	const incr = "return redis.call('incrby', KEYS[1], ARGV[1])"
	steps := []struct {
		cmd  []string
		want string
	}{
		{[]string{"EVALSHA", sha(incr), "1", "k", "2"}, "-NOSCRIPT No matching script. Please use EVAL."},
		{[]string{"EVALSHA", "abc", "0"}, "-NOSCRIPT No matching script. Please use EVAL."},
		{[]string{"EVAL", incr, "1", "k", "2"}, ":2"},
		// EVAL caches what it runs, as Redis 7.0.
		{[]string{"EVALSHA", sha(incr), "1", "k", "3"}, ":5"},
		{[]string{"evalsha", strings.ToUpper(sha(incr)), "1", "k", "1"}, ":6"},
		{[]string{"SCRIPT", "EXISTS", sha(incr), sha("nope")}, "*2 :1 :0"},
		{[]string{"SCRIPT", "FLUSH"}, "+OK"},
		{[]string{"SCRIPT", "EXISTS", sha(incr)}, "*1 :0"},
		{[]string{"SCRIPT", "LOAD", incr}, "$40 " + sha(incr)},
		{[]string{"EVALSHA", sha(incr), "1", "k", "4"}, ":10"},
		{[]string{"SCRIPT", "FLUSH", "ASYNC"}, "+OK"},
		{[]string{"SCRIPT", "FLUSH", "LATER"}, "-ERR SCRIPT FLUSH only support SYNC|ASYNC option"},
		{[]string{"SCRIPT", "KILL"}, "-NOTBUSY No scripts in execution right now."},
		{[]string{"SCRIPT", "FOO"}, "-ERR unknown subcommand 'FOO'. Try SCRIPT HELP."},
		{[]string{"EVAL", "return 1", "-1"}, "-ERR Number of keys can't be negative"},
		{[]string{"EVAL", "return 1", "2", "a"}, "-ERR Number of keys can't be greater than number of args"},
		{[]string{"EVAL", "return 1", "x"}, "-ERR value is not an integer or out of range"},
		{[]string{"EVAL", "return 1 +", "0"}, "-ERR Error compiling script (new function): user_script:1: syntax error near '<eof>'"},
		// Replies as Redis converts them.
		{[]string{"EVAL", "return {1, 2.9, 'x', {ok='S'}, {err='E'}, false, nil, 3}", "0"}, "*6 :1 :2 $1 x +S -E $-1"},
		{[]string{"EVAL", "return redis.error_reply('key does not exist')", "0"}, "-key does not exist"},
		{[]string{"EVAL", "return redis.call('get', KEYS[1])", "1", "missing"}, "$-1"},
		{[]string{"EVAL", "return redis.call('nosuch')", "0"}, "-ERR Unknown Redis command called from script script: " + sha("return redis.call('nosuch')") + ", on @user_script:1."},
		{[]string{"EVAL", "return redis.pcall('eval', 'return 1', 0)", "0"}, "-ERR This Redis command is not allowed from script"},
		{[]string{"EVAL", "return redis.pcall('get', 'a', 'b')", "0"}, "-ERR Wrong number of args calling Redis command from script"},
		// Read-only forms refuse writes.
		{[]string{"EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k"}, "$2 10"},
		{[]string{"EVAL_RO", "return redis.pcall('set', KEYS[1], 'x')", "1", "k"}, "-ERR Write commands are not allowed from read-only scripts."},
		{[]string{"EVALSHA_RO", sha(incr), "1", "k", "1"}, "-NOSCRIPT No matching script. Please use EVAL."},
		// A script declaring no keys holds every shard: any key, and
		// whole-keyspace commands.
		{[]string{"EVAL", "redis.call('set', 'a', 1) redis.call('set', 'b', 2) redis.call('set', 'c', 3) return redis.call('dbsize')", "0"}, ":4"},
		{[]string{"EVAL", "return redis.call('time')[1] ~= nil", "0"}, ":1"},
	}
	for _, s := range steps {
		if got := c.do(s.cmd...); got != s.want {
			t.Errorf("%q:\n got %q\nwant %q", s.cmd, got, s.want)
		}
	}
}

// TestScriptInsideMulti: EVAL queued in a transaction runs on its held
// keyspace.
func TestScriptInsideMulti(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{})
	c := dialScript(t, ts)
	for _, s := range [][2]string{{"MULTI", "+OK"}} {
		if got := c.do(s[0]); got != s[1] {
			t.Fatal(got)
		}
	}
	c.do("EVAL", "return redis.call('incr', KEYS[1])", "1", "a")
	c.do("EVAL", "return redis.call('incr', 'b') + redis.call('incr', KEYS[1])", "1", "a")
	if got := c.do("EXEC"); got != "*2 :1 :3" {
		t.Fatalf("EXEC: %q", got)
	}
}

// TestCachedScriptsInInfo: INFO memory counts the cached scripts and their
// source bytes under Redis 7.0's names (Redis's SCRIPT FLUSH tests read
// number_of_cached_scripts).
func TestCachedScriptsInInfo(t *testing.T) {
	ts := startServer(t)
	c := ts.Client(t, 2)
	ctx := context.Background()
	for _, src := range []string{"return 1", "return 22"} {
		if err := c.ScriptLoad(ctx, src).Err(); err != nil {
			t.Fatal(err)
		}
	}
	info := c.Info(ctx, "memory").Val()
	for _, want := range []string{"number_of_cached_scripts:2\r\n", "used_memory_scripts_eval:17\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO memory lacks %q:\n%s", want, info)
		}
	}
	c.ScriptFlush(ctx)
	if info := c.Info(ctx, "memory").Val(); !strings.Contains(info, "number_of_cached_scripts:0\r\n") {
		t.Errorf("after SCRIPT FLUSH:\n%s", info)
	}
}
