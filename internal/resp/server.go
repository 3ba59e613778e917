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
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

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
	// Rules is the rule store the RL.* commands consult and RL.RULE edits.
	Rules *rules.Store
	// RulesSource describes where the rules came from, for INFO: a file
	// path, or "built-in defaults".
	RulesSource string
	// Shards holds the keyspace. The server does not stop it.
	Shards *shards.Map
	// Clock returns the current instant in ns since the Unix epoch; the
	// same clock the shards use, so TIME agrees with decisions.
	Clock func() int64
	// Version is rlserver's version, reported by HELLO and INFO.
	Version string
	// Logger receives connection-level errors; nil means slog.Default().
	Logger *slog.Logger
	// Snapshots takes snapshots for SAVE and BGSAVE; nil when persistence
	// is off.
	Snapshots *snapshot.Manager
	// RequestShutdown asks the program to shut down (SHUTDOWN); it must
	// not block. nil makes SHUTDOWN an error.
	RequestShutdown func(ShutdownMode)
}

// Server serves the RESP protocol. Start it with Start and stop it with
// Shutdown; both are safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	started time.Time

	rc        *redcon.Server
	ln        net.Listener
	serveDone chan struct{} // closed when redcon's accept loop returns
	conns     sync.WaitGroup
	stopOnce  sync.Once

	nextClientID  atomic.Uint64
	connected     atomic.Int64
	totalConns    atomic.Uint64
	totalCommands atomic.Uint64
}

// New returns a Server for cfg. It does not listen yet.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg, log: cfg.Logger, serveDone: make(chan struct{})}
}

// Start listens on cfg.Addr and serves in the background until Shutdown.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	s.started = time.Now()
	s.rc = redcon.NewServerNetwork("tcp", ln.Addr().String(), s.serveRESP, s.accept, s.closed)
	s.rc.AcceptError = func(err error) { s.log.Warn("accept failed", "err", err) }
	go func() {
		defer close(s.serveDone)
		if err := s.rc.Serve(ln); err != nil {
			s.log.Error("serve stopped", "err", err)
		}
	}()
	return nil
}

// Addr returns the address the server listens on (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops accepting connections, closes the open ones and waits for
// every connection goroutine to finish, or for ctx to end. Safe to call
// twice; the second call only waits.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		if s.rc != nil {
			if err := s.rc.Close(); err != nil {
				s.log.Warn("closing listener", "err", err)
			}
		}
	})
	if s.rc == nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		<-s.serveDone
		s.conns.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.Join(errors.New("shutdown: connections still open"), ctx.Err())
	}
}

// accept runs in redcon's accept loop for every new connection.
func (s *Server) accept(rc redcon.Conn) bool {
	s.conns.Add(1)
	s.connected.Add(1)
	s.totalConns.Add(1)
	rc.SetContext(s.newClient(rc))
	return true
}

// closed runs when a connection's goroutine ends.
func (s *Server) closed(rc redcon.Conn, err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("connection closed", "addr", rc.RemoteAddr(), "err", err)
	}
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
	rc.WriteRaw(c.out.b)
	c.out.reset()
	if c.quit {
		rc.Close()
	}
}
