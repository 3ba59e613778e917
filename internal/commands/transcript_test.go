package commands_test

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
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
func TestTranscripts(t *testing.T) { testserver.Models(t, testTranscripts) }

func testTranscripts(t *testing.T) {
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
	conn := testserver.DialRaw(t, ts.Addr)
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
			ts.Clock.Advance(d)
			out.WriteString(line + "\n")
		case strings.HasPrefix(line, "> "):
			args, err := testserver.SplitWords(line[2:])
			if err != nil {
				t.Fatalf("%s:%d: %v", file, i+1, err)
			}
			var want []string
			for i+1 < len(lines) && !isDirective(lines[i+1]) {
				i++
				want = append(want, lines[i])
			}
			conn.Write(testserver.EncodeCommand(args))
			got, err := testserver.ReadReply(rd)
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
