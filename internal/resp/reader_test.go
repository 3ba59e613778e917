package resp

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// oneByteReader delivers its input a byte at a time, the worst split a
// network can make.
type oneByteReader struct{ b []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	p[0] = r.b[0]
	r.b = r.b[1:]
	return 1, nil
}

func collect(t *testing.T, rd *Reader) ([]string, error) {
	t.Helper()
	var got []string
	for {
		cmds, err := rd.Next()
		if err != nil {
			return got, err
		}
		for _, c := range cmds {
			got = append(got, fmt.Sprintf("%q", c))
		}
	}
}

func TestReaderParsesWhateverTheSplit(t *testing.T) {
	input := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nv\r\nx!\r\n" + // a value holding CRLF
		"PING\r\n" + "  ECHO   \"a b\\n\"  'c d'\n" + "*0\r\n" +
		"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"
	want := []string{`["SET" "k" "v\r\nx!"]`, `["PING"]`, `["ECHO" "a b\n" "c d"]`, `["ECHO" ""]`}
	for name, src := range map[string]io.Reader{"whole": bytes.NewReader([]byte(input)), "byte by byte": &oneByteReader{[]byte(input)}} {
		got, err := collect(t, NewReader(src, &DefaultLimits))
		if err != io.EOF || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v (%v), want %v", name, got, err, want)
		}
	}
}

func TestReaderRefusesBadInput(t *testing.T) {
	lim := Limits{MaxBulkLen: 10, MaxArgs: 3, QueryBufferLimit: 64 << 10}
	for input, want := range map[string]string{
		"*1\r\n$11\r\n":           "Protocol error: invalid bulk length (more than --proto-max-bulk-len 10 bytes)",
		"*4\r\n":                  "Protocol error: invalid multibulk length (more than --max-args 3 arguments)",
		"*x\r\n":                  "Protocol error: invalid multibulk length",
		"*1\n$4\nPING\n":          "Protocol error: invalid multibulk length",
		"*1\r\n$4\rPING\r\n":      "Protocol error: invalid bulk length",
		"*1\r\n$4\r\nPINGxx":      "Protocol error: invalid bulk length",
		"*1\r\n+PING\r\n":         "Protocol error: expected '+', got '+'",
		"ECHO \"unterminated\r\n": "Protocol error: unbalanced quotes in request",
		"ECHO \"a\"b\r\n":         "Protocol error: unbalanced quotes in request",
	} {
		_, err := collect(t, NewReader(bytes.NewReader([]byte(input)), &lim))
		if want == "Protocol error: expected '+', got '+'" {
			want = "Protocol error: expected '$', got '+'"
		}
		if err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", input, err, want)
		}
	}
}

func TestReaderAllocatesNothingOnceWarm(t *testing.T) {
	pipeline := bytes.Repeat([]byte("*3\r\n$8\r\nRL.ALLOW\r\n$6\r\nuser:1\r\n$5\r\nburst\r\n"), 16)
	src := bytes.NewReader(pipeline)
	rd := NewReader(src, &DefaultLimits)
	round := func() {
		src.Reset(pipeline)
		if cmds, err := rd.Next(); err != nil || len(cmds) != 16 {
			t.Fatalf("%d commands, %v", len(cmds), err)
		}
	}
	round()
	if n := testing.AllocsPerRun(100, round); n != 0 {
		t.Fatalf("a warm pipeline of 16 costs %v allocations", n)
	}
}

func TestReaderGivesBackABigBuffer(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 3<<20)
	input := append([]byte(fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n", len(big))), big...)
	input = append(input, "\r\nPING\r\n"...)
	rd := NewReader(bytes.NewReader(input), &DefaultLimits)
	if cmds, err := rd.Next(); err != nil || len(cmds) != 2 || len(cmds[0][1]) != len(big) || string(cmds[1][0]) != "PING" {
		t.Fatalf("big command then PING: %v", err)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("then: %v", err)
	}
	if len(rd.buf) != initialReadBuffer {
		t.Fatalf("buffer still %d bytes after the big command", len(rd.buf))
	}
}

func TestReaderRunsGoodCommandsBeforeABadOne(t *testing.T) {
	rd := NewReader(bytes.NewReader([]byte("PING\r\nECHO hi\r\n*1\r\n$x\r\n")), &DefaultLimits)
	cmds, err := rd.Next()
	if err != nil || len(cmds) != 2 {
		t.Fatalf("first batch: %d commands, %v", len(cmds), err)
	}
	if _, err := rd.Next(); err == nil || err.Error() != "Protocol error: invalid bulk length" {
		t.Fatalf("then: %v", err)
	}
}
