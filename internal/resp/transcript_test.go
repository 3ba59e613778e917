package resp

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/transcripts/*.txt with the replies the server gives now")

// TestTranscripts replays testdata/transcripts/*.txt byte for byte. Each file
// is a conversation on one connection against the built-in rules:
//
//	# a comment
//	> RL.ALLOW user:1 burst      a command; "quoted" words may hold spaces
//	*6                           the exact reply, one protocol line per line
//	:1
//	!advance 200ms               moves the injected clock
//
// Run with -rewrite to regenerate the replies after a deliberate change,
// then review the diff.
func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/transcripts/*.txt")
	if len(files) == 0 {
		t.Fatal("no transcripts found")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { replay(t, file) })
	}
}

func replay(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t)
	conn := dialRaw(t, ts.addr)
	rd := bufio.NewReader(conn)
	var out strings.Builder
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "#") || line == "":
			out.WriteString(line + "\n")
		case strings.HasPrefix(line, "!advance "):
			d, err := time.ParseDuration(strings.TrimPrefix(line, "!advance "))
			if err != nil {
				t.Fatalf("%s:%d: %v", file, i+1, err)
			}
			ts.clock.advance(d)
			out.WriteString(line + "\n")
		case strings.HasPrefix(line, "> "):
			args, err := splitWords(line[2:])
			if err != nil {
				t.Fatalf("%s:%d: %v", file, i+1, err)
			}
			var want []string
			for i+1 < len(lines) && !isDirective(lines[i+1]) {
				i++
				want = append(want, lines[i])
			}
			conn.Write(encodeCommand(args))
			got, err := readReply(rd)
			if err != nil {
				t.Fatalf("%s:%d: %s: reading reply: %v", file, i+1, line, err)
			}
			out.WriteString(line + "\n")
			for _, g := range got {
				out.WriteString(g + "\n")
			}
			if !*rewrite && strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", filepath.Base(file), line, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		default:
			t.Fatalf("%s:%d: reply line with no command before it: %q", file, i+1, line)
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func isDirective(line string) bool {
	return line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "> ") || strings.HasPrefix(line, "!")
}

// splitWords splits a command line on spaces; a word in double quotes is a
// Go string literal and may hold spaces and escapes.
func splitWords(s string) ([]string, error) {
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

func encodeCommand(args []string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// readReply reads one whole reply (RESP2 or RESP3, nested to any depth) and
// returns its protocol lines without their CRLF.
func readReply(rd *bufio.Reader) ([]string, error) {
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
		sub, err := readReply(rd)
		if err != nil {
			return nil, err
		}
		lines = append(lines, sub...)
	}
	return lines, nil
}
