package resp

import (
	"strconv"
	"strings"
)

// Writer encodes replies for one connection into a reusable buffer, in
// the protocol the connection negotiated (2 until HELLO 3). Appending never
// allocates once the buffer has grown to the connection's usual batch.
//
// The buffer holds the replies not yet written, and never more than limit
// bytes of them plus headers: a bulk reply that would cross limit is not
// appended; the writer is marked over instead and its buffer released, the
// connection stops executing commands and is closed without writing more.
// Only bulk replies can be large (a value, an INFO text); every other reply
// is a few bytes, and their number is bounded by the commands one pipeline
// or transaction may hold, which the callers check at command boundaries
// (OverLimit).
type Writer struct {
	b     []byte
	proto int  // 2 or 3
	limit int  // bytes; Limits.OutputLimit
	over  bool // limit crossed: nothing more is sent
}

// overLimit reports whether the replies have crossed the limit, marking the
// writer over if they just did (a run of small replies can cross it).
func (w *Writer) OverLimit() bool {
	if !w.over && len(w.b) > w.limit {
		w.overflow()
	}
	return w.over
}

func (w *Writer) overflow() {
	w.over = true
	w.b = nil // the replies will never be sent: free them now
}

// fits reports whether n more bytes of reply stay within the limit,
// marking the writer over if not.
func (w *Writer) fits(n int) bool {
	if w.over || len(w.b)+n > w.limit {
		if !w.over {
			w.overflow()
		}
		return false
	}
	return true
}

func (w *Writer) line(prefix byte, s string) {
	w.b = append(w.b, prefix)
	w.b = append(w.b, s...)
	w.b = append(w.b, '\r', '\n')
}

func (w *Writer) header(prefix byte, n int64) {
	w.b = append(w.b, prefix)
	w.b = strconv.AppendInt(w.b, n, 10)
	w.b = append(w.b, '\r', '\n')
}

// simple writes a status reply such as +OK. s must not contain CR or LF.
func (w *Writer) Simple(s string) { w.line('+', s) }

func (w *Writer) OK() { w.b = append(w.b, "+OK\r\n"...) }

func (w *Writer) Integer(n int64) { w.header(':', n) }

func (w *Writer) Bulk(b []byte) {
	if !w.fits(len(b)) {
		return
	}
	w.header('$', int64(len(b)))
	w.b = append(w.b, b...)
	w.b = append(w.b, '\r', '\n')
}

func (w *Writer) BulkString(s string) {
	if !w.fits(len(s)) {
		return
	}
	w.header('$', int64(len(s)))
	w.b = append(w.b, s...)
	w.b = append(w.b, '\r', '\n')
}

// Double writes a floating-point number already formatted as Redis formats
// one (see values.AppendScore): RESP3's double, or in RESP2 a bulk string,
// as Redis replies with a score.
func (w *Writer) Double(text []byte) {
	if w.proto != 3 {
		w.Bulk(text)
		return
	}
	w.b = append(w.b, ',')
	w.b = append(w.b, text...)
	w.b = append(w.b, '\r', '\n')
}

// null writes RESP3's null, or RESP2's null bulk string.
func (w *Writer) Null() {
	if w.proto == 3 {
		w.b = append(w.b, "_\r\n"...)
	} else {
		w.b = append(w.b, "$-1\r\n"...)
	}
}

func (w *Writer) Array(n int) { w.header('*', int64(n)) }

// NullArray writes RESP3's null, or RESP2's null array (*-1), as Redis
// answers a missing key where an array was asked for (LPOP key count).
func (w *Writer) NullArray() {
	if w.proto == 3 {
		w.b = append(w.b, "_\r\n"...)
	} else {
		w.b = append(w.b, "*-1\r\n"...)
	}
}

// setHeader starts a set of n elements: RESP3's set, or in RESP2 an array.
func (w *Writer) Set(n int) {
	if w.proto == 3 {
		w.header('~', int64(n))
	} else {
		w.header('*', int64(n))
	}
}

// mapHeader starts a map of n pairs: a RESP3 map, or in RESP2 a flat array
// of 2n elements (key, value, key, value...), as Redis does.
func (w *Writer) Map(n int) {
	if w.proto == 3 {
		w.header('%', int64(n))
	} else {
		w.header('*', int64(2*n))
	}
}

// errorReply writes an error line. Redis error replies are one line, so CR
// and LF inside msg become spaces.
func (w *Writer) Error(msg string) {
	if strings.ContainsAny(msg, "\r\n") {
		msg = strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	}
	w.line('-', msg)
}

func (w *Writer) Reset() { w.b = w.b[:0] }

// release forgets the written replies, dropping a buffer grown past
// KeepBuffer so an idle connection does not keep it.
func (w *Writer) Release() {
	if cap(w.b) > KeepBuffer {
		w.b = nil
	}
	w.b = w.b[:0]
}

// NewWriter returns a Writer speaking RESP2 until SetProto, holding at most
// limit bytes of unwritten replies (Limits.OutputLimit).
func NewWriter(limit int) Writer { return Writer{proto: 2, limit: limit} }

// Proto returns the protocol replies are encoded in: 2 or 3.
func (w *Writer) Proto() int { return w.proto }

// SetProto switches the encoding of the replies that follow (HELLO).
func (w *Writer) SetProto(p int) { w.proto = p }

// Bytes returns the replies built since the last Reset or Release. The
// slice is valid until the next change.
func (w *Writer) Bytes() []byte { return w.b }

// Len returns the bytes of replies built; Cap the buffer's size.
func (w *Writer) Len() int { return len(w.b) }

// Cap returns the reply buffer's size.
func (w *Writer) Cap() int { return cap(w.b) }

// Over reports whether the limit was crossed: nothing more is to be sent.
func (w *Writer) Over() bool { return w.over }

// Truncate drops the replies built after the first n bytes (a handler that
// panicked half way through its reply); a no-op once over.
func (w *Writer) Truncate(n int) {
	if !w.over && n <= len(w.b) {
		w.b = w.b[:n]
	}
}

// Overflow marks the Writer over: a reply built elsewhere for it (by a
// command run on another goroutine, with its own Writer) crossed the limit.
func (w *Writer) Overflow() {
	if !w.over {
		w.overflow()
	}
}

// Raw appends replies already encoded (in this Writer's protocol), if they
// fit within the limit; otherwise the Writer goes over.
func (w *Writer) Raw(b []byte) {
	if w.fits(len(b)) {
		w.b = append(w.b, b...)
	}
}

// Limit returns the most bytes of unwritten replies the Writer holds.
func (w *Writer) Limit() int { return w.limit }

// Reuse empties the Writer for another round of replies, in protocol proto
// (2 or 3) under limit, keeping its buffer unless it grew large.
func (w *Writer) Reuse(proto, limit int) {
	w.Release()
	w.over, w.proto, w.limit = false, proto, limit
}
