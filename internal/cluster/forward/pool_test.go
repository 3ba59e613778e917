package forward

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/cluster/internal/fakenode"
	"github.com/rlserver/rlserver/internal/testskip"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testskip.Report(code) // a skipped redis-server test is otherwise silent in go test ./...
	os.Exit(code)
}

func words(s string) [][]byte {
	var out [][]byte
	for _, w := range strings.Fields(s) {
		out = append(out, []byte(w))
	}
	return out
}

// do runs one command and returns its reply as a string.
func do(t *testing.T, p *Pool, addr string, proto int, cmd string) string {
	t.Helper()
	out, err := p.Do(context.Background(), addr, proto, words(cmd), nil)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return string(out)
}

func TestRealRedis(t *testing.T) {
	r := fakenode.StartRedis(t, "--requirepass", "s3cret")
	p := New(Options{Password: "s3cret", Dial: r.Dial})
	defer p.Close()
	const addr = "redis:6379" // Dial ignores it; it keys the pool
	for _, tt := range []struct {
		proto     int
		cmd, want string
	}{
		{2, "SET k v", "+OK\r\n"},
		{2, "GET k", "$1\r\nv\r\n"},
		{2, "GET missing", "$-1\r\n"},
		{3, "GET missing", "_\r\n"},
		{2, "CONFIG GET maxmemory-policy", "*2\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n"},
		{3, "CONFIG GET maxmemory-policy", "%1\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n"},
		{2, "INCR k", "-ERR value is not an integer or out of range\r\n"}, // an error reply is a reply
		{2, "NOSUCH", "-ERR unknown command 'NOSUCH', with args beginning with: \r\n"},
	} {
		if got := do(t, p, addr, tt.proto, tt.cmd); got != tt.want {
			t.Errorf("RESP%d %s: got %q, want %q", tt.proto, tt.cmd, got, tt.want)
		}
	}
	// A reply of 1 MiB, and arguments that are not words.
	big := strings.Repeat("x", 1<<20)
	if _, err := p.Do(context.Background(), addr, 2, [][]byte{[]byte("SET"), []byte("big key\r\n"), []byte(big)}, nil); err != nil {
		t.Fatal(err)
	}
	out, err := p.Do(context.Background(), addr, 2, [][]byte{[]byte("GET"), []byte("big key\r\n")}, nil)
	if err != nil || string(out) != "$1048576\r\n"+big+"\r\n" {
		t.Fatalf("1 MiB value: %d bytes, %v", len(out), err)
	}
	if s := p.Stats(); s.Dials != 2 || s.Failures != 0 {
		t.Errorf("stats %+v: want one connection per protocol", s)
	}
}

func TestRealRedisConcurrent(t *testing.T) {
	r := fakenode.StartRedis(t)
	p := New(Options{Dial: r.Dial, MaxConns: 3})
	defer p.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if _, err := p.Do(context.Background(), "r", 2, words("INCR n"), nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := do(t, p, "r", 2, "GET n"); got != "$4\r\n1600\r\n" {
		t.Errorf("after 1600 INCRs: %q", got)
	}
	if s := p.Stats(); s.Dials > 3 || s.Requests != 1601 {
		t.Errorf("stats %+v: want at most 3 connections", s)
	}
}

func TestRealRedisWrongPassword(t *testing.T) {
	r := fakenode.StartRedis(t, "--requirepass", "s3cret")
	for _, proto := range []int{2, 3} {
		p := New(Options{Password: "wrong-pw", Dial: r.Dial})
		_, err := p.Do(context.Background(), "r", proto, words("PING"), nil)
		p.Close()
		if !errors.Is(err, ErrUnreachable) || !errors.Is(err, ErrAuth) || errors.Is(err, ErrNoReply) {
			t.Errorf("RESP%d: %v, want ErrUnreachable and ErrAuth", proto, err)
		}
		if err != nil && strings.Contains(err.Error(), "wrong-pw") {
			t.Errorf("the password shows in %q", err)
		}
	}
}

// TestRealRedisRestart: pooled connections to a node that restarted fail
// on first use; the request is re-sent once on a new connection.
func TestRealRedisRestart(t *testing.T) {
	r := fakenode.StartRedis(t)
	p := New(Options{Dial: r.Dial})
	defer p.Close()
	do(t, p, "r", 2, "PING")
	r.Restart(t)
	if got := do(t, p, "r", 2, "PING"); got != "+PONG\r\n" {
		t.Fatalf("after restart: %q", got)
	}
	if s := p.Stats(); s.Retries != 1 || s.Dials != 2 {
		t.Errorf("stats %+v: want one retry on a second connection", s)
	}
	r.Stop()
	_, err := p.Do(context.Background(), "r", 2, words("PING"), nil)
	var fe *Error
	if !errors.Is(err, ErrUnreachable) || !errors.As(err, &fe) || fe.Op != "connect" {
		t.Errorf("stopped node: %v, want ErrUnreachable at connect", err)
	}
}

// TestDroppedConnectionsAreAllReplaced: when a node drops every
// connection (a restart), the first request retries once on a new
// connection and the other stale idle connections are not tried at all.
func TestDroppedConnectionsAreAllReplaced(t *testing.T) {
	release := make(chan struct{})
	var waiting atomic.Int32
	s, _, _ := fake(t, nil, func(args [][]byte) []byte {
		if string(args[0]) == "SLOW" {
			waiting.Add(1)
			<-release
		}
		return fakenode.Simple("OK")
	})
	p := New(Options{})
	defer p.Close()
	// Two requests at once leave two idle connections.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.Do(context.Background(), s.Addr, 2, words("SLOW"), nil); err != nil {
				t.Error(err)
			}
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); waiting.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the two requests did not arrive")
		}
		time.Sleep(time.Millisecond) // polling for a state change, not timing one
	}
	close(release)
	wg.Wait()
	s.DropConnections()
	for range 3 {
		if got := do(t, p, s.Addr, 2, "FAST"); got != "+OK\r\n" {
			t.Fatalf("%q", got)
		}
	}
	if st := p.Stats(); st.Dials != 3 || st.Retries != 1 || st.Failures != 0 {
		t.Errorf("stats %+v: want 2 dials before the drop, 1 after, and 1 retry", st)
	}
}

func TestUnreachableAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := New(Options{})
	defer p.Close()
	_, err = p.Do(context.Background(), addr, 2, words("PING"), nil)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "forward to "+addr+": connect:") {
		t.Errorf("%v", err)
	}
	if s := p.Stats(); s.Failures != 1 {
		t.Errorf("stats %+v", s)
	}
}

// fake starts a fake node that records the commands it gets and answers
// PING with PONG, HELLO with a map, and anything else with reply(args).
func fake(t *testing.T, tc *tls.Config, reply func(args [][]byte) []byte) (*fakenode.Server, *[]string, *sync.Mutex) {
	var mu sync.Mutex
	var got []string
	s := fakenode.Start(t, func(c *fakenode.Conn, args [][]byte) []byte {
		mu.Lock()
		got = append(got, string(bytesJoin(args)))
		mu.Unlock()
		switch strings.ToUpper(string(args[0])) {
		case "PING":
			return fakenode.Simple("PONG")
		case "HELLO":
			return []byte("%1\r\n$5\r\nproto\r\n:3\r\n")
		}
		return reply(args)
	}, tc)
	return s, &got, &mu
}

func bytesJoin(args [][]byte) []byte {
	var b []byte
	for i, a := range args {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, a...)
	}
	return b
}

func TestHandshakeAndInit(t *testing.T) {
	s, got, mu := fake(t, nil, func([][]byte) []byte { return fakenode.Simple("OK") })
	p := New(Options{Password: "pw", Init: [][]string{PeerCommand}})
	defer p.Close()
	do(t, p, s.Addr, 3, "RL.ALLOW k r")
	do(t, p, s.Addr, 2, "RL.ALLOW k r")
	mu.Lock()
	defer mu.Unlock()
	want := []string{"HELLO 3 AUTH default pw", "RL.CLUSTER PEER", "RL.ALLOW k r", "AUTH default pw", "RL.CLUSTER PEER", "RL.ALLOW k r"}
	if strings.Join(*got, "|") != strings.Join(want, "|") {
		t.Errorf("node got %q, want %q", *got, want)
	}
}

func TestInitRefused(t *testing.T) {
	s, _, _ := fake(t, nil, func([][]byte) []byte { return fakenode.Err("ERR unknown command 'RL.CLUSTER'") })
	p := New(Options{Init: [][]string{PeerCommand}})
	defer p.Close()
	_, err := p.Do(context.Background(), s.Addr, 2, words("PING"), nil)
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "RL.CLUSTER: ERR unknown command") {
		t.Errorf("%v", err)
	}
}

// TestNoReplyIsNotRetried: a node that takes the request and never answers
// gives ErrNoReply (the request may have run) and gets it only once.
func TestNoReplyIsNotRetried(t *testing.T) {
	s, got, mu := fake(t, nil, func([][]byte) []byte { return nil })
	p := New(Options{Timeout: 200 * time.Millisecond})
	defer p.Close()
	do(t, p, s.Addr, 2, "PING") // an idle connection to reuse
	_, err := p.Do(context.Background(), s.Addr, 2, words("RL.ALLOW k r"), nil)
	var fe *Error
	if !errors.Is(err, ErrNoReply) || errors.Is(err, ErrUnreachable) || !errors.As(err, &fe) || !fe.Sent {
		t.Fatalf("%v, want ErrNoReply", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%v is not a timeout", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(strings.Join(*got, "|"), "RL.ALLOW"); n != 1 {
		t.Errorf("the node got the request %d times", n)
	}
}

// TestMalformedReplyDropsTheConnection: after a bad reply, the next
// request works on a new connection.
func TestMalformedReplyDropsTheConnection(t *testing.T) {
	var n atomic.Int32
	s, _, _ := fake(t, nil, func([][]byte) []byte {
		if n.Add(1) == 1 {
			return []byte("?garbage\r\n")
		}
		return fakenode.Simple("OK")
	})
	p := New(Options{})
	defer p.Close()
	_, err := p.Do(context.Background(), s.Addr, 2, words("SET a b"), nil)
	if !errors.Is(err, ErrNoReply) || !errors.Is(err, ErrProtocol) {
		t.Fatalf("%v", err)
	}
	if got := do(t, p, s.Addr, 2, "SET a b"); got != "+OK\r\n" {
		t.Errorf("%q", got)
	}
	if st := p.Stats(); st.Dials != 2 {
		t.Errorf("stats %+v, want a second connection", st)
	}
}

// TestPoolBound: with MaxConns 1 and the one connection busy, a request
// waits, and fails ErrUnreachable when its context ends first.
func TestPoolBound(t *testing.T) {
	release := make(chan struct{})
	s, _, _ := fake(t, nil, func(args [][]byte) []byte {
		if string(args[0]) == "SLOW" {
			<-release
		}
		return fakenode.Simple("OK")
	})
	p := New(Options{MaxConns: 1, Timeout: 10 * time.Second})
	defer p.Close()
	slowDone := make(chan error, 1)
	go func() {
		_, err := p.Do(context.Background(), s.Addr, 2, words("SLOW"), nil)
		slowDone <- err
	}()
	// Wait until the slow request holds the only connection.
	for deadline := time.Now().Add(5 * time.Second); p.Stats().Dials == 0; {
		if time.Now().After(deadline) {
			t.Fatal("slow request did not connect")
		}
		time.Sleep(time.Millisecond) // polling for a state change, not timing one
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := p.Do(ctx, s.Addr, 2, words("FAST"), nil)
	cancel()
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "every connection busy") {
		t.Errorf("%v", err)
	}
	close(release)
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
	if got := do(t, p, s.Addr, 2, "FAST"); got != "+OK\r\n" || p.Stats().Dials != 1 {
		t.Errorf("%q, stats %+v", got, p.Stats())
	}
}

func TestIdleTimeoutRedials(t *testing.T) {
	s, _, _ := fake(t, nil, nil)
	p := New(Options{IdleTimeout: time.Nanosecond})
	defer p.Close()
	do(t, p, s.Addr, 2, "PING")
	do(t, p, s.Addr, 2, "PING")
	if st := p.Stats(); st.Dials != 2 || st.Retries != 0 {
		t.Errorf("stats %+v: want the stale connection closed, not tried", st)
	}
}

func TestCloseAndPrune(t *testing.T) {
	a, _, _ := fake(t, nil, nil)
	b, _, _ := fake(t, nil, nil)
	p := New(Options{})
	do(t, p, a.Addr, 2, "PING")
	do(t, p, b.Addr, 2, "PING")
	p.Prune(func(addr string) bool { return addr == a.Addr })
	do(t, p, a.Addr, 2, "PING")
	do(t, p, b.Addr, 2, "PING")
	if st := p.Stats(); st.Dials != 3 {
		t.Errorf("stats %+v: want b's connection closed by Prune and a's kept", st)
	}
	p.Close()
	p.Close()
	_, err := p.Do(context.Background(), a.Addr, 2, words("PING"), nil)
	if !errors.Is(err, ErrClosed) || !errors.Is(err, ErrUnreachable) {
		t.Errorf("after Close: %v", err)
	}
}

func TestTLS(t *testing.T) {
	serverTLS, roots := selfSigned(t)
	s, _, _ := fake(t, serverTLS, func([][]byte) []byte { return fakenode.Bulk("over tls") })
	p := New(Options{TLS: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}})
	defer p.Close()
	if got := do(t, p, s.Addr, 2, "GET k"); got != "$8\r\nover tls\r\n" {
		t.Errorf("%q", got)
	}
	plain := New(Options{Timeout: 500 * time.Millisecond, DialTimeout: 500 * time.Millisecond})
	defer plain.Close()
	if _, err := plain.Do(context.Background(), s.Addr, 2, words("GET k"), nil); err == nil {
		t.Error("a plain client got an answer from a TLS node")
	}
}

// selfSigned makes a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "rlserver test"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, roots
}
