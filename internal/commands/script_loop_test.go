package commands_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
)

// TestScriptDoesNotStallItsLoop: with one event loop serving every
// connection, a runaway script holds up no other connection's commands.
// The script's time limit is on the test's clock, which stands still until
// the test moves it, so the prompt answers below are not BUSY's: PING and
// an RL.ALLOW on another shard are answered within 2 s while the script
// runs; once the clock passes the limit, a command on the script's shard
// gets BUSY, and SCRIPT KILL from that same connection stops the script.
func TestScriptDoesNotStallItsLoop(t *testing.T) {
	msgs := make(chan string, 16)
	ts := testserver.Start(t, testserver.Options{EventLoops: 1, Model: true, Logger: slog.New(signalLog{msgs})})
	if ts.Server.EventLoops() != 1 {
		t.Skip("no event loops on this platform")
	}
	runner, other := dialScript(t, ts), dialScript(t, ts)
	decision := otherShardDecisionKey(ts, "k", "api")
	// A runaway until the test's clock passes an hour: the end of the
	// test moves it there, so that a failing run (the loop stalled, SCRIPT
	// KILL never sent) still shuts down, where one running `while true do
	// end` would wait for it forever.
	const runaway = `redis.call('get', KEYS[1]) redis.log(redis.LOG_WARNING, 'running')
while tonumber(redis.call('time')[1]) < tonumber(ARGV[1]) do end`
	t.Cleanup(func() { ts.Clock.Advance(2 * time.Hour) })
	runner.send("EVAL", runaway, "1", "k", fmt.Sprint(testserver.T0/1e9+3600))
	waitLog(t, msgs, "running")

	prompt := func(want string, args ...string) {
		t.Helper()
		other.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if got := other.do(args...); !strings.HasPrefix(got, want) {
			t.Fatalf("%q while the script runs: %q, want %q", args, got, want)
		}
	}
	prompt("+PONG", "PING")
	prompt("*6 :1", "RL.ALLOW", decision, "api")
	prompt("-NOTBUSY", "SCRIPT", "KILL")
	ts.Clock.Advance(5 * time.Second) // the default --lua-time-limit
	prompt("-BUSY Redis is busy running a script.", "GET", "k")
	prompt("+OK", "SCRIPT", "KILL")
	runner.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if got := runner.read(); !strings.HasPrefix(got, "-ERR Script killed by user with SCRIPT KILL...") {
		t.Fatalf("the killed script's reply: %q", got)
	}
	// The runner's loop serves it again, in order.
	runner.send("PING")
	runner.send("GET", "k")
	if got := runner.read() + " " + runner.read(); got != "+PONG $-1" {
		t.Fatalf("the runner after the kill: %q", got)
	}
}

// TestLongPipelineKeepsOrder: a pipeline holding scripts between other
// commands, on an event loop, is answered in the order sent, and the
// connection's next pipeline waits for it.
func TestLongPipelineKeepsOrder(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{EventLoops: 1, Model: true})
	c := dialScript(t, ts)
	var want []string
	var pipe []byte
	for i := range 50 {
		args := []string{"INCR", "n"}
		reply := fmt.Sprintf(":%d", 2*i+1)
		pipe = append(pipe, testserver.EncodeCommand(args)...)
		want = append(want, reply)
		args = []string{"EVAL", "return redis.call('incr', KEYS[1])", "1", "n"}
		pipe = append(pipe, testserver.EncodeCommand(args)...)
		want = append(want, fmt.Sprintf(":%d", 2*i+2))
	}
	if _, err := c.c.Write(pipe); err != nil {
		t.Fatal(err)
	}
	c.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i, w := range want {
		if got := c.read(); got != w {
			t.Fatalf("reply %d: %q, want %q", i, got, w)
		}
	}
}

// otherShardDecisionKey returns a key whose state under rule lives on
// another shard than the plain key key.
func otherShardDecisionKey(ts *testserver.Server, key, rule string) string {
	avoid := ts.Service.ShardOf(nil, []byte(key))
	r := ts.Rules.Load().Get([]byte(rule))
	for i := 0; ; i++ {
		k := fmt.Sprintf("d%d", i)
		if ts.Service.ShardOf(r, []byte(k)) != avoid {
			return k
		}
	}
}

// TestShutdownWaitsForHandedOffScript: a server shutting down lets a script
// its event loop handed to a goroutine finish and answer, as a connection's
// own goroutine would, and then stops.
func TestShutdownWaitsForHandedOffScript(t *testing.T) {
	msgs := make(chan string, 16)
	ts, stop, err := testserver.New(testserver.Options{EventLoops: 1, Model: true, Logger: slog.New(signalLog{msgs})})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	defer func() {
		ts.Clock.Advance(2 * time.Hour) // a failing run still ends the script
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			t.Error("Shutdown did not return")
		}
	}()
	runner := dialScript(t, ts)
	const slow = `redis.log(redis.LOG_WARNING, 'running')
while tonumber(redis.call('time')[1]) < tonumber(ARGV[1]) do end
return 'done'`
	runner.send("EVAL", slow, "1", "k", fmt.Sprint(testserver.T0/1e9+60))
	waitLog(t, msgs, "running")
	go func() { stopped <- stop() }()
	for !ts.Server.Draining() {
		time.Sleep(time.Millisecond) // Shutdown has begun once Draining says so
	}
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned while the script ran: %v", err)
	default:
	}
	ts.Clock.Advance(time.Minute)
	runner.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if got := runner.read(); got != "$4 done" {
		t.Fatalf("the script's reply: %q", got)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		stopped <- nil // for the deferred check
	case <-time.After(20 * time.Second):
		t.Fatal("Shutdown did not return after the script ended")
	}
}
