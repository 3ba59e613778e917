package commands_test

import (
	"bufio"
	"fmt"

	"testing"

	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/testserver"
)

// benchRoundTrips sends batches of n pre-encoded commands over one raw TCP
// connection and reads the replies; ns/op is per batch. allocs/op counts the
// whole process, server included, so it shows what the protocol layer
// allocates per batch.
func benchRoundTrips(b *testing.B, n int, command func(i int) []string) {
	benchRoundTripsOn(b, startServer(b, testserver.Def("r", "token_bucket", "1000000000", "1s", "")), nil, n, command)
}

// benchRoundTripsAfter is benchRoundTrips on a connection that first sent
// setup (SCRIPT LOAD, say) and read its reply.
func benchRoundTripsAfter(b *testing.B, setup []string, n int, command func(i int) []string) {
	benchRoundTripsOn(b, startServer(b, testserver.Def("r", "token_bucket", "1000000000", "1s", "")), setup, n, command)
}

// benchRoundTripsOn is benchRoundTripsAfter against ts.
func benchRoundTripsOn(b *testing.B, ts *testserver.Server, setup []string, n int, command func(i int) []string) {
	conn := testserver.DialRaw(b, ts.Addr)
	if setup != nil {
		conn.Write(testserver.EncodeCommand(setup))
		if _, err := testserver.ReadReply(bufio.NewReader(conn)); err != nil {
			b.Fatal(err)
		}
	}
	var req []byte
	for i := range n {
		req = append(req, testserver.EncodeCommand(command(i))...)
	}
	rd := bufio.NewReaderSize(conn, 64<<10)
	readReplies := func() {
		for range n {
			if err := skipReply(rd); err != nil {
				b.Fatal(err)
			}
		}
	}
	conn.Write(req) // warm the connection's buffers
	readReplies()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := conn.Write(req); err != nil {
			b.Fatal(err)
		}
		readReplies()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/cmd")
}

// BenchmarkEndToEnd compares RL.ALLOW with PING, the protocol's floor, both
// unpipelined and as pipelines of 16.
func BenchmarkEndToEnd(b *testing.B) { bothModels(b, benchEndToEnd) }

// bothModels runs a benchmark with servers of each connection model (see
// testserver.Models).
func bothModels(b *testing.B, fn func(b *testing.B)) {
	b.Run("eventloops", fn)
	b.Run("goroutines", fn)
}

func benchEndToEnd(b *testing.B) {
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	allow := func(i int) []string { return []string{"RL.ALLOW", keys[i], "r"} }
	ping := func(int) []string { return []string{"PING"} }
	b.Run("PING/P1", func(b *testing.B) { benchRoundTrips(b, 1, ping) })
	b.Run("RL.ALLOW/P1", func(b *testing.B) { benchRoundTrips(b, 1, allow) })
	b.Run("PING/P16", func(b *testing.B) { benchRoundTrips(b, 16, ping) })
	b.Run("RL.ALLOW/P16", func(b *testing.B) { benchRoundTrips(b, 16, allow) })
	// GETs of a missing key: value replies, which a connection runs one
	// per shard round trip (see session.pendingValue), against RL.ALLOW's
	// one round trip per batch.
	get := func(i int) []string { return []string{"GET", keys[i]} }
	b.Run("GET/P16", func(b *testing.B) { benchRoundTrips(b, 16, get) })
}

// skipReply reads one reply made of one-line values and arrays of them,
// without allocating, so allocs/op is the server's.
func skipReply(rd *bufio.Reader) error {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return err
	}
	if line[0] == '$' && line[1] != '-' {
		_, err := rd.ReadSlice('\n') // a bulk reply's payload (here without CR or LF)
		return err
	}
	if line[0] != '*' {
		return nil
	}
	n, _ := resp.ParseInt(line[1 : len(line)-2])
	for range n {
		if err := skipReply(rd); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkAllowAllEndToEnd compares one RL.ALLOWALL of n pairs with the n
// RL.ALLOW round trips a client would otherwise make one after another.
func BenchmarkAllowAllEndToEnd(b *testing.B) { bothModels(b, benchAllowAll) }

func benchAllowAll(b *testing.B) {
	for _, n := range []int{2, 3} {
		b.Run(fmt.Sprintf("RL.ALLOWALL/%d-pairs", n), func(b *testing.B) {
			benchRoundTrips(b, 1, func(int) []string {
				args := []string{"RL.ALLOWALL"}
				for i := range n {
					args = append(args, fmt.Sprintf("key-%d", i), "r")
				}
				return args
			})
		})
		b.Run(fmt.Sprintf("RL.ALLOW/%d-round-trips", n), func(b *testing.B) {
			ts := startServer(b, testserver.Def("r", "token_bucket", "1000000000", "1s", ""))
			conn := testserver.DialRaw(b, ts.Addr)
			rd := bufio.NewReaderSize(conn, 64<<10)
			var reqs [][]byte
			for i := range n {
				reqs = append(reqs, testserver.EncodeCommand([]string{"RL.ALLOW", fmt.Sprintf("key-%d", i), "r"}))
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, req := range reqs {
					conn.Write(req)
					if err := skipReply(rd); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
