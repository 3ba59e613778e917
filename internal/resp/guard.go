package resp

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"time"
)

// Limits bound what one client can make the server hold. A client that
// breaches one gets an error reply and is disconnected; no other client
// notices.
type Limits struct {
	// MaxBulkLen is the largest argument, in bytes. A declared length
	// above it is refused as soon as its header arrives, before a byte of
	// it is buffered.
	MaxBulkLen int64
	// MaxArgs is the most arguments one command may have.
	MaxArgs int64
	// QueryBufferLimit is the most bytes of a command not yet complete.
	QueryBufferLimit int64
	// OutputLimit is the most reply bytes one pipeline may produce.
	OutputLimit int64
	// OutputTimeout disconnects a client that leaves its replies unread
	// (a write blocked) this long; 0 never does.
	OutputTimeout time.Duration
}

// DefaultLimits are Redis's defaults, where Redis has them.
var DefaultLimits = Limits{
	MaxBulkLen:       512 << 20,
	MaxArgs:          1 << 20,
	QueryBufferLimit: 1 << 30,
	OutputLimit:      64 << 20,
	OutputTimeout:    30 * time.Second,
}

// maxInline bounds a command sent as one text line (telnet style), as
// Redis's PROTO_INLINE_MAX_SIZE does.
const maxInline = 64 << 10

// errDraining ends reads on a server that is shutting down.
var errDraining = errors.New("server shutting down")

// guardListener wraps the server's listener. Its connections check the
// shape of the RESP stream as bytes arrive, so limits hold before redcon
// buffers anything; and while the server drains, Accept waits instead of
// failing, because redcon closes every connection as soon as Accept fails
// and in-flight commands must be let finish first.
type guardListener struct {
	net.Listener
	srv     *Server
	stopped chan struct{} // closed when Accept may fail
	once    sync.Once
}

func (l *guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		if l.srv.draining.Load() {
			<-l.stopped
		}
		return nil, err
	}
	return &guardConn{Conn: c, srv: l.srv, v: validator{lim: &l.srv.limits}}, nil
}

// releaseAccept lets a blocked Accept return, ending redcon's accept loop.
func (l *guardListener) releaseAccept() { l.once.Do(func() { close(l.stopped) }) }

// guardConn is one client's connection, checked as it is read.
type guardConn struct {
	net.Conn
	srv *Server
	v   validator
}

func (g *guardConn) Read(p []byte) (int, error) {
	if g.srv.draining.Load() {
		return 0, errDraining
	}
	n, err := g.Conn.Read(p)
	if n > 0 {
		if msg := g.v.feed(p[:n]); msg != "" {
			g.srv.limitHits.Add(1)
			g.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			g.Conn.Write([]byte("-ERR Protocol error: " + msg + "\r\n"))
			return 0, errors.New(msg)
		}
	}
	return n, err
}

func (g *guardConn) Write(p []byte) (int, error) {
	if t := g.srv.limits.OutputTimeout; t > 0 {
		g.Conn.SetWriteDeadline(time.Now().Add(t))
	}
	return g.Conn.Write(p)
}

// validator follows the RESP request stream byte by byte, as redcon will
// parse it, and reports the first limit it breaks. It keeps a few integers
// of state and never buffers.
type validator struct {
	lim     *Limits
	state   vstate
	num     int64 // the header number being read
	digits  int
	neg     bool
	args    int64 // arguments left in the current command
	skip    int64 // bulk bytes (and CRLF) left to skip
	pending int64 // bytes of the current, unfinished command
	inline  int64 // bytes of the current inline line
}

type vstate uint8

const (
	vStart      vstate = iota // at the start of a command
	vInline                   // inside an inline (text) command
	vCount                    // reading *<count>\r\n
	vBulkHeader               // expecting $ of the next argument
	vBulkLen                  // reading $<len>\r\n
	vBulkBody                 // skipping an argument's bytes and CRLF
)

// feed checks b, the next bytes read, and returns a protocol error message
// or "".
func (v *validator) feed(b []byte) string {
	for i := 0; i < len(b); i++ {
		ch := b[i]
		if v.state == vBulkBody && v.skip > 1 {
			// Skip an argument's bytes in one step, not byte by byte: the
			// validator only cares where the argument ends.
			n := min(v.skip-1, int64(len(b)-i))
			v.pending += n
			v.skip -= n
			i += int(n) - 1
			if v.pending > v.lim.QueryBufferLimit {
				return v.queryLimit()
			}
			continue
		}
		v.pending++
		if v.pending > v.lim.QueryBufferLimit {
			return v.queryLimit()
		}
		switch v.state {
		case vStart:
			if ch == '*' {
				v.state, v.num, v.digits, v.neg = vCount, 0, 0, false
			} else {
				v.state, v.inline = vInline, 1
				if ch == '\n' {
					v.endCommand()
				}
			}
		case vInline:
			v.inline++
			if v.inline > maxInline {
				return "too big inline request"
			}
			if ch == '\n' {
				v.endCommand()
			}
		case vCount, vBulkLen:
			if ch == '\r' {
				continue
			}
			if ch != '\n' {
				if !v.digit(ch) {
					return v.badHeader()
				}
				continue
			}
			if v.neg || v.digits == 0 {
				return v.badHeader()
			}
			if v.state == vCount {
				if v.num > v.lim.MaxArgs {
					return "invalid multibulk length (more than --max-args " + strconv.FormatInt(v.lim.MaxArgs, 10) + " arguments)"
				}
				if v.num == 0 {
					return "invalid multibulk length"
				}
				v.args, v.state = v.num, vBulkHeader
			} else {
				if v.num > v.lim.MaxBulkLen {
					return "invalid bulk length (more than --proto-max-bulk-len " + strconv.FormatInt(v.lim.MaxBulkLen, 10) + " bytes)"
				}
				v.skip, v.state = v.num+2, vBulkBody
			}
		case vBulkHeader:
			if ch != '$' {
				return "expected '$', got '" + string(rune(ch)) + "'"
			}
			v.state, v.num, v.digits, v.neg = vBulkLen, 0, 0, false
		case vBulkBody:
			v.skip--
			if v.skip == 0 {
				v.args--
				if v.args == 0 {
					v.endCommand()
				} else {
					v.state = vBulkHeader
				}
			}
		}
	}
	return ""
}

func (v *validator) queryLimit() string {
	return "query buffer limit reached (--client-query-buffer-limit " + strconv.FormatInt(v.lim.QueryBufferLimit, 10) + " bytes)"
}

func (v *validator) endCommand() { v.state, v.pending, v.inline = vStart, 0, 0 }

// digit adds a header digit, refusing headers longer than any valid number.
func (v *validator) digit(ch byte) bool {
	if ch == '-' && v.digits == 0 && !v.neg {
		v.neg = true
		return true
	}
	if ch < '0' || ch > '9' || v.digits >= 18 {
		return false
	}
	v.num = v.num*10 + int64(ch-'0')
	v.digits++
	return true
}

func (v *validator) badHeader() string {
	if v.state == vCount {
		return "invalid multibulk length"
	}
	return "invalid bulk length"
}
