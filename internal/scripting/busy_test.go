package scripting

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startOwnRedis starts a redis-server of this test's own (the unkillable
// case ends it with SHUTDOWN NOSAVE) and returns its socket.
func startOwnRedis(t *testing.T) string {
	t.Helper()
	needRedis(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command("redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
		"--dir", dir, "--busy-reply-threshold", "10")
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return sock
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not start")
		}
	}
}

func dialSocket(t *testing.T, sock string) *redisConn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &redisConn{t: t, conn: c, r: bufio.NewReader(c)}
}

// send writes a command without reading its reply.
func (c *redisConn) send(args ...string) {
	var req []byte
	req = appendPrefixed(req, '*', int64(len(args)))
	for _, a := range args {
		req = appendBulk(req, a)
	}
	if _, err := c.conn.Write(req); err != nil {
		c.t.Fatal(err)
	}
}

// busyOnRedis sends a runaway script on one connection and waits until
// another gets BUSY; it returns that BUSY reply.
func busyOnRedis(t *testing.T, runner, other *redisConn, script string) []byte {
	t.Helper()
	runner.send("EVAL", script, "0")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if reply := other.do("PING"); strings.HasPrefix(string(reply), "-BUSY") {
			return reply
		}
	}
	t.Fatal("redis-server never answered BUSY")
	return nil
}

// TestBusyAndKillMatchRedis compares the replies around a runaway script:
// BUSY to other clients, SCRIPT KILL's OK and the killed script's error,
// and UNKILLABLE for a script that has written.
func TestBusyAndKillMatchRedis(t *testing.T) {
	sock := startOwnRedis(t)
	runner, other := dialSocket(t, sock), dialSocket(t, sock)
	const runaway = "while true do end"

	busy := busyOnRedis(t, runner, other, runaway)
	if string(busy) != string(appendErrorReply(nil, ErrBusy.Text)) {
		t.Errorf("BUSY: redis %q, ErrBusy %q", busy, ErrBusy.Text)
	}
	if reply := other.do("SCRIPT", "KILL"); string(reply) != "+OK\r\n" {
		t.Fatalf("SCRIPT KILL: %q", reply)
	}
	killedOnRedis, err := readRaw(runner.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := newTestClock()
	e := New(Options{Now: clock.Now})
	done := runAsync(e, context.Background(), mustLoad(t, runaway), nil)
	waitRunning(t, e)
	clock.Advance(DefaultTimeLimit)
	if err := e.Kill(); err != nil {
		t.Fatal(err)
	}
	var se *Error
	if err := waitDone(t, done); !errors.As(err, &se) || string(appendErrorReply(nil, se.Text)) != string(killedOnRedis) {
		t.Errorf("killed script: redis %q, engine %v", killedOnRedis, err)
	}

	busyOnRedis(t, runner, other, "redis.call('set', 'x', 'y') while true do end")
	if reply := other.do("SCRIPT", "KILL"); string(reply) != string(appendErrorReply(nil, ErrUnkillable.Text)) {
		t.Errorf("SCRIPT KILL after a write: redis %q, ErrUnkillable %q", reply, ErrUnkillable.Text)
	}
	other.send("SHUTDOWN", "NOSAVE")
}
