package server

import (
	"errors"
	"io"
	"net"
	"os"
	"time"

	"github.com/rlserver/rlserver/internal/resp"
)

// One connection, whichever model serves it (a goroutine of its own,
// serve.go, or an event loop, loop_linux.go), goes through the same steps,
// and the rule for each step lives here, once:
//
//	accept ──▶ ingest ──▶ run the batch ──▶ write the replies ──▶ wrote ──┐
//	(admit)    (a read's commands,          (unless over the output       │
//	           or its error)                limit, or killed)             │
//	   ▲                                                                  │
//	   └──────── wait for input (or parse what is buffered: wrote says) ◀─┘
//
// and while it waits, a deadline can pass (readDeadline, writeDeadline,
// then expire), or CLIENT KILL or Shutdown can end it. The models only do
// the I/O and the waiting; neither decides anything this file decides.

// ingest takes what one read produced: a batch of commands, which it
// executes (their shard operations join the batch the caller runs next), or
// an error. A protocol error is answered, and the connection closes once
// the answer is written. It returns false when the connection must close at
// once: the client left or the read failed.
func (c *Conn) ingest(cmds [][][]byte, err error, now int64) bool {
	if err != nil {
		var pe *resp.ProtocolError
		if errors.As(err, &pe) {
			c.srv.limitHits.Add(1)
			c.out.Error("ERR " + pe.Error())
			c.quit = true
			return true
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
			c.srv.log.Debug("connection closed", "addr", c.addr, "err", err)
		}
		return false
	}
	c.lastRead = now
	c.srv.totalCommands.Add(uint64(len(cmds)))
	c.session.Execute(cmds)
	return true
}

// sendable reports whether the replies built since the last write may be
// sent. When not, the connection is closed without writing them: they
// crossed the output limit, or CLIENT KILL or Shutdown's deadline ended it.
func (c *Conn) sendable() bool { return !c.out.Over() && !c.killed.Load() }

// afterWrite is what a connection does once every reply byte is written.
type afterWrite uint8

const (
	awaitInput afterWrite = iota // wait for more input
	parseAgain                   // input is buffered that may answer without a read
	closeConn                    // QUIT, a protocol error, or a handler panic
)

// wrote is called when every reply has been written. It releases what the
// pipeline grew and says what comes next.
func (c *Conn) wrote() afterWrite {
	c.out.Release()
	if c.quit {
		return closeConn
	}
	c.shrink()
	c.publish()
	if c.rd.More() {
		return parseAgain
	}
	return awaitInput
}

// shrink drops reusable buffers a big command grew past resp.KeepBuffer
// (the reader and the reply writer have their own rule for theirs).
func (c *Conn) shrink() { c.session.Shrink() }

// expiry says why a connection's deadline passed.
type expiry uint8

const (
	expireNone      expiry = iota
	expireIdle             // --timeout: no input for that long
	expireHandshake        // no TLS handshake or AUTH within --handshake-timeout
	expireOutput           // --client-output-timeout: replies left unread
)

// readDeadline returns when a connection waiting for input is closed, in
// ns on the server's monotonic clock, and why; 0 when never. The handshake
// deadline runs from the accept until the connection authenticates,
// whatever it sends meanwhile; the idle timeout from the last input.
func (c *Conn) readDeadline() (int64, expiry) {
	var at int64
	why := expireNone
	if d := c.srv.cfg.IdleTimeout; d > 0 {
		at, why = c.lastRead+int64(d), expireIdle
	}
	if d := c.srv.limits.HandshakeTimeout; d > 0 && !c.authed {
		if h := c.accepted + int64(d); at == 0 || h <= at {
			at, why = h, expireHandshake
		}
	}
	return at, why
}

// writeDeadline returns when a connection whose replies have waited for the
// socket since blockedSince (monotonic ns) is closed; 0 when never.
func (c *Conn) writeDeadline(blockedSince int64) int64 {
	if d := c.srv.limits.OutputTimeout; d > 0 {
		return blockedSince + int64(d)
	}
	return 0
}

// expire records that why's deadline passed; the caller closes the
// connection.
func (c *Conn) expire(why expiry) {
	s := c.srv
	switch why {
	case expireOutput:
		s.limitHits.Add(1)
		s.log.Warn("disconnecting client that does not read its replies", "addr", c.addr, "timeout", s.limits.OutputTimeout)
	case expireHandshake:
		s.handshakeTimeouts.Add(1)
		s.log.Debug("closing a connection that did not finish its handshake or AUTH in time", "addr", c.addr, "timeout", s.limits.HandshakeTimeout)
	case expireIdle:
		s.log.Debug("closing idle connection", "addr", c.addr, "timeout", s.cfg.IdleTimeout)
	}
}

// admit decides whether a new connection may be served: it is refused
// (counted, and logged at most once a second) at MaxClients. The caller
// sends errMaxClients and closes a refused one.
func (s *Server) admit() bool { return !s.full() }

var errMaxClients = []byte("-ERR max number of clients reached\r\n")

// acceptBackoff paces retries after a failed accept (out of file
// descriptors, say): 5 ms, doubling up to 1 s, back to 5 ms after a success.
type acceptBackoff struct{ next time.Duration }

func (b *acceptBackoff) failed(s *Server, err error) {
	b.next = min(max(2*b.next, 5*time.Millisecond), time.Second)
	s.log.Warn("accept failed", "err", err, "retry_in", b.next)
	time.Sleep(b.next) // a bounded pause before retrying, not a timing assumption
}

func (b *acceptBackoff) succeeded() { b.next = 0 }
