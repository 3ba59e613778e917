// Package server accepts connections and serves them: it reads requests with
// the RESP codec (internal/resp), hands each connection's pipeline to a
// Handler (the command table, internal/commands), and writes the replies,
// enforcing every per-connection limit and deadline on the way.
//
// On Linux, plain-TCP connections are served by event loops (loop_linux.go):
// each loop reads every ready connection once, executes what arrived, runs
// the work of all of them as one batch (one message per shard), and writes
// each connection's replies. TLS connections, and every connection when
// Config.EventLoops is 0 or the platform has no epoll, get a goroutine each
// (serve.go), which does the same for its one connection. A loop hands a
// pipeline that may run long (a script: LongRunner) to a goroutine of its
// own, so that it never holds up the loop's other connections (handoff_linux.go).
// Both models follow
// one state machine (conn.go): what a read's error means, when replies are
// sent or the connection cut, which deadline applies, what buffers are
// kept. Either way a pipeline — every command already received when the
// connection reads — is handled as a unit, and its replies are written in
// the order the commands came, with one write.
package server

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/internal/resp"
)

// Handler runs the commands of the connections a Server serves: the Redis
// command table (internal/commands). It is the only way a Server reaches
// the rest of rlserver.
type Handler interface {
	// NewBatch returns where the work of connections served by one
	// goroutine (an event loop's, or a connection's own) gathers until
	// Flush, so the keyspace receives it as one message per shard.
	NewBatch() Batch
	// NewSession returns the command state of a new connection c whose
	// work gathers in b.
	NewSession(c *Conn, b Batch) Session
}

// Batch gathers the work of one goroutine's connections. It belongs to that
// goroutine.
type Batch interface {
	// Flush runs the work gathered and writes every reply it waited for
	// to its connection's Out.
	Flush()
}

// Session is one connection's command state.
type Session interface {
	// Execute runs a pipeline of commands, writing their replies to the
	// connection's Out in order (replies that wait for the Batch are
	// written by its Flush, which the server calls before it writes).
	// It stops early once the connection is Stopped.
	Execute(cmds [][][]byte)
	// Multi returns the commands queued in a transaction and the bytes
	// they hold, for CLIENT LIST; queued is -1 outside MULTI.
	Multi() (queued, bytes int)
	// Shrink drops reusable buffers a big command grew, once its replies
	// are written.
	Shrink()
}

// Config configures a Server.
type Config struct {
	// Addr is the TCP address to listen on, e.g. "127.0.0.1:6380"; port 0
	// picks a free port (see Server.Addr).
	Addr string
	// TLS, when set, makes the server speak RESP over TLS only.
	TLS *tls.Config
	// Handler runs the connections' commands.
	Handler Handler
	// Clock returns the current instant in ns since the Unix epoch, for
	// CLIENT LIST's ages.
	Clock func() int64
	// Logger receives connection-level events; nil means slog.Default().
	// Keys are never logged above debug level.
	Logger *slog.Logger
	// Password, when set, must be given with AUTH (or HELLO ... AUTH)
	// before any other command.
	Password string
	// MaxClients bounds open connections; 0 means 10000.
	MaxClients int
	// IdleTimeout closes connections idle this long; 0 never does.
	IdleTimeout time.Duration
	// Limits bound each client; the zero value means resp.DefaultLimits.
	Limits resp.Limits
	// EventLoops, when > 0, serves plain-TCP connections from that many
	// event loops (Linux only: epoll), each batching the work of every
	// connection it finds ready; 0 gives each connection a goroutine. TLS
	// connections always get a goroutine. See loop_linux.go.
	EventLoops int
}

// Server serves the RESP protocol. Start it with Start and stop it with
// Shutdown; both are safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	limits   resp.Limits
	passHash [32]byte
	started  time.Time // New's instant, with its monotonic reading: the base of mono

	ln          net.Listener
	serveDone   chan struct{} // closed when the accept loop returns
	wakersDone  chan struct{} // closed once the accept loop wakes the event loops for the last time
	conns       sync.WaitGroup
	stopOnce    sync.Once
	releaseOnce sync.Once // the event loops' descriptors are closed once
	draining    atomic.Bool
	cut         atomic.Bool    // Shutdown's deadline passed: close everything now
	loops       []*eventLoop   // nil when each connection has a goroutine
	lnFile      *os.File       // the event loops' duplicate of the listening socket
	loopsDone   sync.WaitGroup // the event loops' goroutines
	handoffs    sync.WaitGroup // goroutines running an event loop connection's long pipeline (handoff.go)

	mu      sync.Mutex         // guards open and refused
	open    map[*Conn]struct{} // connections, to wake them at shutdown
	refused refusals

	nextClientID       atomic.Uint64
	connected          atomic.Int64
	totalConns         atomic.Uint64
	totalCommands      atomic.Uint64
	rejectedConns      atomic.Uint64
	authFailures       atomic.Uint64
	authFailuresByAddr authFailureCounts
	limitHits          atomic.Uint64 // clients cut for breaking a protocol or output limit
	handshakeTimeouts  atomic.Uint64 // connections closed by Limits.HandshakeTimeout
	handlerPanics      atomic.Uint64
}

// refusals rate-limits the log line about refused connections: one line per
// burst, at most one a second.
type refusals struct {
	last  time.Time
	count int
}

// New returns a Server for cfg. It does not listen yet.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxClients == 0 {
		cfg.MaxClients = 10000
	}
	s := &Server{cfg: cfg, log: cfg.Logger, limits: cfg.Limits, serveDone: make(chan struct{}), wakersDone: make(chan struct{}),
		open: map[*Conn]struct{}{}, started: time.Now()}
	if s.limits == (resp.Limits{}) {
		s.limits = resp.DefaultLimits
	}
	s.passHash = sha256.Sum256([]byte(cfg.Password))
	return s
}

// Start listens on cfg.Addr and serves in the background until Shutdown.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.ln = ln
	if s.cfg.EventLoops > 0 && s.cfg.TLS == nil {
		started, err := s.startLoops(s.cfg.EventLoops)
		if err != nil {
			ln.Close()
			return fmt.Errorf("start event loops: %w", err)
		}
		if started {
			go s.acceptToLoops()
			return nil
		}
		s.log.Info("event loops need Linux; serving each connection from its own goroutine")
	}
	go s.acceptLoop()
	return nil
}

// Addr returns the address the server listens on (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// full reports, and counts and logs, a connection refused at MaxClients.
func (s *Server) full() bool {
	if s.connected.Load() < int64(s.cfg.MaxClients) {
		return false
	}
	s.rejectedConns.Add(1)
	s.logRefusal()
	return true
}

// opened counts a new connection; closed undoes it.
func (s *Server) opened(c *Conn) {
	s.conns.Add(1)
	s.connected.Add(1)
	s.totalConns.Add(1)
	s.mu.Lock()
	s.open[c] = struct{}{}
	s.mu.Unlock()
}

func (s *Server) closed(c *Conn) {
	s.mu.Lock()
	delete(s.open, c)
	s.mu.Unlock()
	s.connected.Add(-1)
	s.conns.Done()
}

// Shutdown drains the server: it stops accepting connections, lets every
// connection finish the commands it is running (their replies are sent),
// closes it, and returns when all are closed. If ctx ends first, the
// remaining connections are cut and the context's error is returned. Safe
// to call twice.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.ln == nil {
		return nil
	}
	s.stopOnce.Do(func() {
		// The listening socket is closed before anyone can see draining
		// (an event loop may close an idle connection as soon as it
		// does): once Draining reports true, no connection is accepted.
		// The accept goroutines stop on the closed listener.
		s.ln.Close()
		if s.lnFile != nil {
			s.lnFile.Close()
		}
		s.draining.Store(true)
		s.mu.Lock()
		for c := range s.open {
			// Wake connections blocked reading: their read fails and they
			// close (serve checks draining after setting its own read
			// deadline, so this wake-up cannot be overwritten unseen).
			// Ones running commands finish them, reply, then close.
			if c.nc != nil {
				c.nc.SetReadDeadline(time.Unix(1, 0))
			}
		}
		s.mu.Unlock()
		// Event loops finish their round, then close their connections
		// once each has taken its replies.
		for _, l := range s.loops {
			l.wake()
		}
	})
	done := make(chan struct{})
	go func() {
		s.conns.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.cut.Store(true)
		s.mu.Lock()
		for c := range s.open {
			c.killed.Store(true)
			if c.nc != nil {
				c.nc.Close()
			}
		}
		s.mu.Unlock()
		for _, l := range s.loops {
			l.wake()
		}
		<-done
		err = errors.Join(errors.New("shutdown: in-flight commands did not finish in time; connections were cut"), ctx.Err())
	}
	<-s.serveDone
	s.loopsDone.Wait()
	if s.loops != nil {
		<-s.wakersDone
		s.handoffs.Wait() // each wakes its loop as its last act
	}
	// Only now, with every loop and the accept goroutine gone, can no
	// one wake a loop any more: its descriptors may be closed without a
	// wake-up landing on a reused descriptor number. Once: a second
	// Shutdown returning later must not close numbers reused since.
	s.releaseOnce.Do(func() {
		for _, l := range s.loops {
			l.release()
		}
	})
	return err
}

// mono returns the server's monotonic clock: ns since New. Deadlines and
// idle times are measured on it, never on Config.Clock, which tests freeze
// and which may jump.
func (s *Server) mono() int64 { return int64(time.Since(s.started)) }

// at converts an instant on the monotonic clock to a time for a deadline;
// 0 is no deadline.
func (s *Server) at(mono int64) time.Time {
	if mono == 0 {
		return time.Time{}
	}
	return s.started.Add(time.Duration(mono))
}

// HandlerPanicked logs and counts a panic recovered from a command handler
// (the Handler calls it, then answers the command with an error and Quits
// the connection).
// The log names the command and the client, and holds the stack; never the
// command's arguments, which may hold secrets, so a panic value other than
// a runtime error (whose text is the runtime's own) is logged by type only.
func (s *Server) HandlerPanicked(name, addr string, r any) {
	s.handlerPanics.Add(1)
	what := fmt.Sprintf("value of type %T", r)
	if re, ok := r.(runtime.Error); ok {
		what = re.Error()
	}
	s.log.Error("command handler panicked; closing the connection", "command", name, "addr", addr,
		"panic", what, "stack", string(debug.Stack()))
}

// logRefusal logs refused connections once per burst, at most once a second.
func (s *Server) logRefusal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused.count++
	if now := time.Now(); now.Sub(s.refused.last) >= time.Second {
		s.log.Warn("refusing connections: max number of clients reached", "refused", s.refused.count, "maxclients", s.cfg.MaxClients)
		s.refused.last, s.refused.count = now, 0
	}
}

// EventLoops returns how many event loops serve connections; 0 when each
// connection has a goroutine.
func (s *Server) EventLoops() int { return len(s.loops) }

// Connected returns the number of open connections.
func (s *Server) Connected() int64 { return s.connected.Load() }

// Rejected returns the connections refused at --maxclients since start.
func (s *Server) Rejected() uint64 { return s.rejectedConns.Load() }

// HandlerPanics returns how many command handlers panicked since start;
// each closed its connection and the server kept serving.
func (s *Server) HandlerPanics() uint64 { return s.handlerPanics.Load() }

// HandshakeTimeouts returns the connections closed since start for not
// finishing the TLS handshake or AUTH within Limits.HandshakeTimeout.
func (s *Server) HandshakeTimeouts() uint64 { return s.handshakeTimeouts.Load() }

// LimitDisconnects returns the connections closed since start for breaking
// a protocol limit, the output-buffer limit or the output timeout.
func (s *Server) LimitDisconnects() uint64 { return s.limitHits.Load() }

// Draining reports whether Shutdown has begun.
func (s *Server) Draining() bool { return s.draining.Load() }

// TotalConnections returns the connections accepted since start.
func (s *Server) TotalConnections() uint64 { return s.totalConns.Load() }

// TotalCommands returns the commands read since start.
func (s *Server) TotalCommands() uint64 { return s.totalCommands.Load() }

// Started returns when the server was created.
func (s *Server) Started() time.Time { return s.started }

// Limits returns the per-connection limits in force.
func (s *Server) Limits() resp.Limits { return s.limits }
