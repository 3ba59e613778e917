package commands_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/testserver"
)

// signalLog is a slog handler that signals each message it receives, so a
// test knows when a script has reached its redis.log call: the script is
// then running, holding its shards.
type signalLog struct{ msgs chan string }

func (h signalLog) Enabled(context.Context, slog.Level) bool { return true }
func (h signalLog) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.msgs <- r.Message:
	default:
	}
	return nil
}
func (h signalLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalLog) WithGroup(string) slog.Handler      { return h }

// waitLog waits for the message msg.
func waitLog(t *testing.T, msgs chan string, msg string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m := <-msgs:
			if m == msg {
				return
			}
		case <-timeout:
			t.Fatalf("no log message %q", msg)
		}
	}
}

// otherShardKey returns a key on another shard than key's.
func otherShardKey(ts *testserver.Server, key string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("other%d", i)
		if ts.Service.ShardOf(nil, []byte(k)) != ts.Service.ShardOf(nil, []byte(key)) {
			return k
		}
	}
}

// TestBusyScript runs a runaway read-only script and checks what other
// clients see, with the server's clock driven by the test (no sleeps
// racing the limit): within the time limit, clients touching other shards
// are served; past it, a command on the script's shard gets Redis's BUSY
// at once, clients elsewhere are still served, SCRIPT KILL stops the
// script (whose client gets Redis's killed-script error), and the shard
// serves again.
func TestBusyScript(t *testing.T) { testserver.Models(t, testBusyScript) }

func testBusyScript(t *testing.T) {
	msgs := make(chan string, 16)
	ts := testserver.Start(t, testserver.Options{Logger: slog.New(signalLog{msgs})})
	// The runner's script runs on a goroutine of its own under event
	// loops too, so the other client is served whichever loop it is on
	// (TestScriptDoesNotStallItsLoop puts both on one).
	runner, other := dialScript(t, ts), dialScript(t, ts)
	elsewhere := otherShardKey(ts, "k")
	if got := other.do("SET", "k", "v"); got != "+OK" {
		t.Fatal(got)
	}
	runner.send("EVAL", "redis.call('get', KEYS[1]) redis.log(redis.LOG_WARNING, 'running') while true do end", "1", "k")
	waitLog(t, msgs, "running")

	if got := other.do("SET", elsewhere, "1"); got != "+OK" {
		t.Fatalf("another shard, within the limit: %q", got)
	}
	if got := other.do("SCRIPT", "KILL"); got != "-NOTBUSY No scripts in execution right now." {
		t.Fatalf("SCRIPT KILL within the limit: %q", got)
	}
	ts.Clock.Advance(5 * time.Second) // the default --lua-time-limit
	const busy = "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	for _, cmd := range [][]string{{"GET", "k"}, {"INCR", "k"}, {"RL.ALLOW", "k", "api"}, {"DBSIZE"}, {"EVAL", "return 1", "1", "k"}} {
		if cmd[0] == "RL.ALLOW" {
			// A decision's shard is (rule, key)'s: find a key whose is k's.
			cmd[1] = sameShardDecisionKey(ts, "k", "api")
		}
		if got := other.do(cmd...); got != busy {
			t.Errorf("%q past the limit: %q", cmd, got)
		}
	}
	if got := other.do("GET", elsewhere); got != "$1 1" {
		t.Fatalf("another shard, past the limit: %q", got)
	}
	if got := other.do("PING"); got != "+PONG" {
		t.Fatalf("PING: %q", got)
	}
	if got := other.do("SCRIPT", "KILL"); got != "+OK" {
		t.Fatalf("SCRIPT KILL: %q", got)
	}
	if got := runner.read(); !strings.HasPrefix(got, "-ERR Script killed by user with SCRIPT KILL...") {
		t.Fatalf("the killed script's reply: %q", got)
	}
	if got := other.do("GET", "k"); got != "$1 v" {
		t.Fatalf("after the kill: %q", got)
	}
	if got := runner.do("PING"); got != "+PONG" {
		t.Fatalf("the runner after the kill: %q", got)
	}
}

// sameShardDecisionKey returns a key whose state under rule lives on the
// shard of the plain key key.
func sameShardDecisionKey(ts *testserver.Server, key, rule string) string {
	want := ts.Service.ShardOf(nil, []byte(key))
	r := ts.Rules.Load().Get([]byte(rule))
	for i := 0; ; i++ {
		k := fmt.Sprintf("d%d", i)
		if ts.Service.ShardOf(r, []byte(k)) == want {
			return k
		}
	}
}

// TestScriptsAreAtomic races read-modify-write scripts over keys on two
// shards (held together) and over every shard (numkeys 0) with plain INCRs
// of the same keys from other clients. Each script reads, then writes one
// more: any interleaving would lose an increment.
func TestScriptsAreAtomic(t *testing.T) { testserver.Models(t, testScriptsAreAtomic) }

func testScriptsAreAtomic(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Shards: 4,
		Rules: append(rules.Defaults(), testserver.Def("lim", "fixed_window", "150", "1h", ""))})
	a := "a"
	b := otherShardKey(ts, a)
	const rmw = `
local x = tonumber(redis.call('get', KEYS[1]) or '0')
local y = tonumber(redis.call('get', KEYS[2]) or '0')
redis.call('set', KEYS[1], x + 1)
redis.call('set', KEYS[2], y + 1)
return 1`
	const rmwAnywhere = `
local x = tonumber(redis.call('get', ARGV[1]) or '0')
redis.call('set', ARGV[1], x + 1)
return redis.call('rl.allow', ARGV[1], 'lim')[1]`
	const clients, rounds = 6, 200
	var wg sync.WaitGroup
	admitted := make([]int64, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ts.Client(t, 2)
			ctx := context.Background()
			for range rounds {
				var err error
				switch i % 3 {
				case 0:
					err = c.Eval(ctx, rmw, []string{a, b}).Err()
				case 1:
					var n int64
					n, err = c.Eval(ctx, rmwAnywhere, nil, a).Int64()
					admitted[i] += n
				default:
					var d []int64
					if err = c.Incr(ctx, a).Err(); err == nil {
						err = c.Incr(ctx, b).Err()
					}
					if err == nil {
						if d, err = c.Do(ctx, "RL.ALLOW", a, "lim").Int64Slice(); err == nil {
							admitted[i] += d[0]
						}
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	c := ts.Client(t, 2)
	ctx := context.Background()
	perKind := int64(clients / 3 * rounds)
	if got, _ := c.Get(ctx, a).Int64(); got != 3*perKind {
		t.Errorf("%s = %d, want %d", a, got, 3*perKind)
	}
	if got, _ := c.Get(ctx, b).Int64(); got != 2*perKind {
		t.Errorf("%s = %d, want %d", b, got, 2*perKind)
	}
	var total int64
	for _, n := range admitted {
		total += n
	}
	if total != 150 {
		t.Errorf("RL.ALLOW from scripts and clients admitted %d, the rule's limit is 150", total)
	}
}
