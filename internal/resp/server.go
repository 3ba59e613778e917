// Package resp is rlserver's protocol layer: the command table, argument
// parsing, RESP2/RESP3 replies and per-connection state, on top of
// tidwall/redcon's connection handling.
//
// One goroutine serves each connection (redcon's model). A pipeline — every
// command that arrived in one read — is handled as a unit: shard operations
// are grouped per shard and sent as one message each, other commands run in
// place, and the replies are written in the order the commands came, then
// flushed once.
package resp

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/redcon"

	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/shards"
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
	Shards *shards.Map
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

	rc        *redcon.Server
	ln        *guardListener
	serveDone chan struct{} // closed when redcon's accept loop returns
	conns     sync.WaitGroup
	stopOnce  sync.Once
	draining  atomic.Bool

	mu      sync.Mutex               // guards open
	open    map[redcon.Conn]struct{} // connections, to wake them at shutdown
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
		open: map[redcon.Conn]struct{}{}}
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
	s.ln = &guardListener{Listener: ln, srv: s, stopped: make(chan struct{})}
	s.started = time.Now()
	s.rc = redcon.NewServerNetwork("tcp", ln.Addr().String(), s.serveRESP, s.accept, s.closed)
	s.rc.AcceptError = func(err error) { s.log.Warn("accept failed", "err", err) }
	if s.cfg.IdleTimeout > 0 {
		s.rc.SetIdleClose(s.cfg.IdleTimeout)
	}
	go func() {
		defer close(s.serveDone)
		if err := s.rc.Serve(s.ln); err != nil {
			s.log.Error("serve stopped", "err", err)
		}
	}()
	return nil
}

// Addr returns the address the server listens on (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown drains the server: it stops accepting connections, lets every
// connection finish the commands it is running (their replies are sent),
// closes it, and returns when all are closed. If ctx ends first, the
// remaining connections are cut and the context's error is returned. Safe
// to call twice.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.rc == nil {
		return nil
	}
	s.stopOnce.Do(func() {
		s.draining.Store(true)
		s.ln.Listener.Close() // no new connections; Accept now waits for releaseAccept
		s.mu.Lock()
		for rc := range s.open {
			// Wake connections blocked reading: their next read fails.
			// Ones running commands finish them, reply, then close.
			rc.NetConn().SetReadDeadline(time.Now())
		}
		s.mu.Unlock()
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
		s.mu.Lock()
		for rc := range s.open {
			rc.NetConn().Close()
		}
		s.mu.Unlock()
		<-done
		err = errors.Join(errors.New("shutdown: in-flight commands did not finish in time; connections were cut"), ctx.Err())
	}
	s.ln.releaseAccept()
	<-s.serveDone
	return err
}

// accept runs in redcon's accept loop for every new connection.
func (s *Server) accept(rc redcon.Conn) bool {
	if s.connected.Load() >= int64(s.cfg.MaxClients) {
		s.rejectedConns.Add(1)
		nc := rc.NetConn()
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		nc.Write([]byte("-ERR max number of clients reached\r\n"))
		s.logRefusal()
		return false
	}
	s.conns.Add(1)
	s.connected.Add(1)
	s.totalConns.Add(1)
	rc.SetContext(s.newClient(rc))
	s.mu.Lock()
	s.open[rc] = struct{}{}
	s.mu.Unlock()
	return true
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

// closed runs when a connection's goroutine ends.
func (s *Server) closed(rc redcon.Conn, err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, errDraining) {
		s.log.Debug("connection closed", "addr", rc.RemoteAddr(), "err", err)
	}
	s.mu.Lock()
	delete(s.open, rc)
	s.mu.Unlock()
	s.connected.Add(-1)
	s.conns.Done()
}

// serveRESP handles the first command of a pipeline and, through
// ReadPipeline, the rest of it.
func (s *Server) serveRESP(rc redcon.Conn, first redcon.Command) {
	c := rc.Context().(*client)
	cmds := append(c.pipeline[:0], first)
	cmds = append(cmds, rc.ReadPipeline()...)
	s.totalCommands.Add(uint64(len(cmds)))
	c.execute(cmds)
	clear(cmds) // drop references to the commands' buffers
	c.pipeline = cmds[:0]
	if len(c.out.b) > int(s.limits.OutputLimit) {
		// The replies alone would exceed the client's output limit.
		s.limitHits.Add(1)
		s.log.Warn("disconnecting client over --client-output-buffer-limit", "addr", c.addr, "bytes", len(c.out.b))
		c.out.b = nil
		rc.Close()
		return
	}
	rc.WriteRaw(c.out.b)
	if cap(c.out.b) > 1<<20 {
		c.out.b = nil // do not keep a large buffer for an idle connection
	}
	c.out.reset()
	if c.quit || s.draining.Load() {
		rc.Close()
	}
}

// Connected returns the number of open connections.
func (s *Server) Connected() int64 { return s.connected.Load() }

// Rejected returns the connections refused at --maxclients since start.
func (s *Server) Rejected() uint64 { return s.rejectedConns.Load() }

// Draining reports whether Shutdown has begun.
func (s *Server) Draining() bool { return s.draining.Load() }
