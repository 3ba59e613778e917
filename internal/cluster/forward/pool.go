// Package forward relays a command to another rlserver node and returns
// its raw RESP reply: what a node does with a request for a slot it does
// not own when it forwards instead of answering MOVED (for clients that
// cannot route rlserver's commands, and for the gRPC and HTTP front ends).
//
// A Pool keeps, per node address and protocol version, a bounded set of
// connections, authenticated with the cluster's password, over TLS if
// configured. A request takes an idle connection (or dials one), writes
// the command, reads exactly one reply and returns the connection. The
// reply is returned as the peer sent it, in the protocol the originating
// client speaks (a RESP3 client's request goes over a connection that
// sent HELLO 3), so the caller copies it to the client unchanged.
package forward

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Options configure a Pool. Zero values take the defaults given.
type Options struct {
	// Username and Password authenticate every new connection (AUTH, or
	// HELLO 3 AUTH); no password: no AUTH. Username "" is Redis's
	// "default" user.
	Username, Password string
	// TLS, if set, makes connections TLS clients with this configuration.
	TLS *tls.Config
	// Dial, if set, replaces the TCP (and TLS) dialer; tests use it.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// DialTimeout bounds connecting, TLS handshake and AUTH. Default 1s.
	DialTimeout time.Duration
	// Timeout bounds one request: waiting for a free connection, and
	// writing the request and reading its reply. Default 2s. A caller's
	// context deadline, if sooner, wins.
	Timeout time.Duration
	// MaxConns bounds a node's connections per protocol version, idle
	// and busy; a request that finds all busy waits for one (within its
	// context). Default 32.
	MaxConns int
	// IdleTimeout: an idle connection older than this is closed rather
	// than reused (the peer may have dropped it). Default 60s.
	IdleTimeout time.Duration
	// MaxReplyBytes bounds one reply. Default 64 MiB.
	MaxReplyBytes int
	// Init are commands sent on every new connection after AUTH and
	// HELLO; each must succeed. rlserver sends PeerCommand, so that the
	// peer never forwards a forwarded command again.
	Init [][]string
}

// PeerCommand marks a connection as coming from another node of the
// cluster: the node answers MOVED rather than forward a command for a
// slot it does not own, so that two nodes with different maps cannot
// bounce a command between them.
var PeerCommand = []string{"RL.CLUSTER", "PEER"}

func (o *Options) setDefaults() {
	if o.DialTimeout <= 0 {
		o.DialTimeout = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 32
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	if o.MaxReplyBytes <= 0 {
		o.MaxReplyBytes = 64 << 20
	}
}

// Errors of Do, tested with errors.Is on the *Error it returns.
var (
	// ErrUnreachable: the request was not sent (the node could not be
	// dialled, refused the handshake, or no connection came free in
	// time). It surely did not run, so retrying it elsewhere is safe.
	ErrUnreachable = errors.New("node unreachable")
	// ErrNoReply: the request was sent but no whole reply came back (a
	// timeout, the connection broke, a malformed reply). It may have run.
	ErrNoReply = errors.New("no reply from node")
	// ErrAuth: the node refused the handshake (wrong password, HELLO
	// refused, an Init command failed). Wrapped with ErrUnreachable.
	ErrAuth = errors.New("handshake refused")
	// ErrClosed: the pool is closed. Wrapped with ErrUnreachable.
	ErrClosed = errors.New("forwarding pool closed")
)

// Error is Do's failure: which node, at which step, and why.
type Error struct {
	Addr string
	Op   string // "connect" (dial, TLS, AUTH), "wait" (for a free connection), "request"
	Sent bool   // the request may have reached the node
	Err  error
}

// Error describes the failure.
func (e *Error) Error() string {
	return fmt.Sprintf("forward to %s: %s: %v", e.Addr, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnreachable) true when the request was not
// sent and errors.Is(err, ErrNoReply) true when it was.
func (e *Error) Is(target error) bool {
	return (target == ErrUnreachable && !e.Sent) || (target == ErrNoReply && e.Sent)
}

// Stats counts a Pool's work since it was made.
type Stats struct {
	Requests uint64 // Do calls that returned a reply
	Dials    uint64 // connections opened (and handshaken)
	Retries  uint64 // requests re-sent on a new connection after a stale one failed
	Failures uint64 // Do calls that returned an error
}

// Pool relays commands to nodes. Safe for concurrent use; it starts no
// goroutine, so there is nothing to stop but its connections (Close).
type Pool struct {
	opt    Options
	mu     sync.Mutex
	nodes  map[nodeKey]*nodePool
	closed bool
	stats  struct{ requests, dials, retries, failures atomic.Uint64 }
}

type nodeKey struct {
	addr  string
	proto int
}

// nodePool holds one node's connections for one protocol version.
type nodePool struct {
	// tokens has one element per connection open or being opened; its
	// capacity is MaxConns.
	tokens chan struct{}
	mu     sync.Mutex
	idle   []*conn // most recently used last
	closed bool    // dropped by Prune or Close: connections returned are closed
}

type conn struct {
	nc       net.Conn
	r        *bufio.Reader
	w        []byte // the request being written, reused
	lastUsed time.Time
}

// New returns a pool with opt's settings.
func New(opt Options) *Pool {
	opt.setDefaults()
	return &Pool{opt: opt, nodes: map[nodeKey]*nodePool{}}
}

// Do sends the command args to the node at addr (host:port) over a
// connection speaking protocol proto (2 or 3), and appends the node's
// reply, as raw RESP, to dst. An error reply from the node (-MOVED, -ERR
// ...) is a reply, not an error. Errors are *Error: ErrUnreachable when
// the command was not sent, ErrNoReply when it was and no reply came.
//
// A request is re-sent once, on a new connection, only if it was written
// to an idle connection that turned out closed by the peer before it
// answered (EOF or reset with nothing read): the usual fate of a pooled
// connection to a node that restarted; the node's other idle connections
// are then dropped too. A timeout is never retried.
func (p *Pool) Do(ctx context.Context, addr string, proto int, args [][]byte, dst []byte) ([]byte, error) {
	if proto != 3 {
		proto = 2
	}
	np, err := p.node(addr, proto)
	if err != nil {
		return dst, p.fail(&Error{Addr: addr, Op: "wait", Err: err})
	}
	if err := np.acquire(ctx, p.opt.Timeout); err != nil {
		return dst, p.fail(&Error{Addr: addr, Op: "wait", Err: err})
	}
	defer np.release()
	for attempt := 0; ; attempt++ {
		var c *conn
		if attempt == 0 {
			c = np.takeIdle(time.Now(), p.opt.IdleTimeout)
		}
		reused := c != nil
		if c == nil {
			if c, err = p.connect(ctx, addr, proto); err != nil {
				return dst, p.fail(&Error{Addr: addr, Op: "connect", Err: err})
			}
		}
		out, sent, err := p.roundTrip(ctx, c, args, dst)
		if err == nil {
			c.lastUsed = time.Now()
			np.putIdle(c)
			p.stats.requests.Add(1)
			return out, nil
		}
		c.nc.Close()
		if reused && len(out) == len(dst) && staleConn(err) {
			// The peer closed the connection while it was idle, most
			// likely by restarting, which closed the other idle ones
			// too: drop them, and re-send on a new connection.
			np.dropIdle()
			p.stats.retries.Add(1)
			continue
		}
		return dst, p.fail(&Error{Addr: addr, Op: "request", Sent: sent, Err: err})
	}
}

func (p *Pool) fail(e *Error) error {
	p.stats.failures.Add(1)
	return e
}

// staleConn reports whether err is how a connection the peer had already
// closed fails: EOF before any reply byte, a reset, or a broken pipe.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE)
}

// node returns the pool for addr and proto, making it on first use.
func (p *Pool) node(addr string, proto int) (*nodePool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	k := nodeKey{addr, proto}
	np := p.nodes[k]
	if np == nil {
		np = &nodePool{tokens: make(chan struct{}, p.opt.MaxConns)}
		p.nodes[k] = np
	}
	return np, nil
}

// acquire waits for a connection token, within ctx and at most wait.
func (np *nodePool) acquire(ctx context.Context, wait time.Duration) error {
	select {
	case np.tokens <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case np.tokens <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("every connection busy: %w", ctx.Err())
	case <-t.C:
		return fmt.Errorf("every connection busy for %v", wait)
	}
}

func (np *nodePool) release() { <-np.tokens }

// takeIdle returns the most recently used idle connection, closing the
// ones idle longer than maxIdle, or nil.
func (np *nodePool) takeIdle(now time.Time, maxIdle time.Duration) *conn {
	np.mu.Lock()
	defer np.mu.Unlock()
	for n := len(np.idle); n > 0; n = len(np.idle) {
		c := np.idle[n-1]
		np.idle = np.idle[:n-1]
		if now.Sub(c.lastUsed) <= maxIdle {
			return c
		}
		c.nc.Close()
	}
	return nil
}

// putIdle keeps c for the next request, or closes it if the pool was
// dropped. The token count bounds idle plus busy connections, so idle
// never exceeds MaxConns.
func (np *nodePool) putIdle(c *conn) {
	np.mu.Lock()
	defer np.mu.Unlock()
	if np.closed {
		c.nc.Close()
		return
	}
	np.idle = append(np.idle, c)
}

// dropIdle closes the idle connections.
func (np *nodePool) dropIdle() {
	np.mu.Lock()
	defer np.mu.Unlock()
	for _, c := range np.idle {
		c.nc.Close()
	}
	np.idle = nil
}

// closeIdle closes the idle connections and marks np closed, so that
// connections in use are closed when returned.
func (np *nodePool) closeIdle() {
	np.dropIdle()
	np.mu.Lock()
	np.closed = true
	np.mu.Unlock()
}

// connect dials addr and performs the handshake: HELLO 3 (with AUTH) for
// protocol 3, AUTH for protocol 2 with a password, then Options.Init.
func (p *Pool) connect(ctx context.Context, addr string, proto int) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opt.DialTimeout)
	defer cancel()
	nc, err := p.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, r: bufio.NewReaderSize(nc, 16<<10)}
	var hs [][]string
	user := p.opt.Username
	if user == "" {
		user = "default"
	}
	switch {
	case proto == 3 && p.opt.Password != "":
		hs = append(hs, []string{"HELLO", "3", "AUTH", user, p.opt.Password})
	case proto == 3:
		hs = append(hs, []string{"HELLO", "3"})
	case p.opt.Password != "":
		hs = append(hs, []string{"AUTH", user, p.opt.Password})
	}
	hs = append(hs, p.opt.Init...)
	if err := p.handshake(ctx, c, hs); err != nil {
		nc.Close()
		return nil, err
	}
	p.stats.dials.Add(1)
	return c, nil
}

func (p *Pool) dial(ctx context.Context, addr string) (net.Conn, error) {
	if p.opt.Dial != nil {
		return p.opt.Dial(ctx, addr)
	}
	if p.opt.TLS != nil {
		d := tls.Dialer{Config: p.opt.TLS}
		return d.DialContext(ctx, "tcp", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// handshake pipelines cmds and checks that no reply is an error. A
// password never appears in the error.
func (p *Pool) handshake(ctx context.Context, c *conn, cmds [][]string) error {
	if len(cmds) == 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetDeadline(dl)
	}
	for _, cmd := range cmds {
		c.w = appendCommandStrings(c.w, cmd)
	}
	if _, err := c.nc.Write(c.w); err != nil {
		return err
	}
	var reply []byte
	for _, cmd := range cmds {
		var err error
		if reply, err = ReadReply(c.r, reply[:0], p.opt.MaxReplyBytes); err != nil {
			return err
		}
		if reply[0] == '-' {
			return fmt.Errorf("%w: %s: %s", ErrAuth, cmd[0], clip(reply[1:len(reply)-2]))
		}
	}
	c.w = c.w[:0]
	return c.nc.SetDeadline(time.Time{})
}

// roundTrip writes args and reads one reply into dst. sent reports
// whether any byte of the request may have reached the peer.
func (p *Pool) roundTrip(ctx context.Context, c *conn, args [][]byte, dst []byte) (out []byte, sent bool, err error) {
	deadline := time.Now().Add(p.opt.Timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return dst, false, err
	}
	c.w = appendCommand(c.w[:0], args)
	n, err := c.nc.Write(c.w)
	if err != nil {
		return dst, n > 0, err
	}
	out, err = ReadReply(c.r, dst, p.opt.MaxReplyBytes)
	return out, true, err
}

// appendCommand encodes args as a RESP array of bulk strings.
func appendCommand(b []byte, args [][]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

func appendCommandStrings(b []byte, args []string) []byte {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	return appendCommand(b, bs)
}

// Prune closes the connections of nodes whose address keep rejects (nodes
// gone from the map); requests in flight to them finish and their
// connections are then closed.
func (p *Pool) Prune(keep func(addr string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, np := range p.nodes {
		if !keep(k.addr) {
			np.closeIdle()
			delete(p.nodes, k)
		}
	}
}

// Close closes every idle connection and refuses further requests;
// requests in flight finish, and their connections are then closed. Safe
// to call twice.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for k, np := range p.nodes {
		np.closeIdle()
		delete(p.nodes, k)
	}
	return nil
}

// Stats returns the pool's counters.
func (p *Pool) Stats() Stats {
	return Stats{
		Requests: p.stats.requests.Load(),
		Dials:    p.stats.dials.Load(),
		Retries:  p.stats.retries.Load(),
		Failures: p.stats.failures.Load(),
	}
}
