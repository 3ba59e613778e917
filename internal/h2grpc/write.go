package h2grpc

import (
	"encoding/base64"
	"strconv"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// answer ends st with s when the reader finds the request unacceptable.
// A handler already running sees its context cancelled and its result
// dropped.
func (c *conn) answer(st *stream, s *status.Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answerLocked(st, s)
}

func (c *conn) answerLocked(st *stream, s *status.Status) {
	if !st.running {
		st.handlerDone = true
	}
	if st.trailer == nil && !st.ended {
		st.trailer = s
		c.flushStream(st)
	}
	c.release(st)
}

// handlerReturned ends st with the handler's status and, when OK and
// set, its message (prefix included; not kept once it returns).
func (c *conn) handlerReturned(st *stream, s *status.Status, msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st.handlerDone = true
	if st.trailer == nil && !st.ended && !c.closed {
		st.out = msg
		st.trailer = s
		c.flushStream(st)
		if len(st.out) > 0 {
			st.out = append([]byte(nil), st.out...) // waits for a window
		}
	}
	c.release(st)
}

// flushStream encodes what st has to send, as far as the windows allow;
// mu held. Once its data is out, the trailers end the stream.
func (c *conn) flushStream(st *stream) {
	if st.ended || c.closed {
		return
	}
	if !st.headersSent && (len(st.out) > 0 || st.wantHeaders) {
		c.writeHeaders(st.id, true, false, st.headerMD, nil)
		st.headersSent = true
	}
	for len(st.out) > 0 {
		n := min(int64(len(st.out)), c.sendConnWin, st.sendWin, int64(c.peerMaxFrame))
		if n <= 0 {
			if !st.queued {
				st.queued = true
				c.blocked = append(c.blocked, st)
			}
			c.signal()
			return
		}
		c.fr.WriteData(st.id, false, st.out[:n])
		c.responded.Store(true)
		st.out = st.out[n:]
		c.sendConnWin -= n
		st.sendWin -= n
	}
	st.out = nil
	if st.trailer != nil {
		if st.headersSent {
			c.writeHeaders(st.id, false, true, st.trailerMD, st.trailer)
		} else {
			c.writeHeaders(st.id, true, true, mergeMD(st.headerMD, st.trailerMD), st.trailer)
		}
		if !st.recvClosed {
			// The answer is complete: the client need send no more.
			c.fr.WriteRSTStream(st.id, http2.ErrCodeNo)
		}
		c.responded.Store(true)
		c.forget(st)
	}
	c.signal()
}

// flushBlocked retries the streams waiting for a window; mu held.
func (c *conn) flushBlocked() {
	blocked := c.blocked
	c.blocked = nil
	for _, st := range blocked {
		st.queued = false
		c.flushStream(st)
	}
	c.roomy.Broadcast()
}

// forget ends st (nothing more goes out) and drops it from the table;
// mu held. Frames the client still sends on it are ignored.
func (c *conn) forget(st *stream) {
	st.ended = true
	if c.streams[st.id] == st {
		delete(c.streams, st.id)
	}
	if !st.dispatched { // a dispatched call's message left the count then
		c.buffered -= int64(len(st.in))
		st.in = nil
	}
	for _, m := range st.msgs {
		c.buffered -= int64(len(m) + 5)
	}
	st.msgs = nil
	if st.cancel != nil {
		st.cancel()
	}
	c.recvd.Broadcast()
	c.roomy.Broadcast()
	c.release(st)
}

// release stops counting st against the stream limit once it has ended
// and its handler returned; mu held.
func (c *conn) release(st *stream) {
	if st.ended && st.handlerDone && st.counted {
		st.counted = false
		c.active--
		if c.draining && c.active == 0 {
			c.signal()
		}
	}
}

// resetStream sends RST_STREAM and ends the stream.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resetStreamLocked(id, code)
}

func (c *conn) resetStreamLocked(id uint32, code http2.ErrCode) {
	if c.closed {
		return
	}
	c.fr.WriteRSTStream(id, code)
	c.signal()
	if st := c.streams[id]; st != nil {
		c.forget(st)
	}
}

// endStream is the client's RST_STREAM; mu held.
func (c *conn) endStream(st *stream) { c.forget(st) }

// writeHeaders encodes a HEADERS frame (and CONTINUATIONs) with the
// response's status line when head, md, and s's status when set; end
// ends the stream. mu held.
func (c *conn) writeHeaders(id uint32, head, end bool, md metadata.MD, s *status.Status) {
	c.hbuf.Reset()
	enc := c.henc
	if head {
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	}
	for k, vs := range md {
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			enc.WriteField(hpack.HeaderField{Name: k, Value: v})
		}
	}
	if s != nil {
		enc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(s.Code()))})
		if msg := s.Message(); msg != "" {
			enc.WriteField(hpack.HeaderField{Name: "grpc-message", Value: encodeGRPCMessage(msg)})
		}
	}
	block := c.hbuf.Bytes()
	for first := true; first || len(block) > 0; first = false {
		n := min(len(block), int(c.peerMaxFrame))
		frag := block[:n]
		block = block[n:]
		if first {
			c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: end, EndHeaders: len(block) == 0})
		} else {
			c.fr.WriteContinuation(id, len(block) == 0, frag)
		}
	}
}

func mergeMD(a, b metadata.MD) metadata.MD {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	return metadata.Join(a, b)
}

// maxMessageChars bounds grpc-message (a status's text), so an error's
// text cannot make the trailers arbitrarily large.
const maxMessageChars = 4 << 10

// encodeGRPCMessage percent-encodes a status message as the gRPC protocol
// asks: bytes outside printable ASCII, and '%'.
func encodeGRPCMessage(msg string) string {
	if len(msg) > maxMessageChars {
		msg = msg[:maxMessageChars]
	}
	clean := true
	for i := 0; i < len(msg); i++ {
		if b := msg[i]; b < ' ' || b > '~' || b == '%' {
			clean = false
			break
		}
	}
	if clean {
		return msg
	}
	var sb strings.Builder
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(msg); i++ {
		if b := msg[i]; b < ' ' || b > '~' || b == '%' {
			sb.WriteByte('%')
			sb.WriteByte(hex[b>>4])
			sb.WriteByte(hex[b&15])
		} else {
			sb.WriteByte(b)
		}
	}
	return sb.String()
}

// statusOf is err's status (OK for nil), as grpc-go maps it.
func statusOf(err error) *status.Status {
	if err == nil {
		return okStatus
	}
	return status.Convert(err)
}

var okStatus = status.New(codes.OK, "")
