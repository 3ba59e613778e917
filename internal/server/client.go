package server

import (
	"io"
	"net"
	"sync/atomic"

	"github.com/rlserver/rlserver/internal/resp"
)

// Conn is one connection's state. It belongs to the goroutine that serves
// the connection (its own, or its event loop's): nothing else writes it,
// and nothing else reads it except killed and pub (made for that: how CLIENT
// KILL, CLIENT LIST and Shutdown reach a connection they do not own) and the
// fields set before the connection is registered with the server (srv, nc,
// loop, id, addr, laddr, fd, created, accepted), which never change.
//
// The commands the connection runs see it through its exported methods;
// their own per-connection state (a transaction's queue, say) is the
// Session's.
type Conn struct {
	srv      *Server
	nc       net.Conn     // nil when an event loop serves the connection
	loop     *eventLoop   // the event loop serving it, nil otherwise
	conn     *loopConn    // the event loop's state for it, nil otherwise
	rd       *resp.Reader // its requests
	id       uint64       // CLIENT ID: unique, ascending in accept order
	addr     string       // remote
	laddr    string       // local
	fd       int          // the socket's descriptor, for CLIENT LIST; -1 if unknown
	created  int64        // ns since the epoch, on the server's Clock (CLIENT LIST age)
	accepted int64        // ns on the server's monotonic clock (Server.mono)
	lastRead int64        // ns on the monotonic clock: when input last arrived
	name     string       // CLIENT SETNAME
	libName  string       // CLIENT SETINFO LIB-NAME
	libVer   string       // CLIENT SETINFO LIB-VER
	lastCmd  string       // the last command's name, for CLIENT LIST
	quit     bool         // close after this pipeline's replies are written
	authed   bool         // AUTH succeeded, or no password is required
	authFail int          // failed AUTH attempts on this connection
	killed   atomic.Bool  // CLIENT KILL: close now (set by any goroutine)
	pub      publication  // what CLIENT LIST shows of it to other connections

	out     resp.Writer
	batch   Batch      // where its work waits to be run with other connections'
	session Session    // its commands' own state
	long    LongRunner // session, if some of its commands may run long; else nil
}

// newConn returns the state of a connection from remote address addr to
// local address laddr, reading its requests from src, whose work waits in
// b.
func (s *Server) newConn(addr, laddr string, src io.Reader, b Batch) *Conn {
	now := s.mono()
	c := &Conn{
		srv:      s,
		id:       s.nextClientID.Add(1),
		addr:     addr,
		laddr:    laddr,
		fd:       -1,
		created:  s.cfg.Clock(),
		accepted: now,
		lastRead: now,
		rd:       resp.NewReader(src, &s.limits),
		out:      resp.NewWriter(int(s.limits.OutputLimit)),
		batch:    b,
	}
	c.setAuthed(s.cfg.Password == "")
	c.session = s.cfg.Handler.NewSession(c, b)
	c.long, _ = c.session.(LongRunner)
	return c
}

// setAuthed records whether the connection is authenticated; until it is,
// its requests are read under the unauthenticated limits. A success also
// restarts the count of failed attempts (authFailed).
func (c *Conn) setAuthed(ok bool) {
	c.authed = ok
	c.rd.SetPreAuth(!ok)
	if ok {
		c.authFail = 0
	}
}

// Out is where the connection's replies are built, in the order its
// commands came.
func (c *Conn) Out() *resp.Writer { return &c.out }

// ID is CLIENT ID: unique, ascending in accept order.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr and LocalAddr are the connection's two ends, as ip:port.
func (c *Conn) RemoteAddr() string { return c.addr }

// LocalAddr is the address the client connected to.
func (c *Conn) LocalAddr() string { return c.laddr }

// Quit closes the connection once the replies built so far are written
// (QUIT, or a handler that panicked); the commands after it are dropped.
func (c *Conn) Quit() { c.quit = true }

// Stopped reports whether the connection's remaining commands are to be
// dropped: it quit, or its replies crossed the output limit.
func (c *Conn) Stopped() bool { return c.quit || c.out.Over() }

// Name returns the name CLIENT SETNAME gave the connection.
func (c *Conn) Name() string { return c.name }

// SetName names the connection (CLIENT SETNAME, HELLO SETNAME).
func (c *Conn) SetName(name string) { c.name = name }

// SetLibName and SetLibVersion record CLIENT SETINFO's attributes.
func (c *Conn) SetLibName(v string) { c.libName = v }

// SetLibVersion records CLIENT SETINFO LIB-VER.
func (c *Conn) SetLibVersion(v string) { c.libVer = v }

// SetLastCommand records the command being run, for CLIENT LIST's cmd.
func (c *Conn) SetLastCommand(name string) { c.lastCmd = name }

// Server returns the server the connection belongs to.
func (c *Conn) Server() *Server { return c.srv }
