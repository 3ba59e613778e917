package h2grpc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// conn is one client connection. Its goroutines: serve reads frames (and
// owns the fields marked reader-owned); writeLoop writes what the others
// have encoded into out, one socket write per round; handlers encode their
// responses into out themselves, under mu.
//
// Everything written goes through mu: the Framer's write side, the HPACK
// encoder, out, the send windows and the stream table. Encoding is memory
// work only; the socket write happens outside mu, so responses finished
// while one write is under way go out together in the next.
type conn struct {
	srv    *Server
	opts   *Options
	raw    net.Conn // the accepted connection: close() closes it
	nc     net.Conn // raw, or the TLS connection over it once the handshake is done
	fr     *http2.Framer
	ctx    context.Context // cancelled when the connection closes
	cancel context.CancelFunc
	wake   chan struct{} // cap 1: out has bytes, or the state changed
	done   chan struct{} // closed by close()

	// Reader-owned.
	recvConnWin int64 // bytes the client may still send on the connection
	connUnacked int64 // bytes received and not yet credited back
	resets      int   // client resets (and refused streams) in this interval
	resetsSince time.Time
	pingStrikes int
	lastPing    time.Time

	spare []byte // writer-owned: the buffer being written, then reused

	activity  atomic.Bool // a frame arrived since the keepalive timer looked
	responded atomic.Bool // a response was written since the last client ping

	mu           sync.Mutex
	out          *outBuf // frames encoded, not yet written; the Framer writes here
	hbuf         bytes.Buffer
	henc         *hpack.Encoder
	streams      map[uint32]*stream
	maxStreamID  uint32 // the highest stream the client opened
	active       int    // streams counted against MaxConcurrentStreams
	buffered     int64  // bytes of messages received and not yet taken by a handler
	sendConnWin  int64  // bytes the server may still send on the connection
	peerInitWin  int64  // the client's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame uint32
	blocked      []*stream   // streams with output waiting for a window
	draining     bool        // GOAWAY sent: no new streams; close when idle
	drainPinged  atomic.Bool // drain's first GOAWAY and PING sent; draining follows the ack
	closing      bool        // write what is encoded, then close
	closed       bool
	roomy        *sync.Cond // signalled when out is written or a window opens
	recvd        *sync.Cond // signalled when a streaming call's input changes
}

// outBuf collects encoded frames; it is the Framer's writer.
type outBuf struct{ b []byte }

func (o *outBuf) Write(p []byte) (int, error) {
	o.b = append(o.b, p...)
	return len(p), nil
}

// outLimit is how many bytes of encoded frames may wait for the socket
// before the reader stops reading (a client that does not read its
// answers stops being served, without the server holding more).
const outLimit = 1 << 20

// readBufferBytes is the read buffer of a connection: one read takes
// every frame a client wrote together.
const readBufferBytes = 32 << 10

// batchBytes is the output below which the writer yields once before
// writing, while calls are in flight.
const batchBytes = 16 << 10

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, opts: &s.opts, raw: nc, nc: nc, wake: make(chan struct{}, 1), done: make(chan struct{}),
		out: &outBuf{}, streams: map[uint32]*stream{},
		peerInitWin: initialWindow, sendConnWin: initialWindow, peerMaxFrame: 16384,
		recvConnWin: int64(s.opts.ConnWindowBytes)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.roomy = sync.NewCond(&c.mu)
	c.recvd = sync.NewCond(&c.mu)
	return c
}

// serve runs the connection: handshake, then frames until the connection
// ends. It returns once the connection is closed and its writer gone.
func (c *conn) serve() {
	defer c.srv.removeConn(c)
	writerDone := make(chan struct{})
	defer func() { <-writerDone }()
	defer c.close()
	if err := c.handshake(); err != nil {
		close(writerDone)
		c.logDebug("handshake failed", err)
		return
	}
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	err := c.readLoop()
	c.fail(err)
}

// handshake does TLS (when configured), reads the client's preface, sends
// the server's SETTINGS and reads the client's, within HandshakeTimeout.
func (c *conn) handshake() error {
	c.nc.SetDeadline(time.Now().Add(c.opts.HandshakeTimeout))
	if c.opts.TLS != nil {
		tc := tls.Server(c.nc, c.opts.TLS)
		if err := tc.HandshakeContext(c.ctx); err != nil {
			return err
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" && p != "" {
			return errors.New("h2grpc: the client negotiated " + p + ", not h2")
		}
		c.nc = tc
	}
	// Buffered: the Framer reads a frame's header and its payload
	// separately, two system calls a frame straight from the socket.
	br := bufio.NewReaderSize(c.nc, readBufferBytes)
	var preface [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(br, preface[:]); err != nil {
		return err
	}
	if string(preface[:]) != http2.ClientPreface {
		return errors.New("h2grpc: bad connection preface")
	}
	c.mu.Lock()
	c.fr = http2.NewFramer(c.out, br)
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(16384)
	c.fr.MaxHeaderListSize = c.opts.MaxHeaderListBytes
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.ReadMetaHeaders.SetMaxStringLength(int(c.opts.MaxHeaderListBytes))
	c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.opts.MaxConcurrentStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: c.opts.StreamWindowBytes},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.opts.MaxHeaderListBytes},
	)
	if extra := c.opts.ConnWindowBytes - initialWindow; extra > 0 {
		c.fr.WriteWindowUpdate(0, extra)
	}
	b := c.out.b
	c.out.b = c.spare[:0]
	c.spare = b
	c.mu.Unlock()
	if _, err := c.nc.Write(b); err != nil {
		return err
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return err
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return errors.New("h2grpc: the client's preface is not followed by SETTINGS")
	}
	if err := c.onSettings(sf); err != nil {
		return err
	}
	return c.nc.SetDeadline(time.Time{})
}

// readLoop handles frames until the connection fails or closes. A
// connection error is returned; a stream error resets the stream.
func (c *conn) readLoop() error {
	for {
		c.mu.Lock()
		for len(c.out.b) > outLimit && !c.closed {
			c.roomy.Wait()
		}
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return nil
		}
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				if err := c.refuseStream(se); err != nil {
					return err
				}
				continue
			}
			return err
		}
		c.activity.Store(true)
		if err := c.onFrame(f); err != nil {
			return err
		}
	}
}

// refuseStream resets the stream a frame the Framer refused belongs to
// (a malformed header block, say). A new stream counts as opened, so the
// frames the client still sends on it are ignored rather than taken for
// frames on an idle stream; it is charged as a reset.
func (c *conn) refuseStream(se http2.StreamError) error {
	c.mu.Lock()
	opened := se.StreamID > c.maxStreamID && se.StreamID%2 == 1
	if opened {
		c.maxStreamID = se.StreamID
	}
	c.resetStreamLocked(se.StreamID, se.Code)
	c.mu.Unlock()
	if opened {
		return c.countReset()
	}
	return nil
}

func (c *conn) onFrame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.onHeaders(f)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		return c.onSettings(f)
	case *http2.PingFrame:
		return c.onPing(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		return c.onReset(f)
	case *http2.GoAwayFrame:
		// The client opens no more streams; its own calls finish.
		return nil
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return nil // PRIORITY and unknown frames are ignored, as RFC 9113 asks
}

func (c *conn) onSettings(f *http2.SettingsFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.peerInitWin
			c.peerInitWin = int64(s.Val)
			for _, st := range c.streams {
				st.sendWin += delta
				if st.sendWin > maxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSizeLimit(s.Val)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.fr.WriteSettingsAck()
	c.flushBlocked()
	c.signal()
	return nil
}

func (c *conn) onPing(f *http2.PingFrame) error {
	if f.IsAck() {
		if f.Data == drainPing {
			c.finishDrain()
		}
		return nil
	}
	now := time.Now()
	if !c.responded.Swap(false) && now.Sub(c.lastPing) < c.opts.MinPingInterval {
		if c.pingStrikes++; c.pingStrikes > 2 {
			c.goAway(http2.ErrCodeEnhanceYourCalm, "too_many_pings")
			return errGoneAway
		}
	} else {
		c.pingStrikes = 0
	}
	c.lastPing = now
	c.mu.Lock()
	c.fr.WritePing(true, f.Data)
	c.signal()
	c.mu.Unlock()
	return nil
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		if c.sendConnWin += int64(f.Increment); c.sendConnWin > maxWindow {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
	} else if st := c.streams[f.StreamID]; st != nil {
		if st.sendWin += int64(f.Increment); st.sendWin > maxWindow {
			c.resetStreamLocked(f.StreamID, http2.ErrCodeFlowControl)
			return nil
		}
	}
	c.flushBlocked()
	return nil
}

func (c *conn) onReset(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	st := c.streams[f.StreamID]
	if st == nil {
		idle := f.StreamID > c.maxStreamID
		c.mu.Unlock()
		if idle {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil
	}
	started := st.running
	c.endStream(st)
	c.mu.Unlock()
	if started {
		// A call cancelled while it runs (Envoy's timeout, say) keeps
		// its slot until its handler returns: bounded already.
		return nil
	}
	return c.countReset()
}

// countReset charges a stream the client reset before its call started
// (or opened past the limit) to the connection's budget: the rapid-reset
// attack opens and resets streams faster than any limit on calls in
// flight can see them.
func (c *conn) countReset() error {
	now := time.Now()
	if now.Sub(c.resetsSince) > c.opts.ResetInterval {
		c.resets, c.resetsSince = 0, now
	}
	if c.resets++; c.resets > c.opts.MaxResets {
		c.goAway(http2.ErrCodeEnhanceYourCalm, "too many streams reset or refused")
		return errGoneAway
	}
	return nil
}

// errGoneAway ends the read loop after a GOAWAY was queued.
var errGoneAway = errors.New("h2grpc: connection sent GOAWAY")

// fail ends the connection after the read loop returned err: a protocol
// error is answered GOAWAY with its code first.
func (c *conn) fail(err error) {
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
		c.goAway(http2.ErrCode(ce), "")
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.goAway(http2.ErrCodeFrameSize, "")
	case err == nil, errors.Is(err, errGoneAway):
	default:
		c.logDebug("connection ended", err)
	}
	c.mu.Lock()
	c.closing = true
	c.signal()
	c.mu.Unlock()
	// The writer writes what is encoded (the GOAWAY) and closes; a client
	// that does not read gets KeepaliveTimeout.
	select {
	case <-c.done:
	case <-time.After(c.opts.KeepaliveTimeout):
	}
}

// goAway encodes a GOAWAY naming the last stream the server will answer,
// and stops taking new streams.
func (c *conn) goAway(code http2.ErrCode, debug string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.draining = true
	c.fr.WriteGoAway(c.maxStreamID, code, []byte(debug))
	c.signal()
}

// drain is Shutdown's (and MaxConnectionAge's) GOAWAY: calls in flight
// finish, then the connection closes. As grpc-go does, it goes in two
// steps, so no call the client starts meanwhile is refused: a GOAWAY
// naming the largest stream ID and a PING, then, once the PING is
// answered (the client has seen the GOAWAY and opens no more streams)
// or after drainAckTimeout, a GOAWAY naming the last stream it opened.
func (c *conn) drain() {
	c.mu.Lock()
	if c.fr == nil {
		c.mu.Unlock()
		c.close() // still in its handshake: no call to finish
		return
	}
	if !c.drainPinged.Load() && !c.draining && !c.closed {
		c.drainPinged.Store(true)
		c.fr.WriteGoAway(maxWindow, http2.ErrCodeNo, nil)
		c.fr.WritePing(false, drainPing)
		c.signal()
	}
	c.mu.Unlock()
}

// finishDrain is drain's second step.
func (c *conn) finishDrain() {
	c.mu.Lock()
	done := c.draining
	c.mu.Unlock()
	if !done {
		c.goAway(http2.ErrCodeNo, "")
	}
}

// drainPing is the payload of drain's PING; drainAckTimeout how long
// drain waits for its answer.
var drainPing = [8]byte{'d', 'r', 'a', 'i', 'n'}

const drainAckTimeout = time.Second

// close ends the connection at once; safe to call more than once.
func (c *conn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for _, st := range c.streams {
		st.ended = true
	}
	c.roomy.Broadcast()
	c.recvd.Broadcast()
	c.mu.Unlock()
	c.cancel()
	c.raw.Close()
	close(c.done)
}

// signal wakes the writer; mu held.
func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writeLoop writes what is encoded, one write per round, until the
// connection closes; it also runs the keepalive and connection-age
// timers.
func (c *conn) writeLoop() {
	keepalive := time.NewTimer(c.opts.KeepaliveTime)
	defer keepalive.Stop()
	var age, ageGrace <-chan time.Time
	if c.opts.MaxConnectionAge > 0 {
		t := time.NewTimer(c.opts.MaxConnectionAge)
		defer t.Stop()
		age = t.C
	}
	pinged := false
	var drainAck <-chan time.Time
	for {
		if drainAck == nil && c.drainPinged.Load() {
			t := time.NewTimer(drainAckTimeout)
			defer t.Stop()
			drainAck = t.C
		}
		select {
		case <-c.done:
			return
		case <-drainAck:
			c.finishDrain()
		case <-c.wake:
		case <-keepalive.C:
			switch {
			case c.activity.Swap(false):
				pinged = false
				keepalive.Reset(c.opts.KeepaliveTime)
			case pinged:
				c.close()
				return
			default:
				pinged = true
				c.mu.Lock()
				c.fr.WritePing(false, [8]byte{'k', 'e', 'e', 'p'})
				c.mu.Unlock()
				keepalive.Reset(c.opts.KeepaliveTimeout)
			}
		case <-age:
			c.drain()
			t := time.NewTimer(c.opts.MaxConnectionAgeGrace)
			defer t.Stop()
			age, ageGrace = nil, t.C
		case <-ageGrace:
			c.close()
			return
		}
		if !c.writeRound() {
			c.close()
			return
		}
	}
}

// writeRound writes what is encoded; it reports false when the connection
// is to close (written the last of it, or the write failed).
func (c *conn) writeRound() bool {
	for {
		c.mu.Lock()
		if len(c.out.b) < batchBytes && c.active > 0 && !c.closing {
			// Calls are still being answered: let them run first, so
			// one write carries more answers (a system call is the
			// largest cost of a small answer).
			c.mu.Unlock()
			runtime.Gosched()
			c.mu.Lock()
		}
		b := c.out.b
		c.out.b = c.spare[:0]
		c.roomy.Broadcast()
		last := c.closing || c.closed || (c.draining && c.active == 0)
		c.mu.Unlock()
		c.spare = b
		if len(b) == 0 {
			return !last
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.opts.KeepaliveTimeout))
		if _, err := c.nc.Write(b); err != nil {
			return false
		}
		if last {
			return false
		}
	}
}

func (c *conn) logDebug(msg string, err error) {
	if c.opts.Logger != nil {
		c.opts.Logger.Debug("gRPC connection: "+msg, "remote", c.raw.RemoteAddr().String(), "err", err)
	}
}
