package config

import (
	"fmt"
	"strconv"
)

// Error is a configuration file's fault. Msg is envoyproxy/ratelimit's text
// for the same fault where it has one (its tests and its users' log
// searches know those words); Line locates it when known.
type Error struct {
	File string
	Line int // 1-based; 0 when the fault has no one line
	Msg  string
}

// Error reads "<file>: <msg>" as envoyproxy/ratelimit words it, followed by
// " (line N)" when the line is known.
func (e *Error) Error() string {
	if e.Line > 0 {
		return e.File + ": " + e.Msg + " (line " + strconv.Itoa(e.Line) + ")"
	}
	return e.File + ": " + e.Msg
}

func errorAt(file string, line int, format string, args ...any) *Error {
	return &Error{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
}
