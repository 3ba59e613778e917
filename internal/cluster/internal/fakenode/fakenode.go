// Package fakenode is test support for the cluster packages: a tiny RESP
// server whose replies a test supplies (to stand for an rlserver node, or
// a misbehaving one), and a helper that starts a real redis-server.
package fakenode

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testskip"
)

// Conn is one client connection of a Server, as its handler sees it.
type Conn struct {
	Proto int // 2 until the handler sets 3 (after HELLO 3)
	TLS   bool
	Local netip.AddrPort // the address the client dialled
	// Values lets a handler keep per-connection state (ASKING, a name).
	Values map[string]string
	net    net.Conn
}

// Close closes the connection from the server side, after the replies
// written so far.
func (c *Conn) Close() { c.net.Close() }

// Handler answers one command with the reply's RESP bytes. A nil reply
// sends nothing (a node that does not answer).
type Handler func(c *Conn, args [][]byte) []byte

// Server is a RESP server on 127.0.0.1 with a port chosen by the system.
// Close stops it and waits for every connection's goroutine.
type Server struct {
	Addr    string
	ln      net.Listener
	handler Handler
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]bool
	closed  bool
}

// Start starts a server answering with h; with tc non-nil it speaks TLS.
// It is closed when t ends.
func Start(t testing.TB, h Handler, tc *tls.Config) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	s := &Server{Addr: ln.Addr().String(), ln: ln, handler: h, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept(tc != nil)
	t.Cleanup(s.Close)
	return s
}

func (s *Server) accept(isTLS bool) {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[nc] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(nc, isTLS)
	}
}

func (s *Server) serve(nc net.Conn, isTLS bool) {
	defer s.wg.Done()
	defer func() {
		nc.Close()
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
	}()
	local, _ := netip.ParseAddrPort(nc.LocalAddr().String())
	c := &Conn{Proto: 2, TLS: isTLS, Local: local, Values: map[string]string{}, net: nc}
	r := bufio.NewReader(nc)
	for {
		args, err := ReadCommand(r)
		if err != nil {
			return
		}
		if reply := s.handler(c, args); reply != nil {
			if _, err := nc.Write(reply); err != nil {
				return
			}
		}
	}
}

// DropConnections closes every open connection, as a restart of the
// node would, and keeps listening.
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for nc := range s.conns {
		nc.Close()
	}
}

// Close stops accepting, closes every connection and waits for their
// goroutines. Safe to call twice.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// ReadCommand reads one command: a RESP array of bulk strings, or an
// inline command (words on a line, as redis-cli sends none but telnet
// does).
func ReadCommand(r *bufio.Reader) ([][]byte, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 || line[0] != '*' {
		var args [][]byte
		for _, f := range strings.Fields(string(line)) {
			args = append(args, []byte(f))
		}
		return args, nil
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n < 0 || n > 1<<20 {
		return nil, fmt.Errorf("bad array header %q", line)
	}
	args := make([][]byte, n)
	for i := range args {
		h, err := readLine(r)
		if err != nil {
			return nil, err
		}
		if len(h) == 0 || h[0] != '$' {
			return nil, fmt.Errorf("bad bulk header %q", h)
		}
		size, err := strconv.Atoi(string(h[1:]))
		if err != nil || size < 0 || size > 64<<20 {
			return nil, fmt.Errorf("bad bulk length %q", h)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = buf[:size]
	}
	return args, nil
}

func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	return []byte(strings.TrimRight(string(line), "\r\n")), nil
}

// Bulk, Int, Simple, Err and Array encode RESP replies for handlers.
func Bulk(s string) []byte   { return []byte("$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n") }
func Int(n int) []byte       { return []byte(":" + strconv.Itoa(n) + "\r\n") }
func Simple(s string) []byte { return []byte("+" + s + "\r\n") }
func Err(s string) []byte    { return []byte("-" + s + "\r\n") }
func Array(items ...[]byte) []byte {
	b := []byte("*" + strconv.Itoa(len(items)) + "\r\n")
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

// Null is RESP2's null bulk string.
var Null = []byte("$-1\r\n")

// Redis is a redis-server the test started, on a Unix socket.
type Redis struct {
	Socket string
	Dir    string
	cmd    *exec.Cmd
	done   chan struct{}
}

// StartRedis starts redis-server on a Unix socket in a temporary directory
// with no TCP port and no persistence, plus args (such as
// "--requirepass", "pw"), and stops it when t ends. It skips t (through
// testskip) if redis-server is not installed.
func StartRedis(t testing.TB, args ...string) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testskip.Skip(t, "redis-server", "apt-get install redis-server")
	}
	dir := t.TempDir()
	r := &Redis{Socket: filepath.Join(dir, "redis.sock"), Dir: dir}
	r.start(t, bin, args)
	t.Cleanup(r.Stop)
	return r
}

func (r *Redis) start(t testing.TB, bin string, args []string) {
	t.Helper()
	all := append([]string{"--port", "0", "--unixsocket", r.Socket, "--dir", r.Dir,
		"--save", "", "--appendonly", "no"}, args...)
	r.cmd = exec.Command(bin, all...)
	r.cmd.Stdout, r.cmd.Stderr = io.Discard, io.Discard
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(r.cmd, r.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", r.Socket)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-r.done:
			t.Fatalf("redis-server %v exited at start", args)
		default:
		}
		if time.Now().After(deadline) {
			r.Stop()
			t.Fatalf("redis-server did not listen on %s within 10s: %v", r.Socket, err)
		}
		time.Sleep(20 * time.Millisecond) // polling for the socket, not timing a behaviour
	}
}

// Stop kills the server and waits for it to exit. Safe to call twice.
func (r *Redis) Stop() {
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Kill()
	<-r.done
	os.Remove(r.Socket)
	r.cmd = nil
}

// Restart stops the server and starts it again on the same socket with
// args.
func (r *Redis) Restart(t testing.TB, args ...string) {
	t.Helper()
	r.Stop()
	bin, _ := exec.LookPath("redis-server")
	r.start(t, bin, args)
}

// Dial connects to the server's socket: a forward.Options.Dial for tests.
func (r *Redis) Dial(ctx context.Context, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", r.Socket)
}
