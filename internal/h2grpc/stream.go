package h2grpc

import (
	"context"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// stream is one call. The reader owns the fields marked so; the rest are
// guarded by the connection's mu.
type stream struct {
	c        *conn
	id       uint32
	m        method
	deadline time.Time // zero without grpc-timeout
	encoding string    // grpc-encoding
	md       metadata.MD

	// Reader-owned.
	in         []byte // the message being received, prefix included
	recvWin    int64  // bytes the client may still send on the stream
	unacked    int64  // bytes received on the stream not yet credited back
	dispatched bool   // a unary call's message went to its handler

	// Under c.mu.
	msgs        [][]byte // a streaming call's messages not yet received
	recvClosed  bool     // the client half-closed (END_STREAM)
	sendWin     int64
	out         []byte         // message bytes waiting for a window
	trailer     *status.Status // set once the call's status is known
	trailerMD   metadata.MD
	headerMD    metadata.MD
	headersSent bool
	ended       bool // trailers written or stream reset: nothing more goes out
	handlerDone bool
	running     bool // a handler was started (or the call dispatched to one)
	wantHeaders bool // SendHeader: send the response headers now
	counted     bool // counted in c.active
	queued      bool // in c.blocked
	cancel      context.CancelFunc
}

// onHeaders opens a stream, or half-closes one (a client's trailers).
func (c *conn) onHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	c.mu.Lock()
	if st := c.streams[id]; st != nil || id <= c.maxStreamID {
		if st != nil && f.StreamEnded() {
			c.halfClose(st)
		}
		c.mu.Unlock()
		return nil // trailers of an open stream, or a stream already forgotten
	}
	if id%2 == 0 {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.maxStreamID = id
	if c.draining {
		c.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		c.signal()
		c.mu.Unlock()
		return nil
	}
	if c.active >= int(c.opts.MaxConcurrentStreams) {
		c.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		c.signal()
		c.mu.Unlock()
		return c.countReset()
	}
	st := &stream{c: c, id: id, recvWin: int64(c.opts.StreamWindowBytes), sendWin: c.peerInitWin, counted: true}
	c.streams[id] = st
	c.active++
	c.mu.Unlock()
	if f.Truncated {
		c.answer(st, status.New(codes.ResourceExhausted, "h2grpc: request header list larger than "+strconv.Itoa(int(c.opts.MaxHeaderListBytes))+" bytes"))
		return nil
	}
	if err := st.parseHeaders(f); err != nil {
		c.answer(st, err)
		return nil
	}
	if f.StreamEnded() {
		c.mu.Lock()
		c.halfClose(st)
		c.mu.Unlock()
	}
	if st.m.stream != nil {
		st.startStreaming()
	}
	return nil
}

// parseHeaders reads a request's headers; a bad one returns the status to
// answer.
func (st *stream) parseHeaders(f *http2.MetaHeadersFrame) *status.Status {
	var path, ctype string
	for _, hf := range f.Fields {
		switch hf.Name {
		case ":path":
			path = hf.Value
		case ":method":
			if hf.Value != "POST" {
				return status.New(codes.Internal, "h2grpc: invalid request method "+hf.Value)
			}
		case "content-type":
			ctype = hf.Value
		case "grpc-timeout":
			if d, ok := parseTimeout(hf.Value); ok {
				st.deadline = time.Now().Add(d)
			}
		case "grpc-encoding":
			st.encoding = hf.Value
		default:
			if !strings.HasPrefix(hf.Name, ":") && !reservedHeader(hf.Name) {
				if st.md == nil {
					st.md = metadata.MD{}
				}
				st.md[hf.Name] = append(st.md[hf.Name], hf.Value)
			}
		}
	}
	if ctype != "application/grpc" && !strings.HasPrefix(ctype, "application/grpc+") && !strings.HasPrefix(ctype, "application/grpc;") {
		return status.New(codes.Internal, "h2grpc: invalid gRPC request content-type "+strconv.Quote(ctype))
	}
	m, ok := st.c.srv.methods[path]
	if !ok {
		return st.c.srv.unknownMethod(path)
	}
	st.m = m
	return nil
}

// reservedHeader reports whether a header is HTTP/2's or gRPC's own, not
// metadata for the handler.
func reservedHeader(name string) bool {
	switch name {
	case "te", "user-agent", "grpc-accept-encoding", "grpc-message-type":
		return true
	}
	return false
}

// unknownMethod is grpc-go's answer for a method no service has.
func (s *Server) unknownMethod(path string) *status.Status {
	service, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	switch {
	case !strings.HasPrefix(path, "/") || !ok:
		return status.Newf(codes.Unimplemented, "malformed method name: %q", path)
	case s.info[service].Methods == nil:
		return status.Newf(codes.Unimplemented, "unknown service %v", service)
	default:
		return status.Newf(codes.Unimplemented, "unknown method %v for service %v", method, service)
	}
}

// parseTimeout reads grpc-timeout: up to 8 digits and a unit.
func parseTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	unit := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second, 'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}[v[len(v)-1]]
	if unit == 0 {
		return 0, false
	}
	if n > int64(time.Duration(1<<62)/unit) {
		return 1 << 62, true
	}
	return time.Duration(n) * unit, true
}

// onData takes a DATA frame's messages; the windows are credited back as
// bytes arrive (what the server holds is bounded by the message and
// buffering limits instead).
func (c *conn) onData(f *http2.DataFrame) error {
	n := int64(f.Length)
	if n > c.recvConnWin {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.recvConnWin -= n
	c.connUnacked += n
	c.mu.Lock()
	st := c.streams[f.StreamID]
	if st == nil {
		idle := f.StreamID > c.maxStreamID
		c.creditConn()
		c.mu.Unlock()
		if idle {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil // a stream already answered or reset
	}
	if st.recvClosed {
		c.creditConn()
		c.mu.Unlock()
		c.resetStream(f.StreamID, http2.ErrCodeStreamClosed)
		return nil
	}
	if n > st.recvWin {
		c.creditConn()
		c.mu.Unlock()
		c.resetStream(f.StreamID, http2.ErrCodeFlowControl)
		return nil
	}
	st.recvWin -= n
	st.unacked += n
	if err := c.takeData(st, f.Data()); err != nil {
		c.answerLocked(st, err)
	}
	if f.StreamEnded() {
		c.halfClose(st)
	}
	c.creditConn()
	// A unary call's stream is credited until its message is complete:
	// a client sending on past that runs out of window
	// (FLOW_CONTROL_ERROR) rather than being read for ever.
	if !st.recvClosed && !st.dispatched && st.unacked >= int64(c.opts.StreamWindowBytes)/4 {
		c.fr.WriteWindowUpdate(st.id, uint32(st.unacked))
		st.recvWin += st.unacked
		st.unacked = 0
		c.signal()
	}
	c.mu.Unlock()
	return nil
}

// creditConn gives the client back the connection window it used, in
// steps of a quarter; mu held.
func (c *conn) creditConn() {
	if c.connUnacked >= int64(c.opts.ConnWindowBytes)/4 {
		c.fr.WriteWindowUpdate(0, uint32(c.connUnacked))
		c.recvConnWin += c.connUnacked
		c.connUnacked = 0
		c.signal()
	}
}

// maxBuffered bounds the bytes of messages a connection holds for its
// handlers: those being received and a streaming call's not yet taken. A
// call whose data would pass it is answered RESOURCE_EXHAUSTED: the
// windows are credited as data arrives, so they bound nothing themselves.
func (c *conn) maxBuffered() int64 {
	return int64(c.opts.ConnWindowBytes) + 4*int64(c.opts.MaxMessageBytes)
}

// takeData adds data to st's message being received and hands complete
// messages on; mu held. It returns the status to end the call with when
// the data is not acceptable.
func (c *conn) takeData(st *stream, data []byte) *status.Status {
	if st.dispatched || st.ended || len(data) == 0 {
		return nil // a unary call reads one message; the rest is dropped
	}
	if c.buffered+int64(len(data)) > c.maxBuffered() {
		return status.New(codes.ResourceExhausted, "h2grpc: too many bytes of messages held for this connection's calls")
	}
	st.in = append(st.in, data...)
	c.buffered += int64(len(data))
	for len(st.in) >= 5 {
		size := int(st.in[1])<<24 | int(st.in[2])<<16 | int(st.in[3])<<8 | int(st.in[4])
		if st.in[1]&0x80 != 0 || size > c.opts.MaxMessageBytes {
			return status.Newf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", uint32(size), c.opts.MaxMessageBytes)
		}
		if s := compressedFlag(st.in[0], st.encoding); s != nil {
			return s
		}
		if len(st.in) < 5+size {
			return nil
		}
		msg := st.in[5 : 5+size : 5+size]
		if st.m.stream == nil {
			// The call's buffer is its message from now on.
			st.dispatched, st.running = true, true
			c.buffered -= int64(len(st.in))
			st.in = msg
			c.srv.dispatch(st)
			return nil
		}
		st.msgs = append(st.msgs, msg)
		st.in = st.in[5+size:]
		if len(st.in) == 0 {
			st.in = nil
		}
		c.recvd.Broadcast()
	}
	return nil
}

// compressedFlag checks a message's flag byte, as grpc-go does without
// a decompressor.
func compressedFlag(flag byte, encoding string) *status.Status {
	switch {
	case flag == 0:
		return nil
	case flag != 1:
		return status.Newf(codes.Internal, "grpc: received unexpected payload format %d", flag)
	case encoding == "" || encoding == "identity":
		return status.New(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
	default:
		return status.Newf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", encoding)
	}
}

// halfClose records the client's END_STREAM; mu held. A unary call that
// ends before its message is answered Internal, as grpc-go does.
func (c *conn) halfClose(st *stream) {
	st.recvClosed = true
	c.recvd.Broadcast()
	if st.m.stream == nil && !st.dispatched && !st.ended && st.trailer == nil && st.m.unary != nil {
		c.buffered -= int64(len(st.in))
		st.in = nil
		st.handlerDone = true
		st.trailer = status.New(codes.Internal, "grpc: the client ended the call before its request message (unexpected EOF)")
		c.flushStream(st)
	}
}
