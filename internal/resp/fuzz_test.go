package resp

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// FuzzConnection feeds arbitrary bytes through the real command path: the
// request parser with its limits, the command table and every handler,
// against a live keyspace. It must never panic, and the keyspace
// must keep answering afterwards. The server is not listening: bytes go
// straight to a connection's state, so each input runs in microseconds.
func FuzzConnection(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	store, _ := rules.NewStore(rules.Defaults())
	clk := &testClock{}
	clk.ns.Store(t0)
	ks := keyspace.New(keyspace.Config{Shards: 2, Clock: clk.now, Rules: store, MaxKeys: 10000})
	f.Cleanup(ks.Stop)
	srv := New(Config{Rules: store, Shards: ks, Clock: clk.now, Version: "fuzz",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	limits := Limits{MaxBulkLen: 1 << 16, MaxArgs: 64, QueryBufferLimit: 1 << 20, OutputLimit: 1 << 20}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := srv.newClient("fuzz", "fuzz", bytes.NewReader(data), srv.newBatch())
		c.rd.lim = &limits
		for {
			cmds, err := c.rd.next()
			if err != nil {
				break // end of input, or a protocol error that closes the connection
			}
			c.execute(cmds)
			c.batch.flush()
			if !c.sendable() || c.wrote() == closeConn {
				break
			}
		}
		if c.inMulti {
			c.endMulti()
		}
		// The keyspace still answers.
		probe := srv.newClient("probe", "probe", bytes.NewReader(nil), srv.newBatch())
		probe.execute([][][]byte{{[]byte("DBSIZE")}})
		probe.batch.flush()
		if !bytes.HasPrefix(probe.out.b, []byte(":")) {
			t.Fatalf("DBSIZE after the input answered %q", probe.out.b)
		}
	})
}

// fuzzSeeds turns the protocol transcripts into seed inputs: each file's
// commands, RESP-encoded, as one pipeline.
func fuzzSeeds(f *testing.F) [][]byte {
	files, _ := filepath.Glob("../../testdata/transcripts/*.txt")
	var seeds [][]byte
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var pipeline []byte
		for _, line := range strings.Split(string(data), "\n") {
			if args, err := splitWords(strings.TrimPrefix(line, "> ")); err == nil && strings.HasPrefix(line, "> ") {
				pipeline = append(pipeline, encodeCommand(args)...)
			}
		}
		seeds = append(seeds, pipeline)
	}
	seeds = append(seeds, []byte("PING\r\nRL.ALLOW k api 3\r\n"), []byte("*1\r\n$4\r\nPING"), []byte("*-1\r\n"), []byte("\"unbalanced\r\n"))
	return seeds
}

// FuzzParseInt checks the argument parser against strconv: it accepts
// exactly the canonical decimal forms Redis accepts, with the same value.
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "1", "-1", "007", "+1", " 1", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "", "-", "1e3", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseInt([]byte(s))
		want, err := strconv.ParseInt(s, 10, 64)
		canonical := err == nil && strconv.FormatInt(want, 10) == s
		if ok != canonical || (ok && got != want) {
			t.Fatalf("parseInt(%q) = %d, %v; strconv says %d, %v (canonical %v)", s, got, ok, want, err, canonical)
		}
	})
}
