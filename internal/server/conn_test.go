package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/server"
	"github.com/rlserver/rlserver/internal/testserver"
)

// Regression tests for the connection layer: deadlines, limits that hold
// memory down, handler panics, AUTH guessing. Both connection models run
// them (TestMain); process-level ones start a child server (child_test.go).

// ping sends PING on a new connection and returns the reply line, failing
// the test if none comes within 5 s.
func ping(t *testing.T, addr string) {
	t.Helper()
	conn := testserver.DialRaw(t, addr)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	conn.Write([]byte("PING\r\n"))
	if line, err := bufio.NewReader(conn).ReadString('\n'); line != "+PONG\r\n" {
		t.Fatalf("PING on a new connection: %q %v", line, err)
	}
}

// waitConnected waits, without sleeping, until at most n connections are
// open.
func waitConnected(t *testing.T, srv *server.Server, n int64) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); srv.Connected() > n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open, want %d", srv.Connected(), n)
		}
		time.Sleep(time.Millisecond) // polling a counter the server changes, not waiting for time to pass
	}
}

// TestServesAfterTimeoutDisconnects: after connections are cut by the idle
// timeout, or by the output timeout, every event loop keeps serving new
// connections. (A loop left its wait's deadline armed in the past and spun
// without ever polling again.)
func TestServesAfterTimeoutDisconnects(t *testing.T) {
	testserver.Models(t, testServesAfterTimeoutDisconnects)
}

func testServesAfterTimeoutDisconnects(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		ts := testserver.Start(t, testserver.Options{Idle: 100 * time.Millisecond})
		for range 4 { // over both loops
			readUntilClosed(t, testserver.DialRaw(t, ts.Addr))
		}
		for range 4 {
			ping(t, ts.Addr)
		}
	})
	t.Run("output", func(t *testing.T) {
		lim := resp.DefaultLimits
		lim.OutputTimeout = 200 * time.Millisecond
		ts := testserver.Start(t, testserver.Options{Limits: lim})
		other := ts.Client(t, 2)
		if err := other.Set(context.Background(), "big", strings.Repeat("v", 1<<20), 0).Err(); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			// 16 MiB of replies, more than the socket buffers hold, never
			// read: the write blocks until the output timeout cuts it.
			conn := testserver.DialRaw(t, ts.Addr)
			conn.Write([]byte(strings.Repeat("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", 16)))
		}
		// The deadline only bounds a hang (16 MiB of replies each, under
		// -race on a loaded machine).
		for deadline := time.Now().Add(60 * time.Second); ts.Server.LimitDisconnects() < 4; {
			if time.Now().After(deadline) {
				t.Fatalf("%d of 4 slow readers disconnected", ts.Server.LimitDisconnects())
			}
			time.Sleep(time.Millisecond) // polling a counter the server changes, not waiting for time to pass
		}
		for range 4 {
			ping(t, ts.Addr)
		}
	})
}

// TestIdleLoopUsesNoCPU runs the reproduction as a process: one
// CPU, an idle connection cut by the idle timeout, then PING must be
// answered and the server must sit idle, not spin.
func TestIdleLoopUsesNoCPU(t *testing.T) { testserver.Models(t, testIdleLoopUsesNoCPU) }

func testIdleLoopUsesNoCPU(t *testing.T) {
	needsProc(t)
	loops := min(testserver.EventLoops(t), 1)
	ch := startChild(t, childConfig{EventLoops: loops, Idle: 200 * time.Millisecond}, "GOMAXPROCS=1")
	readUntilClosed(t, testserver.DialRaw(t, ch.addr))
	ping(t, ch.addr)
	// Observe the idle server's CPU time over a second: an idle server
	// uses microseconds; a spinning loop uses what the scheduler gives
	// it, a third of a core or more even on a loaded machine.
	before := ch.cpu(t)
	time.Sleep(time.Second)
	if used := ch.cpu(t) - before; used > 150*time.Millisecond {
		t.Fatalf("an idle server used %v of CPU in 1 s", used)
	}
}

// TestOutputLimitBoundsMemory: a client pipelines 200 GETs of a 1 MiB value
// and reads nothing. The server builds replies only up to
// --client-output-buffer-limit (8 MiB here) plus one reply, then cuts the
// client; its peak RSS stays within a few times that, and another client is
// answered meanwhile.
func TestOutputLimitBoundsMemory(t *testing.T) { testserver.Models(t, testOutputLimitBoundsMemory) }

func testOutputLimitBoundsMemory(t *testing.T) {
	needsProc(t)
	lim := resp.DefaultLimits
	lim.OutputLimit = 8 << 20
	ch := startChild(t, childConfig{EventLoops: testserver.EventLoops(t), Limits: lim})
	other := redis.NewClient(&redis.Options{Addr: ch.addr, Protocol: 2, PoolSize: 1})
	defer other.Close()
	ctx := context.Background()
	if err := other.Set(ctx, "bigv", strings.Repeat("v", 1<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, before := ch.memory(t)
	conn := testserver.DialRaw(t, ch.addr)
	conn.Write([]byte(strings.Repeat("*2\r\n$3\r\nGET\r\n$4\r\nbigv\r\n", 200)))
	for range 20 {
		start := time.Now()
		if err := other.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("another client waited %v for PONG", d)
		}
	}
	// The server closes the connection without sending anything: the
	// replies crossed the limit before any write.
	if got := readUntilClosed(t, conn); got != "" {
		t.Fatalf("over the output limit: got %d bytes before the close, want none", len(got))
	}
	// The limit plus one reply is 9 MiB live; garbage collection lets the
	// heap reach about twice the live heap before it runs. (Before the
	// limit was enforced while building, this grew by 1 GiB.)
	if _, peak := ch.memory(t); peak-before > memoryBound(48<<20) {
		t.Fatalf("peak RSS grew %d MiB for 200 GETs of 1 MiB with an 8 MiB output limit", (peak-before)>>20)
	}
}

// TestOutputLimitBoundsQueuedScripts is TestOutputLimitBoundsMemory for
// scripts queued in a batch (each returning the 1 MiB value): their
// replies wait in memory until the batch has run, so together they are
// held to the output limit too.
func TestOutputLimitBoundsQueuedScripts(t *testing.T) {
	testserver.Models(t, testOutputLimitBoundsQueuedScripts)
}

func testOutputLimitBoundsQueuedScripts(t *testing.T) {
	needsProc(t)
	lim := resp.DefaultLimits
	lim.OutputLimit = 8 << 20
	ch := startChild(t, childConfig{EventLoops: testserver.EventLoops(t), Limits: lim})
	other := redis.NewClient(&redis.Options{Addr: ch.addr, Protocol: 2, PoolSize: 1})
	defer other.Close()
	ctx := context.Background()
	if err := other.Set(ctx, "bigv", strings.Repeat("v", 1<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, before := ch.memory(t)
	conn := testserver.DialRaw(t, ch.addr)
	const get = "return redis.call('get', KEYS[1])"
	conn.Write(bytes.Repeat(testserver.EncodeCommand([]string{"EVAL", get, "1", "bigv"}), 200))
	if got := readUntilClosed(t, conn); got != "" {
		t.Fatalf("over the output limit: got %d bytes before the close, want none", len(got))
	}
	if err := other.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, peak := ch.memory(t); peak-before > memoryBound(64<<20) {
		t.Fatalf("peak RSS grew %d MiB for 200 scripts returning 1 MiB with an 8 MiB output limit", (peak-before)>>20)
	}
}

// memoryBound returns bound, in bytes, or under the race detector (whose
// shadow memory at least doubles what the process touches) three times it.
func memoryBound(bound int64) int64 {
	if raceEnabled {
		return 3 * bound
	}
	return bound
}

// TestValueRepliesAreBuiltOneAtATime: within the limit, a pipeline of GETs
// and SET ... GETs is still answered in order, each seeing the commands
// before it.
func TestValueRepliesAreBuiltOneAtATime(t *testing.T) {
	testserver.Models(t, testValueRepliesAreBuiltOneAtATime)
}

func testValueRepliesAreBuiltOneAtATime(t *testing.T) {
	ts := startServer(t, testserver.Def("r", "fixed_window", "100", "1m", ""))
	conn := testserver.DialRaw(t, ts.Addr)
	var req bytes.Buffer
	req.Write(testserver.EncodeCommand([]string{"SET", "k", "a"}))
	req.Write(testserver.EncodeCommand([]string{"GET", "k"}))
	req.Write(testserver.EncodeCommand([]string{"SET", "k", "bb", "GET"}))
	req.Write(testserver.EncodeCommand([]string{"GET", "k"}))
	req.Write(testserver.EncodeCommand([]string{"RL.ALLOW", "u", "r"}))
	req.Write(testserver.EncodeCommand([]string{"GET", "missing"}))
	req.Write(testserver.EncodeCommand([]string{"QUIT"}))
	conn.Write(req.Bytes())
	want := "+OK\r\n$1\r\na\r\n$1\r\na\r\n$2\r\nbb\r\n*6\r\n:1\r\n:100\r\n:99\r\n:0\r\n:60000\r\n:0\r\n$-1\r\n+OK\r\n"
	if got := readUntilClosed(t, conn); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// TestUnauthenticatedLimits: before AUTH, a command may have at most 10
// arguments of at most 16 KiB; a larger header is refused as it arrives.
// A command after AUTH in the same write gets the full limits.
func TestUnauthenticatedLimits(t *testing.T) { testserver.Models(t, testUnauthenticatedLimits) }

func testUnauthenticatedLimits(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Password: "s3cret"})
	tests := []struct {
		name, send, want string
	}{
		{"bulk over 16 KiB", "*2\r\n$3\r\nGET\r\n$536870000\r\n", "-ERR Protocol error: unauthenticated bulk length\r\n"},
		{"more than 10 arguments", "*11\r\n", "-ERR Protocol error: unauthenticated multibulk length\r\n"},
		{"inline, more than 10 words", strings.Repeat("a ", 11) + "\r\n", "-ERR Protocol error: unauthenticated multibulk length\r\n"},
		{"after NOAUTH replies", "PING\r\nPING\r\n*11\r\n", "-NOAUTH Authentication required.\r\n-NOAUTH Authentication required.\r\n" +
			"-ERR Protocol error: unauthenticated multibulk length\r\n"},
	}
	for _, tt := range tests {
		conn := testserver.DialRaw(t, ts.Addr)
		conn.Write([]byte(tt.send))
		if got := readUntilClosed(t, conn); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
	conn := testserver.DialRaw(t, ts.Addr)
	big := strings.Repeat("x", 20000)
	conn.Write(slices.Concat(testserver.EncodeCommand([]string{"HELLO", "2", "AUTH", "default", "s3cret", "SETNAME", "n"}),
		testserver.EncodeCommand([]string{"SET", "k", big}), testserver.EncodeCommand([]string{"GET", "k"}), []byte("QUIT\r\n")))
	got := readUntilClosed(t, conn)
	if !strings.HasSuffix(got, "+OK\r\n$20000\r\n"+big+"\r\n+OK\r\n") || !strings.HasPrefix(got, "*14\r\n") {
		t.Fatalf("AUTH then a large command in one write: %.200q", got)
	}
}

// TestUnauthenticatedClientCannotGrowMemory is the case as a
// process: with a password, a client that never authenticates declares a
// 512 MB argument and sends 64 MiB of it. It is refused at the header; the
// server's peak RSS does not grow by what was sent.
func TestUnauthenticatedClientCannotGrowMemory(t *testing.T) {
	testserver.Models(t, testUnauthenticatedClientCannotGrowMemory)
}

func testUnauthenticatedClientCannotGrowMemory(t *testing.T) {
	needsProc(t)
	ch := startChild(t, childConfig{EventLoops: testserver.EventLoops(t), Password: "s3cret"})
	_, before := ch.memory(t)
	conn := testserver.DialRaw(t, ch.addr)
	replies := readInBackground(conn)
	conn.Write([]byte("*2\r\n$3\r\nGET\r\n$536870000\r\n"))
	chunk := make([]byte, 1<<20)
	for range 64 { // until the server hangs up
		if _, err := conn.Write(chunk); err != nil {
			break
		}
	}
	if got := <-replies; got != "-ERR Protocol error: unauthenticated bulk length\r\n" {
		t.Fatalf("reply %q", got)
	}
	if _, peak := ch.memory(t); peak-before > memoryBound(16<<20) {
		t.Fatalf("peak RSS grew %d MiB for an unauthenticated client", (peak-before)>>20)
	}
}

// readInBackground reads what the server sends on conn until it closes
// the connection (or 10 s pass), while the test goes on writing.
func readInBackground(conn net.Conn) <-chan string {
	replies := make(chan string, 1)
	go func() {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(conn) // the test checks what arrived
		replies <- string(b)
	}()
	return replies
}

// TestCommandMemoryIsBounded is the EXISTS with a million arguments
// (7 MB on the wire, about 1 GB of bookkeeping) as a process: it is refused
// at its header, the server's peak RSS stays flat, and another client is
// answered.
func TestCommandMemoryIsBounded(t *testing.T) { testserver.Models(t, testCommandMemoryIsBounded) }

func testCommandMemoryIsBounded(t *testing.T) {
	needsProc(t)
	ch := startChild(t, childConfig{EventLoops: testserver.EventLoops(t)})
	_, before := ch.memory(t)
	const n = 1_000_000
	var req bytes.Buffer
	fmt.Fprintf(&req, "*%d\r\n$6\r\nEXISTS\r\n", n+1)
	for range n {
		req.WriteString("$1\r\nx\r\n")
	}
	conn := testserver.DialRaw(t, ch.addr)
	replies := readInBackground(conn)
	conn.Write(req.Bytes()) // fails part way once the server hangs up
	want := fmt.Sprintf("-ERR Protocol error: invalid multibulk length (more than --max-args %d arguments)\r\n", resp.DefaultLimits.MaxArgs)
	if got := <-replies; got != want {
		t.Fatalf("reply %q, want %q", got, want)
	}
	ping(t, ch.addr)
	if _, peak := ch.memory(t); peak-before > memoryBound(32<<20) {
		t.Fatalf("peak RSS grew %d MiB for one command", (peak-before)>>20)
	}
	// (commands.TestArgOverheadBound: the largest command the default
	// allows costs at most 64 MiB of bookkeeping.)
}

// TestTransactionQueueIsBounded: the commands queued after MULTI count as
// one command (EXEC's): at most --max-args arguments and
// --client-query-buffer-limit bytes. Past either, the command is refused
// and EXEC aborts; nothing was applied.
func TestTransactionQueueIsBounded(t *testing.T) { testserver.Models(t, testTransactionQueueIsBounded) }

func testTransactionQueueIsBounded(t *testing.T) {
	lim := resp.DefaultLimits
	lim.MaxArgs, lim.QueryBufferLimit = 10, 1<<20
	ts := testserver.Start(t, testserver.Options{Limits: lim})
	ctx := context.Background()
	c := ts.Client(t, 2).Conn()
	defer c.Close()
	c.Do(ctx, "MULTI")
	for i := range 3 { // 9 arguments
		if s, err := c.Do(ctx, "SET", fmt.Sprint("k", i), "v").Text(); err != nil || s != "QUEUED" {
			t.Fatalf("queue %d: %q %v", i, s, err)
		}
	}
	want := "ERR transaction too large: the commands queued since MULTI may hold at most --max-args 10 arguments and --client-query-buffer-limit 1048576 bytes"
	if err := c.Do(ctx, "SET", "k3", "v").Err(); err == nil || err.Error() != want {
		t.Fatalf("the 4th SET: %v", err)
	}
	if err := c.Do(ctx, "EXEC").Err(); err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
		t.Fatalf("EXEC: %v", err)
	}
	if n, _ := c.Exists(ctx, "k0").Result(); n != 0 {
		t.Fatal("an aborted transaction was applied")
	}
	// Bytes: two 600 KiB values are more than 1 MiB.
	c.Do(ctx, "MULTI")
	v := strings.Repeat("v", 600<<10)
	if s, _ := c.Do(ctx, "SET", "a", v).Text(); s != "QUEUED" {
		t.Fatalf("first SET: %q", s)
	}
	if err := c.Do(ctx, "SET", "b", v).Err(); err == nil || err.Error() != want {
		t.Fatalf("second SET: %v", err)
	}
	c.Do(ctx, "DISCARD")
	// A new transaction starts from nothing.
	c.Do(ctx, "MULTI")
	c.Do(ctx, "SET", "a", "1")
	if r, err := c.Do(ctx, "EXEC").Slice(); err != nil || len(r) != 1 {
		t.Fatalf("EXEC after the limit: %v %v", r, err)
	}
}

// logBuffer collects log output for tests that check what is logged.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestHandlerPanicClosesOnlyItsConnection injects panics into the three
// kinds of handler call. Each answers the commands before it, replaces the
// panicking command's reply with an error, and closes that connection; the
// server keeps serving, counts the panics, and logs the command and the
// stack but never the arguments.
func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	testserver.Models(t, testHandlerPanicClosesOnlyItsConnection)
}

func testHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	logs := &logBuffer{}
	ts := testserver.Start(t, testserver.Options{
		Rules:  []rules.Def{testserver.Def("r", "fixed_window", "100", "1m", "")},
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Hook: func(kind, name string) {
			switch {
			case kind == "run" && name == "echo",
				kind == "prepare" && name == "rl.reset",
				kind == "reply" && name == "rl.peek",
				kind == "exec" && name == "get": // a keyed command, on its key's shard
				panic("injected panic in " + kind)
			case kind == "exec" && name == "exists": // a keyed command over its keys' shards, in place
				var m map[string]int
				//lint:ignore SA5000 the point: a runtime error in a handler
				m["x"]++ // a runtime error: assignment to entry in nil map
			}
		},
	})
	other := ts.Client(t, 2)
	ctx := context.Background()
	tests := []struct {
		name, send, want string
	}{
		{"run", "PING\r\nECHO secret-argument\r\nPING\r\n", "+PONG\r\n-ERR internal error in 'echo'; the connection is closed (the server log has the details)\r\n"},
		{"prepare", "RL.ALLOW u r\r\nRL.RESET secret-key r\r\nPING\r\n", "*6\r\n:1\r\n:100\r\n:99\r\n:0\r\n:60000\r\n:0\r\n" +
			"-ERR internal error in 'rl.reset'; the connection is closed (the server log has the details)\r\n"},
		{"exec on a shard", "RL.ALLOW u r\r\nGET secret-key\r\nPING\r\n", "*6\r\n:1\r\n:100\r\n:98\r\n:0\r\n:60000\r\n:0\r\n" +
			"-ERR internal error in 'get'; the connection is closed (the server log has the details)\r\n"},
		{"reply", "PING\r\nRL.PEEK secret-key r\r\nRL.ALLOW u r\r\nPING\r\n", "+PONG\r\n" +
			"-ERR internal error in 'rl.peek'; the connection is closed (the server log has the details)\r\n"},
		{"runtime error", "EXISTS secret-key\r\n", "-ERR internal error in 'exists'; the connection is closed (the server log has the details)\r\n"},
	}
	for _, tt := range tests {
		conn := testserver.DialRaw(t, ts.Addr)
		conn.Write([]byte(tt.send))
		if got := readUntilClosed(t, conn); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
		if err := other.Ping(ctx).Err(); err != nil {
			t.Fatalf("%s: the server stopped serving: %v", tt.name, err)
		}
	}
	if n := ts.Server.HandlerPanics(); n != 5 {
		t.Errorf("HandlerPanics() = %d, want 5", n)
	}
	// The RL.ALLOW after the panicking RL.PEEK in one batch still ran:
	// this is the fourth.
	if d := testserver.Decision(t, other.Do(ctx, "RL.ALLOW", "u", "r")); d[2] != 96 {
		t.Errorf("remaining after four RL.ALLOWs: %v", d)
	}
	text := logs.String()
	for _, want := range []string{"command=echo", "command=get", "command=rl.peek", "command=exists",
		"assignment to entry in nil map", "stack=", "value of type string"} {
		if !strings.Contains(text, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	if strings.Contains(text, "secret") {
		t.Errorf("the log holds a command's arguments:\n%s", text)
	}
}

// TestHandshakeDeadline: with a password, a connection that has not
// authenticated within --handshake-timeout is closed, whatever it sent;
// one that authenticated stays, with no idle timeout.
func TestHandshakeDeadline(t *testing.T) { testserver.Models(t, testHandshakeDeadline) }

func testHandshakeDeadline(t *testing.T) {
	lim := resp.DefaultLimits
	lim.HandshakeTimeout = 300 * time.Millisecond
	ts := testserver.Start(t, testserver.Options{Password: "s3cret", Limits: lim})
	authed := testserver.DialRaw(t, ts.Addr)
	rd := bufio.NewReader(authed)
	authed.Write([]byte("AUTH s3cret\r\n"))
	if line, _ := rd.ReadString('\n'); line != "+OK\r\n" {
		t.Fatalf("AUTH: %q", line)
	}
	start := time.Now()
	silent := testserver.DialRaw(t, ts.Addr)
	talker := testserver.DialRaw(t, ts.Addr)
	talker.Write([]byte("PING\r\n"))
	if got := readUntilClosed(t, silent); got != "" {
		t.Fatalf("silent connection got %q", got)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("closed after %v, before the handshake timeout", d)
	}
	if got := readUntilClosed(t, talker); got != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("unauthenticated talker got %q", got)
	}
	// Its own deadline passed before the others': still served.
	authed.Write([]byte("PING\r\n"))
	if line, err := rd.ReadString('\n'); line != "+PONG\r\n" {
		t.Fatalf("authenticated connection after the deadline: %q %v", line, err)
	}
	if n := ts.Server.HandshakeTimeouts(); n != 2 {
		t.Fatalf("HandshakeTimeouts() = %d, want 2", n)
	}
}

// TestTLSHandshakeDeadline: a TCP connection to the TLS port that never
// starts the handshake is closed after --handshake-timeout, without a
// password configured; a TLS client that did the handshake stays.
func TestTLSHandshakeDeadline(t *testing.T) { testserver.Models(t, testTLSHandshakeDeadline) }

func testTLSHandshakeDeadline(t *testing.T) {
	lim := resp.DefaultLimits
	lim.HandshakeTimeout = 300 * time.Millisecond
	ts := testserver.Start(t, testserver.Options{Limits: lim, TLS: selfSignedTLS(t)})
	ctx := context.Background()
	good := redis.NewClient(&redis.Options{Addr: ts.Addr, Protocol: 2, PoolSize: 1,
		TLSConfig: &tls.Config{InsecureSkipVerify: true}})
	defer good.Close()
	if err := good.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got := readUntilClosed(t, testserver.DialRaw(t, ts.Addr)); got != "" {
		t.Fatalf("silent connection got %q", got)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("closed after %v, before the handshake timeout", d)
	}
	if err := good.Ping(ctx).Err(); err != nil {
		t.Fatalf("a TLS client past the deadline: %v", err)
	}
	if n := ts.Server.HandshakeTimeouts(); n != 1 {
		t.Fatalf("HandshakeTimeouts() = %d, want 1", n)
	}
}

// selfSignedTLS returns a server TLS configuration with a fresh
// self-signed certificate for 127.0.0.1.
func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// TestAuthFailuresCloseTheConnection: the 10th failed AUTH or HELLO ... AUTH
// on a connection closes it after its WRONGPASS; fewer leave it open.
// Failures are counted per client address.
func TestAuthFailuresCloseTheConnection(t *testing.T) {
	testserver.Models(t, testAuthFailuresCloseTheConnection)
}

func testAuthFailuresCloseTheConnection(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Password: "s3cret"})
	wrong := "-WRONGPASS invalid username-password pair or user is disabled.\r\n"

	conn := testserver.DialRaw(t, ts.Addr)
	conn.Write([]byte(strings.Repeat("AUTH guess\r\n", 9) + "AUTH s3cret\r\nPING\r\n"))
	rd := bufio.NewReader(conn)
	var got strings.Builder
	for range 11 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", got.String(), err)
		}
		got.WriteString(line)
	}
	if want := strings.Repeat(wrong, 9) + "+OK\r\n+PONG\r\n"; got.String() != want {
		t.Fatalf("nine failures then the password: %q", got.String())
	}
	// As in Redis, a wrong AUTH does not undo an earlier good one.
	conn.Write([]byte("AUTH guess\r\nPING\r\n"))
	for _, want := range []string{wrong, "+PONG\r\n"} {
		if line, err := rd.ReadString('\n'); line != want {
			t.Fatalf("after a wrong AUTH on an authenticated connection: %q %v, want %q", line, err, want)
		}
	}

	conn = testserver.DialRaw(t, ts.Addr)
	conn.Write([]byte(strings.Repeat("AUTH guess\r\n", 5) + strings.Repeat("HELLO 3 AUTH default guess\r\n", 5) + "AUTH s3cret\r\nPING\r\n"))
	if got := readUntilClosed(t, conn); got != strings.Repeat(wrong, 10) {
		t.Fatalf("ten failures: %q", got)
	}
	if n := ts.Server.AuthFailures(); n != 20 {
		t.Fatalf("AuthFailures() = %d, want 20", n)
	}
	if top, other := ts.Server.AuthFailuresByAddr(); len(top) != 1 || top[0] != (server.AddrCount{"127.0.0.1", 20}) || other != 0 {
		t.Fatalf("AuthFailuresByAddr() = %v, %d", top, other)
	}
}

// TestHalfReadReplyThenMore: a client reads part of a large reply, stops,
// then reads the rest: nothing is lost or reordered while the server waits
// for the socket (the event loop's blocked state; a goroutine's blocked
// write).
func TestHalfReadReplyThenMore(t *testing.T) { testserver.Models(t, testHalfReadReplyThenMore) }

func testHalfReadReplyThenMore(t *testing.T) {
	ts := startServer(t)
	big := strings.Repeat("v", 4<<20)
	if err := ts.Client(t, 2).Set(context.Background(), "big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	conn := testserver.DialRaw(t, ts.Addr)
	conn.Write([]byte("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\nPING\r\n"))
	head := make([]byte, 1000)
	if _, err := io.ReadFull(conn, head); err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("ECHO after\r\nQUIT\r\n"))
	rest := readUntilClosed(t, conn)
	if got, want := string(head)+rest, "$4194304\r\n"+big+"\r\n+PONG\r\n$5\r\nafter\r\n+OK\r\n"; got != want {
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
}

// TestBigCommandReleasesItsBuffers: the buffers one big command grew — its
// argument list, its keyspace operations, its reply — are dropped once it
// is done, so the connection does not keep them for its lifetime. (The
// command state's own buffers: commands.TestSessionShrinks.)
func TestBigCommandReleasesItsBuffers(t *testing.T) {
	testserver.Models(t, testBigCommandReleasesItsBuffers)
}

func testBigCommandReleasesItsBuffers(t *testing.T) {
	ts := startServer(t)
	keys := []string{"DEL"}
	for i := range 60000 {
		keys = append(keys, fmt.Sprint("k", i))
	}
	input := slices.Concat(testserver.EncodeCommand(keys), testserver.EncodeCommand([]string{"ECHO", strings.Repeat("v", 2<<20)}), []byte("PING\r\n"))
	r := ts.Server.ServeStream(bytes.NewReader(input))
	if r.Commands != 3 {
		t.Fatalf("%d commands ran, want 3", r.Commands)
	}
	if r.ReplyBuffer > resp.KeepBuffer || r.ReaderRetained > 2*resp.KeepBuffer {
		t.Errorf("kept a %d-byte reply buffer and %d bytes in the reader", r.ReplyBuffer, r.ReaderRetained)
	}
}
