package resp

import (
	"errors"
	"io"
	"strconv"
)

// Reader parses RESP requests (multibulk, and inline text commands as
// telnet and redis-cli send them) from one connection, without allocating
// once its buffers have grown: a command's arguments are slices of the read
// buffer, valid until the next call to Next after the batch is done.
//
// Limits are checked as headers arrive, before any argument is buffered: a
// declared argument longer than Limits.MaxBulkLen, more arguments than
// Limits.MaxArgs, or a command still incomplete at Limits.QueryBufferLimit
// bytes ends the connection with a protocol error. While preAuth is set the
// much smaller unauthenticated limits apply (PreAuthMaxArgs,
// PreAuthMaxBulk), and next returns one command at a time, so the command
// after an AUTH is parsed under the limits the AUTH earned.
type Reader struct {
	rd     io.Reader
	lim    *Limits
	buf    []byte // buf[start:end] is unparsed input
	start  int
	end    int
	peak   int        // the largest len(buf) so far, for CLIENT LIST's rbp
	args   [][]byte   // every argument of the batch, in order
	cmds   [][][]byte // the batch: slices of args
	inline []byte     // unquoted inline arguments (they cannot alias buf)
	// preAuth applies the unauthenticated limits; the connection sets it.
	preAuth bool
	// more is set when next returned early — before a malformed command,
	// or after one command while preAuth — with input still buffered: the
	// next call answers from the buffer without reading, so an event loop
	// must call again even if no more input arrives.
	more bool
}

// ProtocolError is a malformed request; the connection answers it with
// "ERR Protocol error: ..." and closes.
type ProtocolError struct{ msg string }

// Error returns the text after "ERR " in the reply.
func (e *ProtocolError) Error() string { return "Protocol error: " + e.msg }

var errIncomplete = errors.New("incomplete command")

const initialReadBuffer = 16 << 10

// NewReader returns a Reader of rd's requests, under the limits lim points
// to (which the caller may not change while the Reader is in use).
func NewReader(rd io.Reader, lim *Limits) *Reader {
	return &Reader{rd: rd, lim: lim, buf: make([]byte, initialReadBuffer), peak: initialReadBuffer}
}

// Buffered returns the bytes received and not yet parsed.
func (r *Reader) Buffered() int { return r.end - r.start }

// Size returns the read buffer's size, Peak the largest it has been, and
// Free its room for more input, in bytes (CLIENT LIST's rbs, rbp and
// qbuf-free).
func (r *Reader) Size() int { return len(r.buf) }

// Retained returns the memory the Reader keeps between commands, in bytes:
// its buffer and the capacity of its argument lists.
func (r *Reader) Retained() int {
	return len(r.buf) + (cap(r.args)+cap(r.cmds))*int(SliceHeaderSize) + cap(r.inline)
}

// Peak returns the largest size the read buffer has had.
func (r *Reader) Peak() int { return r.peak }

// Free returns the read buffer's room for more input.
func (r *Reader) Free() int { return len(r.buf) - r.end }

// More reports whether the last Next returned early with input still
// buffered: the next call answers from the buffer without reading, so an
// event loop must call again even if no more input arrives.
func (r *Reader) More() bool { return r.more }

// SetPreAuth applies (or lifts) the unauthenticated limits: while on,
// requests must stay within PreAuthMaxArgs arguments of PreAuthMaxBulk bytes,
// and Next returns one command at a time, so the command after an AUTH is
// parsed under the limits the AUTH earned.
func (r *Reader) SetPreAuth(on bool) { r.preAuth = on }

// Next returns the next batch of complete commands: every command already
// received, reading from the connection only when none is complete.
func (r *Reader) Next() ([][][]byte, error) {
	r.cmds, r.args, r.inline = r.cmds[:0], r.args[:0], r.inline[:0]
	r.more = false
	// The previous batch has been executed: reclaim its bytes, and give
	// back what a big command grew, once it is no longer needed.
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	if len(r.buf) > KeepBuffer && r.end <= initialReadBuffer {
		small := make([]byte, initialReadBuffer)
		r.end = copy(small, r.buf[:r.end])
		r.buf = small
	}
	if cap(r.args)*int(SliceHeaderSize) > KeepBuffer {
		r.args = nil
	}
	if cap(r.cmds)*int(SliceHeaderSize) > KeepBuffer {
		r.cmds = nil
	}
	if cap(r.inline) > KeepBuffer {
		r.inline = nil
	}
	for {
		for r.start < r.end {
			if r.preAuth && len(r.cmds) > 0 {
				r.more = true // one command at a time until authenticated
				return r.cmds, nil
			}
			args, err := r.parseOne()
			if err == errIncomplete {
				break
			}
			if err != nil {
				if len(r.cmds) > 0 {
					// Answer the good commands before it, as Redis does;
					// the next call meets the bad one again.
					r.more = true
					return r.cmds, nil
				}
				return nil, err
			}
			if len(args) > 0 {
				r.cmds = append(r.cmds, args)
			}
		}
		if len(r.cmds) > 0 {
			return r.cmds, nil
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// fill reads more input, growing the buffer (up to the query buffer limit)
// when the incomplete command fills it.
func (r *Reader) fill() error {
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	if r.end == len(r.buf) {
		if int64(len(r.buf)) >= r.lim.QueryBufferLimit {
			return &ProtocolError{"query buffer limit reached (--client-query-buffer-limit " + strconv.FormatInt(r.lim.QueryBufferLimit, 10) + " bytes)"}
		}
		grown := make([]byte, min(int64(2*len(r.buf)), r.lim.QueryBufferLimit))
		copy(grown, r.buf[:r.end])
		r.buf = grown
		r.peak = max(r.peak, len(grown))
	}
	n, err := r.rd.Read(r.buf[r.end:])
	r.end += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// parseOne parses the command at r.start, advancing past it, or returns
// errIncomplete (leaving r.start alone) if it has not all arrived.
func (r *Reader) parseOne() ([][]byte, error) {
	b := r.buf[r.start:r.end]
	if b[0] != '*' {
		return r.parseInline(b)
	}
	line, rest, st := cutLine(b[1:])
	if st == lineBad || (st == lineIncomplete && len(b) > 32) {
		return nil, &ProtocolError{"invalid multibulk length"}
	}
	if st == lineIncomplete {
		return nil, errIncomplete
	}
	count, ok := ParseInt(line)
	if !ok || count <= 0 {
		if ok && count <= 0 {
			// Redis answers *0 and *-1 with nothing; redcon with an
			// error. Treat them as the empty command they are.
			r.start = r.end - len(rest)
			return nil, nil
		}
		return nil, &ProtocolError{"invalid multibulk length"}
	}
	if r.preAuth && count > PreAuthMaxArgs {
		return nil, &ProtocolError{"unauthenticated multibulk length"}
	}
	if count > r.lim.MaxArgs {
		return nil, &ProtocolError{"invalid multibulk length (more than --max-args " + strconv.FormatInt(r.lim.MaxArgs, 10) + " arguments)"}
	}
	first := len(r.args)
	for range count {
		if len(rest) == 0 {
			r.args = r.args[:first]
			return nil, errIncomplete
		}
		if rest[0] != '$' {
			return nil, &ProtocolError{"expected '$', got '" + string(rest[0]) + "'"}
		}
		line, after, st := cutLine(rest[1:])
		if st == lineBad || (st == lineIncomplete && len(rest) > 32) {
			return nil, &ProtocolError{"invalid bulk length"}
		}
		if st == lineIncomplete {
			r.args = r.args[:first]
			return nil, errIncomplete
		}
		size, ok := ParseInt(line)
		if !ok || size < 0 {
			return nil, &ProtocolError{"invalid bulk length"}
		}
		if r.preAuth && size > PreAuthMaxBulk {
			return nil, &ProtocolError{"unauthenticated bulk length"}
		}
		if size > r.lim.MaxBulkLen {
			return nil, &ProtocolError{"invalid bulk length (more than --proto-max-bulk-len " + strconv.FormatInt(r.lim.MaxBulkLen, 10) + " bytes)"}
		}
		if int64(len(after)) < size+2 {
			r.args = r.args[:first]
			return nil, errIncomplete
		}
		if after[size] != '\r' || after[size+1] != '\n' {
			return nil, &ProtocolError{"invalid bulk length"}
		}
		r.args = append(r.args, after[:size:size])
		rest = after[size+2:]
	}
	r.start = r.end - len(rest)
	return r.args[first:], nil
}

type lineStatus uint8

const (
	lineOK lineStatus = iota
	lineIncomplete
	lineBad // a header with a bare CR or LF
)

// cutLine splits b at the first CRLF.
func cutLine(b []byte) (line, rest []byte, st lineStatus) {
	for i, ch := range b {
		switch ch {
		case '\n':
			return nil, nil, lineBad
		case '\r':
			if i+1 == len(b) {
				return nil, nil, lineIncomplete
			}
			if b[i+1] != '\n' {
				return nil, nil, lineBad
			}
			return b[:i], b[i+2:], lineOK
		}
	}
	return nil, nil, lineIncomplete
}

// parseInline parses a text command: words separated by spaces, "double"
// or 'single' quoted words with \n \r \t \\ and \" escapes (in double
// quotes), ended by LF (CRLF accepted).
func (r *Reader) parseInline(b []byte) ([][]byte, error) {
	nl := -1
	for i, ch := range b {
		if ch == '\n' {
			nl = i
			break
		}
	}
	if nl > maxInline || (nl < 0 && len(b) > maxInline) {
		return nil, &ProtocolError{"too big inline request"}
	}
	if nl < 0 {
		return nil, errIncomplete
	}
	line := b[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	first := len(r.args)
	for i := 0; i < len(line); {
		switch ch := line[i]; {
		case ch == ' ' || ch == '\t':
			i++
		case ch == '"' || ch == '\'':
			startLen := len(r.inline)
			j := i + 1
			closed := false
			for j < len(line) {
				c := line[j]
				if c == ch {
					closed = true
					j++
					break
				}
				if c == '\\' && ch == '"' && j+1 < len(line) {
					j++
					switch line[j] {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					default:
						c = line[j]
					}
				}
				r.inline = append(r.inline, c)
				j++
			}
			if !closed || (j < len(line) && line[j] != ' ' && line[j] != '\t') {
				r.args = r.args[:first]
				return nil, &ProtocolError{"unbalanced quotes in request"}
			}
			r.args = append(r.args, r.inline[startLen:len(r.inline):len(r.inline)])
			i = j
		default:
			j := i
			for j < len(line) && line[j] != ' ' && line[j] != '\t' {
				j++
			}
			r.args = append(r.args, line[i:j:j])
			i = j
		}
	}
	if n := len(r.args) - first; (r.preAuth && n > PreAuthMaxArgs) || int64(n) > r.lim.MaxArgs {
		r.args = r.args[:first]
		if r.preAuth && n > PreAuthMaxArgs {
			return nil, &ProtocolError{"unauthenticated multibulk length"}
		}
		return nil, &ProtocolError{"invalid multibulk length (more than --max-args " + strconv.FormatInt(r.lim.MaxArgs, 10) + " arguments)"}
	}
	// Consumed only once valid: after commands that came before it, the
	// next call meets a malformed line again and reports it.
	r.start += nl + 1
	return r.args[first:], nil
}
