package owner

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/rlserver/rlserver/internal/algorithms"
)

// replyError is an error reply of the owner, as it sent it.
type replyError struct{ text string }

func (e *replyError) Error() string { return e.text }

// redirect reports whether the owner sent the request elsewhere.
func (e *replyError) redirect() bool {
	return len(e.text) > 5 && (e.text[:6] == "MOVED " || e.text[:4] == "ASK ")
}

var errMalformed = errors.New("malformed reply")

// parseDecisions reads n decisions from a RESP2 reply of RL.ALLOW or
// RL.PEEK (n 1: six integers) or, group, RL.ALLOWALL (the overall flag,
// then n arrays of six), in RESP2: allowed, limit, remaining, retry after (ms),
// reset after (ms), delay (ms).
func parseDecisions(reply []byte, n int, group bool) ([]algorithms.Decision, error) {
	if len(reply) > 0 && reply[0] == '-' {
		return nil, &replyError{string(bytes.TrimRight(reply[1:], "\r\n"))}
	}
	p := parser{b: reply}
	if group {
		// RL.ALLOWALL: *(n+1), :flag, then n decisions.
		if p.header('*') != n+1 {
			return nil, errMalformed
		}
		p.integer()
	}
	out := make([]algorithms.Decision, n)
	for i := range out {
		if p.header('*') != 6 {
			return nil, errMalformed
		}
		d := &out[i]
		d.Allowed = p.integer() == 1
		d.Limit, d.Remaining = p.integer(), p.integer()
		d.RetryAfter, d.ResetAfter, d.Delay = p.integer()*ms, p.integer()*ms, p.integer()*ms
	}
	if p.err != nil || len(p.b) != 0 {
		return nil, fmt.Errorf("%w: %q", errMalformed, clip(reply))
	}
	return out, nil
}

// parser reads RESP2 headers and integers; the first problem sticks in err.
type parser struct {
	b   []byte
	err error
}

// line reads a line starting with prefix and returns the rest of it.
func (p *parser) line(prefix byte) []byte {
	i := bytes.Index(p.b, []byte("\r\n"))
	if p.err != nil || i < 1 || p.b[0] != prefix {
		p.err = errMalformed
		return nil
	}
	l := p.b[1:i]
	p.b = p.b[i+2:]
	return l
}

func (p *parser) number(prefix byte) int64 {
	l := p.line(prefix)
	if p.err != nil {
		return 0
	}
	v, err := strconv.ParseInt(string(l), 10, 64)
	if err != nil {
		p.err = errMalformed
	}
	return v
}

func (p *parser) header(prefix byte) int { return int(p.number(prefix)) }
func (p *parser) integer() int64         { return p.number(':') }

// clip shortens a reply for an error message.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
