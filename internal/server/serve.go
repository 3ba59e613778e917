package server

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"time"
)

// The goroutine-per-connection model: TLS connections, and every connection
// when Config.EventLoops is 0 or there is no epoll. Each connection's
// goroutine blocks in Read and Write; the rules it follows are conn.go's,
// with deadlines on the net.Conn standing for the event loop's sweep.

// acceptLoop accepts connections and starts a goroutine for each.
func (s *Server) acceptLoop() {
	defer close(s.serveDone)
	var backoff acceptBackoff
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.draining.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			backoff.failed(s, err)
			continue
		}
		backoff.succeeded()
		if !s.admit() {
			nc.SetWriteDeadline(time.Now().Add(time.Second))
			nc.Write(errMaxClients)
			nc.Close()
			continue
		}
		c := s.newConn(nc.RemoteAddr().String(), nc.LocalAddr().String(), nc, s.cfg.Handler.NewBatch())
		c.nc = nc
		c.fd = connFD(nc)
		s.opened(c)
		go s.serve(c)
	}
}

// connFD returns the descriptor of a TCP (or TLS over TCP) connection, for
// CLIENT LIST; -1 if it has none.
func connFD(nc net.Conn) int {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	tcp, ok := nc.(*net.TCPConn)
	if !ok {
		return -1
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	raw.Control(func(d uintptr) { fd = int(d) })
	return fd
}

// serve is one connection's goroutine: read a pipeline, execute it, write
// its replies, until the client leaves, breaks a limit, is killed, or the
// server drains.
func (s *Server) serve(c *Conn) {
	defer func() {
		// Forgotten before the socket closes: once a client sees its
		// connection closed, CLIENT LIST and Connected no longer count it.
		s.closed(c)
		c.nc.Close()
	}()
	if !c.handshake() {
		return
	}
	readDeadline := int64(0) // what the connection's read deadline is set to
	for {
		at, why := c.readDeadline()
		if at != readDeadline {
			c.nc.SetReadDeadline(s.at(at))
			readDeadline = at
		}
		// Checked after setting the deadline: Shutdown and CLIENT KILL
		// set theirs after setting these flags, so either this sees the
		// flag or their deadline replaces this one and wakes the read.
		if s.draining.Load() || c.killed.Load() {
			return
		}
		cmds, err := c.rd.Next()
		if err != nil && isTimeout(err) {
			if !s.draining.Load() && !c.killed.Load() {
				c.expire(why)
			}
			return
		}
		if !c.ingest(cmds, err, s.mono()) {
			return
		}
		c.batch.Flush()
		if !c.send() {
			return
		}
		if c.wrote() == closeConn {
			return
		}
	}
}

// handshake completes a TLS connection's handshake within
// Limits.HandshakeTimeout of the accept. It reports false if the connection
// is to close.
func (c *Conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	s := c.srv
	if d := s.limits.HandshakeTimeout; d > 0 {
		tc.SetDeadline(s.at(c.accepted + int64(d)))
	}
	if s.draining.Load() || c.killed.Load() {
		return false
	}
	if err := tc.Handshake(); err != nil {
		if isTimeout(err) && !s.draining.Load() && !c.killed.Load() {
			c.expire(expireHandshake)
		} else {
			s.log.Debug("TLS handshake failed", "addr", c.addr, "err", err)
		}
		return false
	}
	tc.SetDeadline(time.Time{})
	return true
}

// send writes the replies built since the last write, unless they are not
// to be sent (sendable). It reports false if the connection is to close.
func (c *Conn) send() bool {
	if !c.sendable() {
		return false
	}
	if c.out.Len() == 0 {
		return true
	}
	if c.out.Len() > largeWrite {
		c.publishWriting()
	}
	if d := c.srv.limits.OutputTimeout; d > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(d))
	}
	if c.killed.Load() { // after the deadline: see serve
		return false
	}
	if _, err := c.nc.Write(c.out.Bytes()); err != nil {
		if isTimeout(err) && !c.killed.Load() {
			c.expire(expireOutput)
		}
		return false
	}
	return true
}

// largeWrite is the reply size, in bytes, above which a write may block
// long enough for CLIENT LIST to show it: the connection publishes that it
// is writing first.
const largeWrite = 64 << 10

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
