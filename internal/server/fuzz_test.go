package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/testserver"
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
	ts := testserver.Start(f, testserver.Options{Shards: 2, MaxKeys: 10000, Model: true,
		Limits: resp.Limits{MaxBulkLen: 1 << 16, MaxArgs: 64, QueryBufferLimit: 1 << 20, OutputLimit: 1 << 20}})
	f.Fuzz(func(t *testing.T, data []byte) {
		ts.Server.ServeStream(bytes.NewReader(data))
		// The keyspace still answers.
		if r := ts.Server.ServeStream(strings.NewReader("DBSIZE\r\n")); !bytes.HasPrefix(r.Replies, []byte(":")) {
			t.Fatalf("DBSIZE after the input answered %q", r.Replies)
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
			if args, err := testserver.SplitWords(strings.TrimPrefix(line, "> ")); err == nil && strings.HasPrefix(line, "> ") {
				pipeline = append(pipeline, testserver.EncodeCommand(args)...)
			}
		}
		seeds = append(seeds, pipeline)
	}
	seeds = append(seeds, []byte("PING\r\nRL.ALLOW k api 3\r\n"), []byte("*1\r\n$4\r\nPING"), []byte("*-1\r\n"), []byte("\"unbalanced\r\n"))
	return seeds
}
