// Package rltest runs a real rlserver process for the client packages'
// tests: TestMain builds the binary once (in the background, while the
// tests that need none run), and each test starts its own server on
// 127.0.0.1:0 with the rules it needs, killed when the test ends. Proxy is
// a TCP proxy between client and server that can delay traffic or refuse
// it, to make the server slow or unreachable without stopping it.
package rltest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Deadline bounds every wait for a process in these tests: generous, since
// a loaded 2-core machine running the race detector is slow, and only a
// failure waits it out.
const Deadline = 30 * time.Second

// Binary is the rlserver binary, built once per test process.
type Binary struct {
	dir   string
	path  string
	err   error
	built chan struct{}
}

// Build starts building ./cmd/rlserver of this module into a temporary
// directory and returns at once; Path waits for it. TEST_RLSERVER_BINARY
// names a binary to use instead.
func Build() *Binary {
	b := &Binary{built: make(chan struct{})}
	if p := os.Getenv("TEST_RLSERVER_BINARY"); p != "" {
		b.path = p
		close(b.built)
		return b
	}
	go func() {
		defer close(b.built)
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			b.err = fmt.Errorf("go env GOMOD: %v", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		if b.dir, b.err = os.MkdirTemp("", "rlserver-bin"); b.err != nil {
			return
		}
		path := filepath.Join(b.dir, "rlserver")
		build := exec.Command("go", "build", "-o", path, "./cmd/rlserver")
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building rlserver: %v\n%s", err, out)
			return
		}
		b.path = path
	}()
	return b
}

// Path waits for the build and returns the binary's path.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	<-b.built
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Remove waits for the build and deletes what it made (call it after
// m.Run, so the build's goroutine ends before the process).
func (b *Binary) Remove() {
	<-b.built
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// Process is a running rlserver.
type Process struct {
	Addr   string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
}

var startedLine = regexp.MustCompile(`msg="rlserver started".* addr=(127\.0\.0\.1:\d+)`)

// Start runs the binary on 127.0.0.1:0 without persistence, with rules (a
// rules file's YAML) and extra flags, waits until it serves, and kills it
// when the test ends.
func Start(t testing.TB, bin *Binary, rules string, args ...string) *Process {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"--addr", "127.0.0.1:0", "--data-dir", "", "--rules", path}, args...)
	cmd := exec.Command(bin.Path(t), args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RLSERVER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	p := &Process{cmd: cmd, out: &syncBuffer{wrote: make(chan struct{}, 1)}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.Kill)
	timeout := time.After(Deadline)
	for {
		if m := startedLine.FindStringSubmatch(p.out.String()); m != nil {
			p.Addr = m[1]
			return p
		}
		select {
		case <-p.out.wrote:
		case <-p.exited:
			t.Fatalf("rlserver exited before serving:\n%s", p.out.String())
		case <-timeout:
			t.Fatalf("rlserver printed no start-up line:\n%s", p.out.String())
		}
	}
}

// Kill stops the server at once (SIGKILL) and waits for it to exit.
func (p *Process) Kill() {
	p.cmd.Process.Signal(unix.SIGKILL)
	<-p.exited
}

// Output is what the server logged so far.
func (p *Process) Output() string { return p.out.String() }

// syncBuffer is a bytes.Buffer safe for the process's output and the test
// to share; wrote is signalled after every write.
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

// Proxy forwards TCP connections from its own address to a target, and
// can delay what clients send, or cut every connection and refuse new ones.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	delay  time.Duration
	refuse bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	done   chan struct{}
}

// NewProxy listens on 127.0.0.1:0 and forwards to target until the test
// ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address, for the client to dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay delays every chunk a client sends by d before it reaches the
// server (0: none).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Refuse cuts every open connection and closes new ones at once, as a dead
// server's host would (on: true), or forwards again (false).
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	if on {
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c, true)
		go p.pipe(c, s, false)
	}
}

// pipe copies from src to dst until either side closes, then closes both;
// delayed: what goes to the server waits the proxy's delay first.
func (p *Proxy) pipe(dst, src net.Conn, delayed bool) {
	defer p.wg.Done()
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if delayed {
				p.mu.Lock()
				d := p.delay
				p.mu.Unlock()
				if d > 0 {
					select {
					case <-time.After(d):
					case <-p.done:
						return
					}
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF or a cut connection: either way, done
			return
		}
	}
}

func (p *Proxy) close() {
	close(p.done)
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
