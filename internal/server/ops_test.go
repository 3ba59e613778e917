package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/testserver"
)

func TestAuth(t *testing.T) { testserver.Models(t, testAuth) }

func testAuth(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Password: "s3cret"})
	ctx := context.Background()
	anon := redis.NewClient(&redis.Options{Addr: ts.Addr, Protocol: 2, DisableIdentity: true})
	defer anon.Close()
	for _, args := range [][]any{{"PING"}, {"RL.ALLOW", "k", "api"}, {"GET", "k"}, {"MULTI"}} {
		if got := testserver.RedisError(t, anon, args...); got != "NOAUTH Authentication required." {
			t.Errorf("%v before AUTH: %s", args, got)
		}
	}
	conn := anon.Conn()
	defer conn.Close()
	for _, args := range [][]any{{"AUTH", "wrong"}, {"AUTH", "default", "wrong"}, {"AUTH", "admin", "s3cret"}} {
		err := conn.Do(ctx, args...).Err()
		if err == nil || err.Error() != "WRONGPASS invalid username-password pair or user is disabled." {
			t.Errorf("%v: %v", args, err)
		}
	}
	if err := conn.Do(ctx, "HELLO", "3").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH HELLO must be called") {
		t.Errorf("HELLO 3 unauthenticated: %v", err)
	}
	if err := conn.Do(ctx, "HELLO", "3", "AUTH", "default", "nope").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Errorf("HELLO 3 AUTH with a wrong password: %v", err)
	}
	if s, err := conn.Do(ctx, "AUTH", "s3cret").Text(); err != nil || s != "OK" {
		t.Fatalf("AUTH password: %q %v", s, err)
	}
	if s, err := conn.Ping(ctx).Result(); err != nil || s != "PONG" {
		t.Fatalf("PING after AUTH: %q %v", s, err)
	}
	if s, err := conn.Do(ctx, "AUTH", "default", "s3cret").Text(); err != nil || s != "OK" {
		t.Fatalf("AUTH default password: %q %v", s, err)
	}
	// go-redis authenticates with HELLO 3 AUTH default <password>.
	for _, p := range []int{2, 3} {
		c := redis.NewClient(&redis.Options{Addr: ts.Addr, Protocol: p, Password: "s3cret"})
		if err := c.Do(ctx, "RL.ALLOW", "k", "api").Err(); err != nil {
			t.Fatalf("go-redis RESP%d with a password: %v", p, err)
		}
		c.Close()
	}
	bad := redis.NewClient(&redis.Options{Addr: ts.Addr, Password: "wrong", MaxRetries: -1})
	defer bad.Close()
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("go-redis with a wrong password: %v", err)
	}
	authed := redis.NewClient(&redis.Options{Addr: ts.Addr, Protocol: 2, Password: "s3cret"})
	defer authed.Close()
	if info := authed.Info(ctx, "stats").Val(); !strings.Contains(info, "rl_auth_failures_total:") || strings.Contains(info, "rl_auth_failures_total:0\r\n") {
		t.Errorf("INFO stats does not count the failed AUTHs:\n%s", info)
	}
	// No password configured: AUTH is an error, as in Redis.
	open := startServer(t)
	if got := testserver.RedisError(t, open.Client(t, 2), "AUTH", "x"); !strings.HasPrefix(got, "ERR AUTH <password> called without any password configured") {
		t.Fatalf("AUTH without a password configured: %s", got)
	}
}

// readAll reads what the server sends until it closes the connection.
func readUntilClosed(t *testing.T, conn net.Conn) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(conn)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("waiting for the server to close: %v (read %q)", err, b)
	}
	return string(b)
}

func TestProtocolLimits(t *testing.T) { testserver.Models(t, testProtocolLimits) }

func testProtocolLimits(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Limits: resp.Limits{MaxBulkLen: 1 << 20, MaxArgs: 100, QueryBufferLimit: 4 << 20, OutputLimit: 1 << 20, OutputTimeout: time.Second}})
	other := ts.Client(t, 2)
	ctx := context.Background()
	tests := []struct {
		name, send, want string
	}{
		{"bulk over the limit", "*2\r\n$3\r\nGET\r\n$2097152\r\n", "-ERR Protocol error: invalid bulk length (more than --proto-max-bulk-len 1048576 bytes)\r\n"},
		{"too many arguments", "*101\r\n", "-ERR Protocol error: invalid multibulk length (more than --max-args 100 arguments)\r\n"},
		{"negative bulk", "*1\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"not a bulk", "*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"},
		{"giant inline", strings.Repeat("x", 70<<10), "-ERR Protocol error: too big inline request\r\n"},
		{"giant inline line, ended", strings.Repeat("x", 70000) + "\r\n", "-ERR Protocol error: too big inline request\r\n"},
	}
	for _, tt := range tests {
		conn := testserver.DialRaw(t, ts.Addr)
		conn.Write([]byte(tt.send))
		if got := readUntilClosed(t, conn); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
		if err := other.Ping(ctx).Err(); err != nil {
			t.Fatalf("%s: another client was affected: %v", tt.name, err)
		}
	}
	if info := other.Info(ctx, "stats").Val(); !strings.Contains(info, "rl_protocol_limit_disconnects_total:6\r\n") {
		t.Errorf("INFO stats does not count the six protocol-limit disconnects:\n%s", info)
	}
	// A big value within the bulk limit works; replies over the output
	// limit disconnect only that client.
	big := strings.Repeat("v", 600<<10)
	if err := other.Set(ctx, "big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	conn := testserver.DialRaw(t, ts.Addr)
	conn.Write([]byte(strings.Repeat("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", 2)))
	if got := readUntilClosed(t, conn); got != "" {
		t.Fatalf("over the output limit: got %d bytes before the close, want none", len(got))
	}
	if v, err := other.Get(ctx, "big").Result(); err != nil || len(v) != len(big) {
		t.Fatalf("GET big for a client within the limit: %d bytes, %v", len(v), err)
	}
}

// TestDeclaredGiantBulkKeepsMemoryFlat: a client declares a 2 GiB argument
// and starts sending it; the server refuses it at the header and its heap
// does not grow.
func TestDeclaredGiantBulkKeepsMemoryFlat(t *testing.T) {
	testserver.Models(t, testDeclaredGiantBulkKeepsMemoryFlat)
}

func testDeclaredGiantBulkKeepsMemoryFlat(t *testing.T) {
	ts := startServer(t) // default limits: 512 MiB
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap()
	conn := testserver.DialRaw(t, ts.Addr)
	conn.Write([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2147483648\r\n"))
	chunk := make([]byte, 1<<20)
	sent := 0
	conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	for range 64 { // up to 64 MiB of the promised 2 GiB, until the server hangs up
		n, err := conn.Write(chunk)
		sent += n
		if err != nil {
			break
		}
	}
	reply := readUntilClosed(t, conn)
	if !strings.HasPrefix(reply, "-ERR Protocol error: invalid bulk length") {
		t.Fatalf("reply %q", reply)
	}
	if grew := int64(heap()) - int64(before); grew > 8<<20 {
		t.Fatalf("heap grew %d bytes after a refused 2 GiB bulk (%d bytes sent)", grew, sent)
	}
	if err := ts.Client(t, 2).Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestQueryBufferLimit(t *testing.T) { testserver.Models(t, testQueryBufferLimit) }

func testQueryBufferLimit(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Limits: resp.Limits{MaxBulkLen: 8 << 20, MaxArgs: 100, QueryBufferLimit: 1 << 20, OutputLimit: 1 << 20, OutputTimeout: time.Second}})
	conn := testserver.DialRaw(t, ts.Addr)
	conn.Write([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4194304\r\n"))
	conn.Write(make([]byte, 2<<20))
	if got := readUntilClosed(t, conn); !strings.HasPrefix(got, "-ERR Protocol error: query buffer limit reached") {
		t.Fatalf("got %q", got)
	}
}

func TestMaxClients(t *testing.T) { testserver.Models(t, testMaxClients) }

func testMaxClients(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{MaxClients: 2})
	ctx := context.Background()
	a, b := testserver.DialRaw(t, ts.Addr), testserver.DialRaw(t, ts.Addr)
	for _, c := range []net.Conn{a, b} { // make sure both are accepted
		c.Write([]byte("PING\r\n"))
		if line, _ := bufio.NewReader(c).ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("first two clients: %q", line)
		}
	}
	third := testserver.DialRaw(t, ts.Addr)
	if got := readUntilClosed(t, third); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third client: %q", got)
	}
	if ts.Server.Rejected() != 1 {
		t.Fatalf("rejected %d", ts.Server.Rejected())
	}
	a.Close()
	// Once a slot frees, clients are served again.
	deadline := time.Now().Add(10 * time.Second)
	for ts.Server.Connected() > 1 && time.Now().Before(deadline) {
		runtime.Gosched() // waiting for the server to notice the close, not for time to pass
	}
	c := redis.NewClient(&redis.Options{Addr: ts.Addr, Protocol: 2, PoolSize: 1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("after a client left: %v", err)
	}
}

// TestIdleTimeout: an idle connection is closed, no sooner than the idle
// timeout after it was opened. The test's clock starts before the dial: the
// server's starts at the accept, which a loaded machine may run well before
// the dialing goroutine is scheduled again.
func TestIdleTimeout(t *testing.T) { testserver.Models(t, testIdleTimeout) }

func testIdleTimeout(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Idle: 100 * time.Millisecond})
	start := time.Now()
	conn := testserver.DialRaw(t, ts.Addr)
	readUntilClosed(t, conn) // the server closes the idle connection
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout", d)
	}
}

// TestSlowReaderIsDisconnected: a client asks for 16 MiB of replies — more
// than the socket buffers hold, less than the output limit — and reads none
// of them. Its write blocks, and after --client-output-timeout it is cut;
// another client is served meanwhile.
//
// The test waits for the server to count the disconnect, not for the
// connection count to drop: the count is also one before the server has
// accepted the slow client. Its deadline only bounds a hang: building 16 MiB
// of replies can take seconds under -race on a loaded machine (garbage
// collection of the reply buffer).
func TestSlowReaderIsDisconnected(t *testing.T) { testserver.Models(t, testSlowReaderIsDisconnected) }

func testSlowReaderIsDisconnected(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Limits: resp.Limits{MaxBulkLen: 8 << 20, MaxArgs: 100, QueryBufferLimit: 64 << 20, OutputLimit: 64 << 20, OutputTimeout: 200 * time.Millisecond}})
	other := ts.Client(t, 2)
	ctx := context.Background()
	if err := other.Set(ctx, "big", strings.Repeat("v", 1<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	conn := testserver.DialRaw(t, ts.Addr)
	conn.Write([]byte(strings.Repeat("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", 16)))
	for deadline := time.Now().Add(60 * time.Second); ts.Server.LimitDisconnects() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("a client that never reads was not disconnected")
		}
		if err := other.Ping(ctx).Err(); err != nil {
			t.Fatalf("another client was affected: %v", err)
		}
	}
	waitConnected(t, ts.Server, 1)
	// What it then reads is a prefix of its replies, and the end.
	got := readUntilClosed(t, conn)
	if want := "$1048576\r\n" + strings.Repeat("v", 1<<20) + "\r\n"; len(got) >= len(want) && got[:len(want)] != want {
		t.Fatalf("the slow client's replies are not GET's: %.40q", got)
	}
}

// TestShutdownFinishesInFlightCommands: a command already running when
// Shutdown begins completes and its reply is delivered; then the connection
// closes, new connections are refused, and Shutdown returns.
func TestShutdownFinishesInFlightCommands(t *testing.T) {
	testserver.Models(t, testShutdownFinishesInFlightCommands)
}

func testShutdownFinishesInFlightCommands(t *testing.T) {
	ts := startServer(t)
	// Hold every shard so the command below stays in flight.
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	// If the test fails before releasing the shards, release them before
	// the server's cleanup, which would wait forever for the command.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	go func() {
		defer close(done)
		ts.Keys.NewDispatcher().Exec(func(*keyspace.DB) {
			close(held)
			<-release
		})
	}()
	<-held
	idle := testserver.DialRaw(t, ts.Addr)
	conn := testserver.DialRaw(t, ts.Addr)
	before := ts.Server.TotalCommands()
	conn.Write([]byte("*3\r\n$8\r\nRL.ALLOW\r\n$1\r\nk\r\n$3\r\napi\r\n"))
	for deadline := time.Now().Add(10 * time.Second); ts.Server.TotalCommands() == before; {
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		runtime.Gosched() // waiting for the command to arrive, not for time to pass
	}
	shutdownErr := make(chan error, 1)
	shutdownDone := make(chan struct{})
	go func() {
		defer close(shutdownDone)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdownErr <- ts.Server.Shutdown(ctx)
	}()
	// Its Shutdown must not outlive the test; it finishes only once the
	// shards are released.
	t.Cleanup(func() {
		releaseOnce.Do(func() { close(release) })
		<-shutdownDone
	})
	for !ts.Server.Draining() {
		runtime.Gosched()
	}
	if got := readUntilClosed(t, idle); got != "" {
		t.Fatalf("idle connection got %q", got)
	}
	if c, err := net.DialTimeout("tcp", ts.Addr, time.Second); err == nil {
		c.Close()
		t.Fatal("a new connection was accepted while draining")
	}
	releaseOnce.Do(func() { close(release) })
	<-done
	got := readUntilClosed(t, conn)
	if !strings.HasPrefix(got, "*6\r\n:1\r\n:1000\r\n:999\r\n") {
		t.Fatalf("in-flight command's reply: %q", got)
	}
	if err := <-shutdownErr; err != nil {
		t.Fatal(err)
	}
}

// TestCommandsBeforeAMalformedOneAreAnswered: in one write, a good command
// then a malformed one: the good one is answered, then the error, then the
// connection closes (as Redis does).
func TestCommandsBeforeAMalformedOneAreAnswered(t *testing.T) {
	testserver.Models(t, testCommandsBeforeAMalformedOneAreAnswered)
}

func testCommandsBeforeAMalformedOneAreAnswered(t *testing.T) {
	ts := startServer(t)
	conn := testserver.DialRaw(t, ts.Addr)
	conn.Write([]byte("*1\r\n$4\r\nPING\r\nECHO x\r\n*1\r\n+PING\r\n"))
	want := "+PONG\r\n$1\r\nx\r\n-ERR Protocol error: expected '$', got '+'\r\n"
	if got := readUntilClosed(t, conn); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestShutdownCutsAClientThatDoesNotRead: a client with megabytes of
// replies it never reads cannot hold Shutdown past its deadline.
func TestShutdownCutsAClientThatDoesNotRead(t *testing.T) {
	testserver.Models(t, testShutdownCutsAClientThatDoesNotRead)
}

func testShutdownCutsAClientThatDoesNotRead(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	other := ts.Client(t, 2)
	if err := other.Set(ctx, "big", strings.Repeat("v", 1<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	conn := testserver.DialRaw(t, ts.Addr)
	before := ts.Server.TotalCommands()
	conn.Write([]byte(strings.Repeat("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", 32)))
	for deadline := time.Now().Add(10 * time.Second); ts.Server.TotalCommands() < before+32; {
		if time.Now().After(deadline) {
			t.Fatal("the GETs never ran")
		}
		runtime.Gosched() // waiting for the commands to arrive, not for time to pass
	}
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err := ts.Server.Shutdown(sctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown returned %v, want the deadline error", err)
	}
	if n := ts.Server.Connected(); n != 0 {
		t.Fatalf("%d connections still open after Shutdown", n)
	}
}

// TestCommandsSplitAcrossReads: a command arriving a byte at a time is
// answered once, when its last byte arrives, and a pipeline far larger than
// the read buffer is answered whole and in order.
func TestCommandsSplitAcrossReads(t *testing.T) { testserver.Models(t, testCommandsSplitAcrossReads) }

func testCommandsSplitAcrossReads(t *testing.T) {
	ts := startServer(t, testserver.Def("r", "fixed_window", "1000000", "1m", ""))
	conn := testserver.DialRaw(t, ts.Addr)
	rd := bufio.NewReader(conn)
	cmd := []byte("*3\r\n$8\r\nRL.ALLOW\r\n$1\r\nk\r\n$1\r\nr\r\n")
	for _, b := range cmd {
		if _, err := conn.Write([]byte{b}); err != nil {
			t.Fatal(err)
		}
	}
	if line, err := rd.ReadString('\n'); err != nil || line != "*6\r\n" {
		t.Fatalf("reply to a command sent a byte at a time: %q %v", line, err)
	}
	for range 6 {
		rd.ReadString('\n')
	}
	// 5000 commands (~250 KiB, 16 times the initial read buffer) in one write.
	const n = 5000
	var pipeline []byte
	for i := range n {
		pipeline = fmt.Appendf(pipeline, "*2\r\n$4\r\nECHO\r\n$%d\r\n%d\r\n", len(strconv.Itoa(i)), i)
	}
	go conn.Write(pipeline)
	for i := range n {
		header, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		body, _ := rd.ReadString('\n')
		if want := strconv.Itoa(i); header != fmt.Sprintf("$%d\r\n", len(want)) || body != want+"\r\n" {
			t.Fatalf("reply %d: %q %q", i, header, body)
		}
	}
	if got := testserver.Decision(t, ts.Client(t, 2).Do(context.Background(), "RL.PEEK", "k", "r")); got[2] != 999999 {
		t.Fatalf("the byte-at-a-time command was not charged exactly once: %v", got)
	}
}

// TestClientLeavingMidReplyHurtsNoOne: clients that send a pipeline and
// close (or reset) before reading its replies make the server's writes fail
// (EPIPE, ECONNRESET); the server drops them and keeps serving.
func TestClientLeavingMidReplyHurtsNoOne(t *testing.T) {
	testserver.Models(t, testClientLeavingMidReplyHurtsNoOne)
}

func testClientLeavingMidReplyHurtsNoOne(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	other := ts.Client(t, 2)
	if err := other.Set(ctx, "big", strings.Repeat("v", 256<<10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := ts.Server.TotalConnections()
	for i := range 8 {
		conn := testserver.DialRaw(t, ts.Addr)
		conn.Write([]byte(strings.Repeat("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", 16)))
		if i%2 == 0 {
			conn.(*net.TCPConn).SetLinger(0) // reset instead of a clean close
		}
		conn.Close()
	}
	// Until the server has accepted all eight (the open count can be one
	// before it has) and closed them. The deadline only bounds a hang.
	for deadline := time.Now().Add(60 * time.Second); ts.Server.TotalConnections() < before+8 || ts.Server.Connected() > 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 8 connections accepted, %d still open", ts.Server.TotalConnections()-before, ts.Server.Connected()-1)
		}
		if err := other.Ping(ctx).Err(); err != nil {
			t.Fatalf("another client was affected: %v", err)
		}
	}
	if v, err := other.Get(ctx, "big").Result(); err != nil || len(v) != 256<<10 {
		t.Fatalf("GET after the departures: %d bytes, %v", len(v), err)
	}
}

// TestMalformedCommandAfterLargeReplies: the replies before a malformed
// command are more than the socket takes at once; once the client has read
// them all, the error still comes and the connection closes.
func TestMalformedCommandAfterLargeReplies(t *testing.T) {
	testserver.Models(t, testMalformedCommandAfterLargeReplies)
}

func testMalformedCommandAfterLargeReplies(t *testing.T) {
	ts := startServer(t)
	big := strings.Repeat("v", 1<<20)
	if err := ts.Client(t, 2).Set(context.Background(), "big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	conn := testserver.DialRaw(t, ts.Addr)
	conn.Write([]byte(strings.Repeat("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", 8) + "*1\r\n+PING\r\n"))
	reply := "$1048576\r\n" + big + "\r\n"
	want := strings.Repeat(reply, 8) + "-ERR Protocol error: expected '$', got '+'\r\n"
	if got := readUntilClosed(t, conn); got != want {
		t.Fatalf("got %d bytes ending %q, want %d bytes ending %q", len(got), got[max(0, len(got)-60):], len(want), want[len(want)-60:])
	}
}
