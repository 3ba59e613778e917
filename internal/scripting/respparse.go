package scripting

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

// maxReplyNesting bounds how deeply a command's reply may nest arrays, maps
// and sets. Redis's commands nest at most a few levels (XREAD, COMMAND); the
// bound keeps a malformed reply from recursing deeply.
const maxReplyNesting = 64

// errBadReply reports a reply a Caller produced that is not one well-formed
// RESP2 or RESP3 value. It is a bug in the Caller, surfaced to the script as
// an error rather than a panic.
var errBadReply = errors.New("malformed reply from command")

// replyReader converts one RESP2 or RESP3 reply, as a Caller produced it, into
// the Lua value redis.call returns, with Redis's conversions
// (script_lua.c, redisProtocolToLuaType_*):
//
//	integer            → number
//	bulk / verbatim    → string / {verbatim_string={format=, string=}}
//	nil bulk, nil array → false
//	array              → table (1-based)
//	status             → {ok=text}
//	error              → {err=text} (and redis.call raises it)
//	RESP3 null         → nil
//	RESP3 boolean      → boolean
//	RESP3 double       → {double=number}
//	RESP3 big number   → {big_number=text}
//	RESP3 map          → {map={key=value, ...}}
//	RESP3 set          → {set={member=true, ...}}
//	RESP3 attribute    → skipped; the value it annotates is returned
//
// It never reads past its input: every length is checked against the bytes
// left, so a count cannot make it preallocate more than the input could fill.
type replyReader struct {
	L        *lua.LState
	b        []byte
	pos      int
	statuses *statusTables // where status tables come from; nil: fresh ones
}

// parseReply converts b, which must hold exactly one reply. isError reports a
// top-level error reply, which redis.call raises. Status tables come from
// statuses, if not nil.
func parseReply(L *lua.LState, b []byte, statuses *statusTables) (v lua.LValue, isError bool, err error) {
	r := replyReader{L: L, b: b, statuses: statuses}
	if len(b) > 0 && b[0] == '-' {
		isError = true
	}
	v, err = r.value(0)
	if err == nil && r.pos != len(b) {
		err = fmt.Errorf("%w: %d bytes after the reply", errBadReply, len(b)-r.pos)
	}
	return v, isError, err
}

// line returns the bytes from the current position to the next CRLF and
// moves past it.
func (r *replyReader) line() ([]byte, error) {
	i := bytes.Index(r.b[r.pos:], []byte("\r\n"))
	if i < 0 {
		return nil, fmt.Errorf("%w: line without CRLF at byte %d", errBadReply, r.pos)
	}
	l := r.b[r.pos : r.pos+i]
	r.pos += i + 2
	return l, nil
}

// count reads a length line and checks it against the bytes left: every
// element takes at least minBytes bytes. It returns -1 for a RESP2 null.
func (r *replyReader) count(minBytes int) (int, error) {
	l, err := r.line()
	if err != nil {
		return 0, err
	}
	n, ok := parseInt(l)
	if !ok || n < -1 {
		return 0, fmt.Errorf("%w: bad length %q", errBadReply, l)
	}
	if n > int64(len(r.b)-r.pos)/int64(minBytes) {
		return 0, fmt.Errorf("%w: length %d exceeds the %d bytes left", errBadReply, n, len(r.b)-r.pos)
	}
	return int(n), nil
}

// blob reads the payload of a bulk or verbatim string; ok is false for a
// RESP2 null bulk.
func (r *replyReader) blob() (s []byte, ok bool, err error) {
	n, err := r.count(1)
	if err != nil || n < 0 {
		return nil, false, err
	}
	if len(r.b)-r.pos < n+2 || r.b[r.pos+n] != '\r' || r.b[r.pos+n+1] != '\n' {
		return nil, false, fmt.Errorf("%w: bulk of %d bytes not followed by CRLF", errBadReply, n)
	}
	s = r.b[r.pos : r.pos+n]
	r.pos += n + 2
	return s, true, nil
}

// value converts the reply at the current position; depth counts the
// aggregates around it.
func (r *replyReader) value(depth int) (lua.LValue, error) {
	if r.pos >= len(r.b) {
		return nil, fmt.Errorf("%w: truncated", errBadReply)
	}
	if depth > maxReplyNesting {
		return nil, fmt.Errorf("%w: nested more than %d levels", errBadReply, maxReplyNesting)
	}
	t := r.b[r.pos]
	r.pos++
	switch t {
	case '$', '=':
		s, ok, err := r.blob()
		if err != nil || !ok {
			return lua.LFalse, err
		}
		if t == '=' {
			return r.verbatim(s)
		}
		return lua.LString(s), nil
	case '*', '%', '~', '|':
		return r.aggregate(t, depth)
	}
	l, err := r.line()
	if err != nil {
		return nil, err
	}
	return r.simple(t, l)
}

// parseInt parses a RESP integer or length as strconv.ParseInt does in base
// 10, without the allocation of converting l to a string: the short
// decimals every reply carries are parsed here, anything else by strconv.
func parseInt(l []byte) (int64, bool) {
	digits := l
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 { // 18 digits cannot overflow
		n, err := strconv.ParseInt(string(l), 10, 64)
		return n, err == nil
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			n, err := strconv.ParseInt(string(l), 10, 64)
			return n, err == nil
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) < len(l) {
		n = -n
	}
	return n, true
}

// simple converts a reply held on one line.
func (r *replyReader) simple(t byte, l []byte) (lua.LValue, error) {
	switch t {
	case '+':
		if r.statuses != nil {
			return r.statuses.table(r.L, l), nil
		}
		return r.field("ok", lua.LString(l)), nil
	case '-':
		return r.field("err", lua.LString(errorTableText("-"+string(l)))), nil
	case ':':
		n, ok := parseInt(l)
		if !ok {
			return nil, fmt.Errorf("%w: bad integer %q", errBadReply, l)
		}
		if n >= 0 && n < int64(len(smallInts)) {
			return smallInts[n], nil // converting a number to an LValue allocates
		}
		return lua.LNumber(n), nil
	case '_':
		return lua.LNil, nil
	case '#':
		if len(l) != 1 || (l[0] != 't' && l[0] != 'f') {
			return nil, fmt.Errorf("%w: bad boolean %q", errBadReply, l)
		}
		return lua.LBool(l[0] == 't'), nil
	case ',':
		d, ok := parseLuaNumber(string(l))
		if !ok {
			return nil, fmt.Errorf("%w: bad double %q", errBadReply, l)
		}
		return r.field("double", lua.LNumber(d)), nil
	case '(':
		return r.field("big_number", lua.LString(l)), nil
	}
	return nil, fmt.Errorf("%w: unknown type byte %q", errBadReply, t)
}

// verbatim converts a RESP3 verbatim string "fmt:text".
func (r *replyReader) verbatim(s []byte) (lua.LValue, error) {
	if len(s) < 4 || s[3] != ':' {
		return nil, fmt.Errorf("%w: verbatim string without a format", errBadReply)
	}
	inner := r.L.CreateTable(0, 2)
	inner.RawSetString("string", lua.LString(s[4:]))
	inner.RawSetString("format", lua.LString(s[:3]))
	return r.field("verbatim_string", inner), nil
}

// aggregate converts an array, map, set or attribute.
func (r *replyReader) aggregate(t byte, depth int) (lua.LValue, error) {
	minBytes := 3 // the smallest element, "_\r\n"
	if t == '%' || t == '|' {
		minBytes = 6 // a key and a value
	}
	n, err := r.count(minBytes)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		if t != '*' {
			return nil, fmt.Errorf("%w: negative length for %q", errBadReply, t)
		}
		return lua.LFalse, nil
	}
	switch t {
	case '*':
		arr := r.L.CreateTable(n, 0)
		for i := 1; i <= n; i++ {
			v, err := r.value(depth + 1)
			if err != nil {
				return nil, err
			}
			arr.RawSetInt(i, v)
		}
		return arr, nil
	case '|':
		// Redis hides attributes from scripts: skip the pairs, return the
		// value they annotate.
		for i := 0; i < 2*n; i++ {
			if _, err := r.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return r.value(depth)
	}
	inner := r.L.CreateTable(0, n)
	for i := 0; i < n; i++ {
		k, err := r.value(depth + 1)
		if err != nil {
			return nil, err
		}
		var v lua.LValue = lua.LTrue
		if t == '%' {
			if v, err = r.value(depth + 1); err != nil {
				return nil, err
			}
		}
		if usableKey(k) {
			inner.RawSet(k, v)
		}
	}
	name := "map"
	if t == '~' {
		name = "set"
	}
	return r.field(name, inner), nil
}

// usableKey reports whether k can index a Lua table: nil and NaN cannot.
func usableKey(k lua.LValue) bool {
	if k == lua.LNil {
		return false
	}
	if n, ok := k.(lua.LNumber); ok && math.IsNaN(float64(n)) {
		return false
	}
	return true
}

// field returns the one-field table {name=v}.
func (r *replyReader) field(name string, v lua.LValue) *lua.LTable {
	t := r.L.CreateTable(0, 1)
	t.RawSetString(name, v)
	return t
}
