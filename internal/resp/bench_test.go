package resp

import (
	"bufio"
	"fmt"

	"testing"
)

// benchRoundTrips sends batches of n pre-encoded commands over one raw TCP
// connection and reads the replies; ns/op is per batch. allocs/op counts the
// whole process, server included, so it shows what the protocol layer
// allocates per batch.
func benchRoundTrips(b *testing.B, n int, command func(i int) []string) {
	ts := startServer(b, def(b, "r", "token_bucket", "1000000000", "1s", ""))
	conn := dialRaw(b, ts.addr)
	var req []byte
	for i := range n {
		req = append(req, encodeCommand(command(i))...)
	}
	rd := bufio.NewReaderSize(conn, 64<<10)
	// Every reply here is either "+PONG\r\n" or an array of six integers;
	// reading line by line and counting replies avoids a client-side parser.
	readReplies := func() {
		for range n {
			line, err := rd.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if line[0] == '*' {
				for range 6 {
					if _, err := rd.ReadSlice('\n'); err != nil {
						b.Fatal(err)
					}
				}
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
func BenchmarkEndToEnd(b *testing.B) {
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
}
