// Package resp is rlserver's protocol layer: connections, request parsing,
// the command table, argument parsing, RESP2/RESP3 replies and
// per-connection state.
//
// On Linux, plain-TCP connections are served by event loops (loop_linux.go):
// each loop reads every ready connection once, executes what arrived, sends
// the shard operations of all of them as one message per shard, and writes
// each connection's replies. TLS connections, and every connection when
// Config.EventLoops is 0 or the platform has no epoll, get a goroutine each,
// which does the same for its one connection. Either way a pipeline — every
// command already received when the connection reads — is handled as a
// unit: other commands run in place, and the replies are written in the
// order the commands came, with one write. Requests are parsed into slices
// of the connection's read buffer (reader.go) and replies encoded into a
// reused buffer, so serving a pipeline of decisions allocates nothing.
//
// The project started on tidwall/redcon, whose per-command allocations (a
// copy of each command, its argument slice, the batch slice) were the
// largest item in the profile under pipelined load; docs/performance.md has
// the figures.
package resp

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/snapshot"
)

// Config configures a Server.
type Config struct {
	// Addr is the TCP address to listen on, e.g. "127.0.0.1:6380"; port 0
	// picks a free port (see Server.Addr).
	Addr string
	// TLS, when set, makes the server speak RESP over TLS only.
	TLS *tls.Config
	// Rules is the rule store the RL.* commands consult and RL.RULE edits.
	Rules *rules.Store
	// RulesSource describes where the rules came from, for INFO: a file
	// path, or "built-in defaults".
	RulesSource string
	// ReloadRules re-reads the rules file (RL.RULE RELOAD); nil when there
	// is no file.
	ReloadRules func() error
	// Shards holds the keyspace. The server does not stop it.
	Shards *keyspace.Map
	// Clock returns the current instant in ns since the Unix epoch; the
	// same clock the shards use, so TIME agrees with decisions.
	Clock func() int64
	// Version is rlserver's version, reported by HELLO and INFO.
	Version string
	// Logger receives connection-level events; nil means slog.Default().
	// Keys are never logged above debug level.
	Logger *slog.Logger
	// Snapshots takes snapshots for SAVE and BGSAVE; nil when persistence
	// is off.
	Snapshots *snapshot.Manager
	// RequestShutdown asks the program to shut down (SHUTDOWN); it must
	// not block. nil makes SHUTDOWN an error.
	RequestShutdown func(ShutdownMode)
	// Password, when set, must be given with AUTH (or HELLO ... AUTH)
	// before any other command.
	Password string
	// MaxClients bounds open connections; 0 means 10000.
	MaxClients int
	// IdleTimeout closes connections idle this long; 0 never does.
	IdleTimeout time.Duration
	// Limits bound each client; the zero value means DefaultLimits.
	Limits Limits
	// CommandDuration, when set, observes each command's duration in
	// seconds, labelled by command name.
	CommandDuration *prometheus.HistogramVec
	// EventLoops, when > 0, serves plain-TCP connections from that many
	// event loops (Linux only: epoll), each batching the shard operations of
	// every connection it finds ready; 0 gives each connection a goroutine.
	// TLS connections always get a goroutine. See loop_linux.go.
	EventLoops int
}

// Server serves the RESP protocol. Start it with Start and stop it with
// Shutdown; both are safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	limits   Limits
	passHash [32]byte
	started  time.Time
	// observers[i] observes the duration of commands.sorted[i]; nil when
	// metrics are off.
	observers []prometheus.Observer

	ln        net.Listener
	serveDone chan struct{} // closed when the accept loop returns
	conns     sync.WaitGroup
	stopOnce  sync.Once
	draining  atomic.Bool
	cut       atomic.Bool    // Shutdown's deadline passed: close everything now
	loops     []*eventLoop   // nil when each connection has a goroutine
	lnFile    *os.File       // the event loops' duplicate of the listening socket
	loopsDone sync.WaitGroup // the event loops' goroutines

	mu      sync.Mutex           // guards open and refused
	open    map[*client]struct{} // connections, to wake them at shutdown
	refused refusals

	nextClientID  atomic.Uint64
	connected     atomic.Int64
	totalConns    atomic.Uint64
	totalCommands atomic.Uint64
	rejectedConns atomic.Uint64
	authFailures  atomic.Uint64
	limitHits     atomic.Uint64 // clients cut for breaking a protocol limit
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
	s := &Server{cfg: cfg, log: cfg.Logger, limits: cfg.Limits, serveDone: make(chan struct{}),
		open: map[*client]struct{}{}}
	if s.limits == (Limits{}) {
		s.limits = DefaultLimits
	}
	s.passHash = sha256.Sum256([]byte(cfg.Password))
	if cfg.CommandDuration != nil {
		for _, cmd := range commands.sorted {
			s.observers = append(s.observers, cfg.CommandDuration.WithLabelValues(cmd.name))
		}
	}
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
	s.started = time.Now()
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

func (s *Server) acceptLoop() {
	defer close(s.serveDone)
	backoff := 5 * time.Millisecond
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.draining.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, say: log, wait a little, retry.
			s.log.Warn("accept failed", "err", err)
			time.Sleep(backoff) // bounded back-off on a failing accept, not a timing assumption
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if s.full() {
			nc.SetWriteDeadline(time.Now().Add(time.Second))
			nc.Write(errMaxClients)
			nc.Close()
			continue
		}
		c := s.newClient(nc.RemoteAddr().String(), nc.LocalAddr().String(), s.newBatch())
		c.nc = nc
		s.opened(c)
		go s.serve(c)
	}
}

var errMaxClients = []byte("-ERR max number of clients reached\r\n")

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
func (s *Server) opened(c *client) {
	s.conns.Add(1)
	s.connected.Add(1)
	s.totalConns.Add(1)
	s.mu.Lock()
	s.open[c] = struct{}{}
	s.mu.Unlock()
}

func (s *Server) closed(c *client) {
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
		s.draining.Store(true)
		s.ln.Close()
		if s.lnFile != nil {
			s.lnFile.Close()
		}
		s.mu.Lock()
		for c := range s.open {
			// Wake connections blocked reading: their read fails and they
			// close. Ones running commands finish them, reply, then close.
			if c.nc != nil {
				c.nc.SetReadDeadline(time.Now())
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
	return err
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

// serve is one connection's goroutine: read a pipeline, execute it, write
// its replies, until the client leaves, breaks a limit or the server drains.
func (s *Server) serve(c *client) {
	defer func() {
		c.nc.Close()
		s.closed(c)
	}()
	rd := newReader(c.nc, &s.limits)
	for !s.draining.Load() {
		if s.cfg.IdleTimeout > 0 {
			c.nc.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		}
		cmds, err := rd.next()
		if err != nil {
			var pe *protocolError
			if errors.As(err, &pe) {
				s.limitHits.Add(1)
				c.nc.SetWriteDeadline(time.Now().Add(time.Second))
				c.nc.Write([]byte("-ERR " + pe.Error() + "\r\n"))
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !s.draining.Load() {
				s.log.Debug("connection closed", "addr", c.addr, "err", err)
			}
			return
		}
		s.totalCommands.Add(uint64(len(cmds)))
		c.execute(cmds)
		c.batch.flush()
		if c.overOutputLimit() {
			return
		}
		if s.limits.OutputTimeout > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(s.limits.OutputTimeout))
		}
		if _, err := c.nc.Write(c.out.b); err != nil {
			return
		}
		if cap(c.out.b) > 1<<20 {
			c.out.b = nil // do not keep a large buffer for an idle connection
		}
		c.out.reset()
		if c.quit {
			return
		}
	}
}

// overOutputLimit reports, counts and logs a client whose replies to one
// pipeline exceed the output limit; it is then disconnected.
func (c *client) overOutputLimit() bool {
	if len(c.out.b) <= int(c.srv.limits.OutputLimit) {
		return false
	}
	c.srv.limitHits.Add(1)
	c.srv.log.Warn("disconnecting client over --client-output-buffer-limit", "addr", c.addr, "bytes", len(c.out.b))
	return true
}

// EventLoops returns how many event loops serve connections; 0 when each
// connection has a goroutine.
func (s *Server) EventLoops() int { return len(s.loops) }

// Connected returns the number of open connections.
func (s *Server) Connected() int64 { return s.connected.Load() }

// Rejected returns the connections refused at --maxclients since start.
func (s *Server) Rejected() uint64 { return s.rejectedConns.Load() }

// Draining reports whether Shutdown has begun.
func (s *Server) Draining() bool { return s.draining.Load() }
