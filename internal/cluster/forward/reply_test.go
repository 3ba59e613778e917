package forward

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadReply(t *testing.T) {
	valid := []string{
		"+OK\r\n",
		"-MOVED 12182 127.0.0.1:17003\r\n",
		":-42\r\n",
		"$5\r\nhello\r\n",
		"$0\r\n\r\n",
		"$-1\r\n",
		"$6\r\na\r\nb\r\n\r\n", // CR LF inside a bulk string
		"*-1\r\n",
		"*0\r\n",
		"*2\r\n$1\r\na\r\n*2\r\n:1\r\n*1\r\n+deep\r\n",
		"_\r\n",
		",3.14\r\n",
		"#t\r\n",
		"(12345678901234567890\r\n",
		"=15\r\ntxt:Some string\r\n",
		"!9\r\nSYNTAX no\r\n",
		"%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n%0\r\n",
		"~3\r\n:1\r\n:2\r\n:3\r\n",
		"|1\r\n+key\r\n+value\r\n:7\r\n", // an attribute, then the reply
		"*3\r\n*3\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:17001\r\n$3\r\nabc\r\n%0\r\n_\r\n_\r\n",
	}
	for _, reply := range valid {
		// The reader must stop at the reply's end and leave the next one.
		r := bufio.NewReader(strings.NewReader(reply + "+NEXT\r\n"))
		got, err := ReadReply(r, []byte("prefix"), 1<<20)
		if err != nil || string(got) != "prefix"+reply {
			t.Errorf("%q: got %q, %v", reply, got, err)
			continue
		}
		if rest, _ := io.ReadAll(r); string(rest) != "+NEXT\r\n" {
			t.Errorf("%q: left %q", reply, rest)
		}
	}
	bad := []struct {
		in   string
		want error
	}{
		{"", io.EOF},
		{"+OK", io.ErrUnexpectedEOF},
		{"*2\r\n:1\r\n", io.ErrUnexpectedEOF},
		{"$5\r\nhel", io.ErrUnexpectedEOF},
		{"$5\r\nhello", io.ErrUnexpectedEOF},
		{"+OK\n", ErrProtocol},
		{"\r\n", ErrProtocol},
		{"?x\r\n", ErrProtocol},
		{">2\r\n+a\r\n+b\r\n", ErrProtocol},
		{"$abc\r\n", ErrProtocol},
		{"$-2\r\n", ErrProtocol},
		{"=-1\r\n", ErrProtocol},
		{"%-1\r\n", ErrProtocol},
		{"*-3\r\n", ErrProtocol},
		{"$99999999999999999999\r\n", ErrProtocol},
		{"$5\r\nhelloXY", ErrProtocol},
		{"$2000\r\n" + strings.Repeat("x", 2000) + "\r\n", ErrReplyTooLarge},
		{"*1000\r\n", ErrReplyTooLarge},
		{"%400\r\n", ErrReplyTooLarge},
		{"*300\r\n" + strings.Repeat(":1\r\n", 300), ErrReplyTooLarge},
		{"+" + strings.Repeat("x", 20000) + "\r\n", ErrProtocol}, // a line longer than the reader's buffer
	}
	for _, tt := range bad {
		r := bufio.NewReaderSize(strings.NewReader(tt.in), 4096)
		if _, err := ReadReply(r, nil, 1024); !errors.Is(err, tt.want) {
			t.Errorf("%.40q: error %v, want %v", tt.in, err, tt.want)
		}
	}
}

// TestReadReplyCaptures: every reply captured from redis-server 7.0.15
// reads as exactly one reply.
func TestReadReplyCaptures(t *testing.T) {
	files, _ := filepath.Glob("../testdata/redis-7.0.15/*.resp[23]")
	if len(files) == 0 {
		t.Fatal("no captures found")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadReply(bufio.NewReader(bytes.NewReader(b)), nil, 1<<20)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: read %d of %d bytes, %v", f, len(got), len(b), err)
		}
	}
}

// FuzzReadReply: any bytes are read as a prefix of themselves or refused,
// never more than the limit, without panicking.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "*2\r\n$1\r\na\r\n%1\r\n:1\r\n_\r\n", "|1\r\n+a\r\n+b\r\n:1\r\n", "$-1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 256
		got, err := ReadReply(bufio.NewReaderSize(bytes.NewReader(in), 64), nil, limit)
		if !bytes.HasPrefix(in, got) {
			t.Fatalf("output %q is not a prefix of the input", got)
		}
		if err == nil && len(got) > limit {
			t.Fatalf("read %d bytes, limit %d", len(got), limit)
		}
	})
}
