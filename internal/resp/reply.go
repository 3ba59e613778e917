package resp

import (
	"strconv"
	"strings"
)

// replyWriter encodes replies for one connection into a reusable buffer, in
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
// (overLimit).
type replyWriter struct {
	b     []byte
	proto int  // 2 or 3
	limit int  // bytes; Limits.OutputLimit
	over  bool // limit crossed: nothing more is sent
}

// overLimit reports whether the replies have crossed the limit, marking the
// writer over if they just did (a run of small replies can cross it).
func (w *replyWriter) overLimit() bool {
	if !w.over && len(w.b) > w.limit {
		w.overflow()
	}
	return w.over
}

func (w *replyWriter) overflow() {
	w.over = true
	w.b = nil // the replies will never be sent: free them now
}

// fits reports whether n more bytes of reply stay within the limit,
// marking the writer over if not.
func (w *replyWriter) fits(n int) bool {
	if w.over || len(w.b)+n > w.limit {
		if !w.over {
			w.overflow()
		}
		return false
	}
	return true
}

func (w *replyWriter) line(prefix byte, s string) {
	w.b = append(w.b, prefix)
	w.b = append(w.b, s...)
	w.b = append(w.b, '\r', '\n')
}

func (w *replyWriter) header(prefix byte, n int64) {
	w.b = append(w.b, prefix)
	w.b = strconv.AppendInt(w.b, n, 10)
	w.b = append(w.b, '\r', '\n')
}

// simple writes a status reply such as +OK. s must not contain CR or LF.
func (w *replyWriter) simple(s string) { w.line('+', s) }

func (w *replyWriter) ok() { w.b = append(w.b, "+OK\r\n"...) }

func (w *replyWriter) integer(n int64) { w.header(':', n) }

func (w *replyWriter) bulk(b []byte) {
	if !w.fits(len(b)) {
		return
	}
	w.header('$', int64(len(b)))
	w.b = append(w.b, b...)
	w.b = append(w.b, '\r', '\n')
}

func (w *replyWriter) bulkString(s string) {
	if !w.fits(len(s)) {
		return
	}
	w.header('$', int64(len(s)))
	w.b = append(w.b, s...)
	w.b = append(w.b, '\r', '\n')
}

// null writes RESP3's null, or RESP2's null bulk string.
func (w *replyWriter) null() {
	if w.proto == 3 {
		w.b = append(w.b, "_\r\n"...)
	} else {
		w.b = append(w.b, "$-1\r\n"...)
	}
}

func (w *replyWriter) array(n int) { w.header('*', int64(n)) }

// setHeader starts a set of n elements: RESP3's set, or in RESP2 an array.
func (w *replyWriter) setHeader(n int) {
	if w.proto == 3 {
		w.header('~', int64(n))
	} else {
		w.header('*', int64(n))
	}
}

// mapHeader starts a map of n pairs: a RESP3 map, or in RESP2 a flat array
// of 2n elements (key, value, key, value...), as Redis does.
func (w *replyWriter) mapHeader(n int) {
	if w.proto == 3 {
		w.header('%', int64(n))
	} else {
		w.header('*', int64(2*n))
	}
}

// errorReply writes an error line. Redis error replies are one line, so CR
// and LF inside msg become spaces.
func (w *replyWriter) errorReply(msg string) {
	if strings.ContainsAny(msg, "\r\n") {
		msg = strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	}
	w.line('-', msg)
}

func (w *replyWriter) reset() { w.b = w.b[:0] }

// release forgets the written replies, dropping a buffer grown past
// keepBookkeeping so an idle connection does not keep it.
func (w *replyWriter) release() {
	if cap(w.b) > keepBookkeeping {
		w.b = nil
	}
	w.b = w.b[:0]
}
