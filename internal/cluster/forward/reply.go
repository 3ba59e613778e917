package forward

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
)

// ErrProtocol: the peer sent bytes that are not one RESP reply.
var ErrProtocol = errors.New("protocol error in reply")

// ErrReplyTooLarge: the reply is longer than the pool's MaxReplyBytes.
var ErrReplyTooLarge = errors.New("reply larger than the limit")

// ReadReply reads one complete RESP2 or RESP3 reply from r and appends its
// bytes, unchanged, to dst. It reads no further than the reply's end, so
// the next reply stays in r. io.EOF means the peer closed the connection
// before the reply began; io.ErrUnexpectedEOF, that it closed in mid-reply.
// A reply longer than max bytes, or one that
// announces more elements than max, fails with ErrReplyTooLarge before the
// rest is read; malformed input fails with ErrProtocol (the connection
// must then be dropped). Push messages (>) are refused: a peer connection
// never subscribes, so a push means the stream is not what it seems.
//
// Nesting costs no stack and no bookkeeping per level: the reader keeps
// only the count of values still to read, which each aggregate header
// raises by its element count.
func ReadReply(r *bufio.Reader, dst []byte, max int) ([]byte, error) {
	start := len(dst)
	pending := 1
	for pending > 0 {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return dst, fmt.Errorf("%w: a line longer than %d bytes", ErrProtocol, r.Size())
			}
			if err == io.EOF && (len(dst) > start || len(line) > 0) {
				err = io.ErrUnexpectedEOF // the peer closed in mid-reply
			}
			return dst, err
		}
		if len(line) < 3 || line[len(line)-2] != '\r' {
			return dst, fmt.Errorf("%w: line %q", ErrProtocol, clip(line))
		}
		if len(dst)-start+len(line) > max {
			return dst, ErrReplyTooLarge
		}
		kind, body := line[0], line[1:len(line)-2]
		dst = append(dst, line...)
		pending--
		switch kind {
		case '+', '-', ':', '_', ',', '#', '(':
			// One line, already copied.
		case '$', '=', '!':
			n, ok := parseLen(body)
			if !ok {
				return dst, fmt.Errorf("%w: length %q", ErrProtocol, clip(body))
			}
			if n < 0 { // $-1: RESP2's null bulk string
				if kind != '$' || n != -1 {
					return dst, fmt.Errorf("%w: length %d", ErrProtocol, n)
				}
				continue
			}
			if len(dst)-start+n+2 > max {
				return dst, ErrReplyTooLarge
			}
			if dst, err = readBody(r, dst, n); err != nil {
				return dst, err
			}
		case '*', '~', '%', '|':
			n, ok := parseLen(body)
			if !ok || (n < 0 && (kind != '*' || n != -1)) {
				return dst, fmt.Errorf("%w: count %q", ErrProtocol, clip(body))
			}
			if n < 0 { // *-1: RESP2's null array
				continue
			}
			if kind == '%' || kind == '|' {
				n *= 2
			}
			if kind == '|' { // attributes precede the reply they describe
				n++
			}
			// Every value takes at least 3 bytes ("_\r\n"), so a count
			// this large cannot fit in max.
			if n > max/3 || pending+n > max/3 {
				return dst, ErrReplyTooLarge
			}
			pending += n
		default:
			return dst, fmt.Errorf("%w: type byte %q", ErrProtocol, kind)
		}
	}
	return dst, nil
}

// readBody appends a bulk payload of n bytes and its CR LF.
func readBody(r *bufio.Reader, dst []byte, n int) ([]byte, error) {
	at := len(dst)
	dst = slices.Grow(dst, n+2)[:at+n+2]
	if _, err := io.ReadFull(r, dst[at:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return dst[:at], err
	}
	if dst[at+n] != '\r' || dst[at+n+1] != '\n' {
		return dst, fmt.Errorf("%w: bulk string not ended by CR LF", ErrProtocol)
	}
	return dst, nil
}

// parseLen parses a RESP length or count: an optional '-' and at most 18
// digits (no overflow).
func parseLen(b []byte) (int, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

func clip(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "..."
	}
	return string(b)
}
