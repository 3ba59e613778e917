package testserver

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// SplitWords splits a command line on spaces; a word in double quotes is a
// Go string literal and may hold spaces and escapes.
func SplitWords(s string) ([]string, error) {
	var words []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, err
			}
			w, _ := strconv.Unquote(q)
			words = append(words, w)
			s = s[len(q):]
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		words = append(words, w)
		s = rest
	}
	return words, nil
}

// EncodeCommand encodes args as one RESP command.
func EncodeCommand(args []string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// ReadReply reads one whole reply (RESP2 or RESP3, nested to any depth) and
// returns its protocol lines without their CRLF.
func ReadReply(rd *bufio.Reader) ([]string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	lines := []string{line}
	if line == "" {
		return lines, fmt.Errorf("empty line")
	}
	n, _ := strconv.Atoi(line[1:])
	switch line[0] {
	case '$', '=', '!': // bulk, verbatim, bulk error: n bytes then CRLF
		if n < 0 {
			return lines, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		return append(lines, strings.Split(string(buf[:n]), "\r\n")...), nil
	case '*', '~', '>': // aggregates of n replies
		if n < 0 {
			return lines, nil
		}
	case '%', '|': // maps and attributes: n pairs
		n *= 2
	default: // one-line types
		return lines, nil
	}
	for range n {
		sub, err := ReadReply(rd)
		if err != nil {
			return nil, err
		}
		lines = append(lines, sub...)
	}
	return lines, nil
}
