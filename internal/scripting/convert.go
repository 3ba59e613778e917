package scripting

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// errReplyTooLarge stops a conversion whose output passed the limit.
var errReplyTooLarge = errors.New("reply too large")

// replyWriter converts the value a script returns into a RESP reply as Redis
// does (script_lua.c, luaReplyToRedisReply):
//
//	string                      → bulk string
//	number                      → integer, truncated toward zero
//	true                        → integer 1 (RESP3 true after redis.setresp(3))
//	false                       → null (RESP3 false after redis.setresp(3))
//	nil, function, ...          → null
//	{err="..."}                 → error reply
//	{ok="..."}                  → status reply
//	{double=n}                  → RESP3 double (bulk string under RESP2)
//	{big_number="..."}          → RESP3 big number (bulk string under RESP2)
//	{verbatim_string={format=, string=}} → RESP3 verbatim (bulk under RESP2)
//	{map={...}}                 → RESP3 map (flat array under RESP2)
//	{set={...}}                 → RESP3 set (array under RESP2)
//	any other table             → array of t[1], t[2], ... up to the first nil
//
// The special fields are looked up with rawget, in that order, whatever
// protocol is in use. Tables nested deeper than maxDepth become the error
// "reached lua stack limit" in their place, as Redis's Lua stack limit does
// for a table that contains itself.
type replyWriter struct {
	proto      int // the client's protocol, 2 or 3
	scriptResp int // the script's redis.setresp, which decides how booleans convert
	maxDepth   int
	limit      int // the most bytes the reply may take
	start      int // where the reply began in dst
}

// write appends v's reply to dst.
func (w *replyWriter) write(dst []byte, v lua.LValue, depth int) ([]byte, error) {
	if len(dst)-w.start > w.limit {
		return dst, errReplyTooLarge
	}
	switch v := v.(type) {
	case lua.LString:
		if len(dst)-w.start+len(v) > w.limit {
			return dst, errReplyTooLarge
		}
		return appendBulk(dst, string(v)), nil
	case lua.LNumber:
		return appendPrefixed(dst, ':', toInteger(float64(v))), nil
	case lua.LBool:
		return w.bool(dst, bool(v)), nil
	case *lua.LTable:
		if depth >= w.maxDepth {
			return append(dst, "-ERR reached lua stack limit\r\n"...), nil
		}
		return w.table(dst, v, depth)
	}
	return w.null(dst), nil
}

func (w *replyWriter) null(dst []byte) []byte {
	if w.proto == 2 {
		return append(dst, "$-1\r\n"...)
	}
	return append(dst, "_\r\n"...)
}

func (w *replyWriter) bool(dst []byte, b bool) []byte {
	switch {
	case w.scriptResp == 2 && b:
		return append(dst, ":1\r\n"...)
	case w.scriptResp == 2:
		return w.null(dst)
	case w.proto == 2 && b:
		return append(dst, ":1\r\n"...)
	case w.proto == 2:
		return append(dst, ":0\r\n"...)
	case b:
		return append(dst, "#t\r\n"...)
	}
	return append(dst, "#f\r\n"...)
}

// table converts a table: one of the special one-field forms, else an array.
func (w *replyWriter) table(dst []byte, t *lua.LTable, depth int) ([]byte, error) {
	if s, ok := t.RawGetString("err").(lua.LString); ok {
		dst = append(dst, '-')
		dst = append(dst, replyLine(strings.TrimRight(string(s), "\r\n"))...)
		return append(dst, "\r\n"...), nil
	}
	if s, ok := t.RawGetString("ok").(lua.LString); ok {
		dst = append(dst, '+')
		dst = append(dst, replyLine(string(s))...)
		return append(dst, "\r\n"...), nil
	}
	if d, ok := t.RawGetString("double").(lua.LNumber); ok {
		return w.double(dst, float64(d)), nil
	}
	if s, ok := t.RawGetString("big_number").(lua.LString); ok {
		if w.proto == 2 {
			return appendBulk(dst, replyLine(string(s))), nil
		}
		dst = append(dst, '(')
		dst = append(dst, replyLine(string(s))...)
		return append(dst, "\r\n"...), nil
	}
	if vt, ok := t.RawGetString("verbatim_string").(*lua.LTable); ok {
		format, fok := vt.RawGetString("format").(lua.LString)
		text, tok := vt.RawGetString("string").(lua.LString)
		if fok && tok {
			return w.verbatim(dst, string(format), string(text)), nil
		}
	}
	if m, ok := t.RawGetString("map").(*lua.LTable); ok {
		return w.mapOrSet(dst, m, true, depth)
	}
	if s, ok := t.RawGetString("set").(*lua.LTable); ok {
		return w.mapOrSet(dst, s, false, depth)
	}
	return w.array(dst, t, depth)
}

// array writes t[1], t[2], ... up to the first nil, never #t: a script's
// {nil, 2} is an empty array in Redis.
func (w *replyWriter) array(dst []byte, t *lua.LTable, depth int) ([]byte, error) {
	n := 0
	for t.RawGetInt(n+1) != lua.LNil {
		n++
	}
	dst = appendPrefixed(dst, '*', int64(n))
	var err error
	for i := 1; i <= n && err == nil; i++ {
		dst, err = w.write(dst, t.RawGetInt(i), depth+1)
	}
	return dst, err
}

// mapOrSet writes a {map=...} (keys and values) or {set=...} (keys).
func (w *replyWriter) mapOrSet(dst []byte, t *lua.LTable, isMap bool, depth int) ([]byte, error) {
	n := 0
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		n++
	}
	switch {
	case w.proto == 2 && isMap:
		dst = appendPrefixed(dst, '*', int64(2*n))
	case w.proto == 2:
		dst = appendPrefixed(dst, '*', int64(n))
	case isMap:
		dst = appendPrefixed(dst, '%', int64(n))
	default:
		dst = appendPrefixed(dst, '~', int64(n))
	}
	var err error
	for k, v := t.Next(lua.LNil); k != lua.LNil && err == nil; k, v = t.Next(k) {
		dst, err = w.write(dst, k, depth+1)
		if isMap && err == nil {
			dst, err = w.write(dst, v, depth+1)
		}
	}
	return dst, err
}

// double writes a {double=n}: a RESP3 double, or its %.17g text as a bulk
// string under RESP2.
func (w *replyWriter) double(dst []byte, d float64) []byte {
	var buf [32]byte
	text := appendNumber17(buf[:0], d)
	if w.proto == 2 {
		return appendBulk(dst, string(text))
	}
	dst = append(dst, ',')
	dst = append(dst, text...)
	return append(dst, "\r\n"...)
}

// verbatim writes a RESP3 verbatim string, its format cut or padded with
// spaces to three bytes as Redis does, or a bulk string under RESP2.
func (w *replyWriter) verbatim(dst []byte, format, text string) []byte {
	if w.proto == 2 {
		return appendBulk(dst, text)
	}
	if i := strings.IndexByte(format, 0); i >= 0 {
		format = format[:i]
	}
	format = (format + "   ")[:3]
	dst = appendPrefixed(dst, '=', int64(len(text)+4))
	dst = append(dst, format...)
	dst = append(dst, ':')
	dst = append(dst, text...)
	return append(dst, "\r\n"...)
}

// appendPrefixed appends a type byte, an integer and CRLF (":5", "*2", "$3").
func appendPrefixed(dst []byte, prefix byte, n int64) []byte {
	dst = append(dst, prefix)
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, "\r\n"...)
}

// appendBulk appends s as a bulk string.
func appendBulk(dst []byte, s string) []byte {
	dst = appendPrefixed(dst, '$', int64(len(s)))
	dst = append(dst, s...)
	return append(dst, "\r\n"...)
}

// appendErrorReply appends an error reply line for text.
func appendErrorReply(dst []byte, text string) []byte {
	dst = append(dst, '-')
	dst = append(dst, replyLine(text)...)
	return append(dst, "\r\n"...)
}

// replyTooLarge is the error for a script reply above limit bytes.
func replyTooLarge(limit int) *Error {
	return &Error{fmt.Sprintf("ERR the script's reply exceeds %d bytes", limit)}
}
