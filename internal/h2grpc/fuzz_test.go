package h2grpc

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// FuzzServerFrames feeds a connection, after the client's preface, the
// fuzzer's bytes as frames: whatever they are, the server must not panic,
// must end the connection or keep serving it, and Stop must then return
// with every goroutine of the server gone (the race detector and the
// test's own deadline catch the rest).
func FuzzServerFrames(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewServer(Options{Workers: 1, MaxConcurrentStreams: 8, MaxMessageBytes: 1 << 10, MaxHeaderListBytes: 1 << 10,
			MaxResets: 20, HandshakeTimeout: 2 * time.Second, KeepaliveTime: time.Second, KeepaliveTimeout: time.Second})
		hs := health.NewServer()
		healthpb.RegisterHealthServer(s, hs)
		cli, srv := net.Pipe()
		cli.SetDeadline(time.Now().Add(5 * time.Second))
		read := make(chan struct{})
		go func() {
			defer close(read)
			io.Copy(io.Discard, cli)
		}()
		c := s.startConn(srv)
		io.WriteString(cli, http2.ClientPreface)
		cli.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0}) // an empty SETTINGS
		cli.Write(data)
		cli.Close()
		<-read
		s.Stop()
		hs.Shutdown()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.buffered < 0 || c.active < 0 || len(c.streams) > int(s.opts.MaxConcurrentStreams) {
			t.Fatalf("after the connection: %d bytes buffered, %d streams active, %d in the table", c.buffered, c.active, len(c.streams))
		}
	})
}

// fuzzSeeds are well-formed exchanges: a health Check, a Watch reset by
// the client, a ping, a window update, and a large header block split over
// CONTINUATION frames.
func fuzzSeeds() [][]byte {
	var out [][]byte
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	block := func(path string, extra ...string) []byte {
		hbuf.Reset()
		fields := append([]string{":method", "POST", ":scheme", "http", ":path", path, ":authority", "x", "content-type", "application/grpc"}, extra...)
		for i := 0; i < len(fields); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return bytes.Clone(hbuf.Bytes())
	}
	msg := []byte{0, 0, 0, 0, 2, 0x0a, 0x00}
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("/grpc.health.v1.Health/Check"), EndHeaders: true})
	fr.WriteData(1, true, msg)
	out = append(out, bytes.Clone(b.Bytes()))
	b.Reset()
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("/grpc.health.v1.Health/Watch", "grpc-timeout", "1S"), EndHeaders: true})
	fr.WriteData(1, true, msg)
	fr.WriteRSTStream(1, http2.ErrCodeCancel)
	fr.WritePing(false, [8]byte{1})
	fr.WriteWindowUpdate(0, 1000)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	out = append(out, bytes.Clone(b.Bytes()))
	b.Reset()
	big := block("/grpc.health.v1.Health/Check", "x-pad", string(bytes.Repeat([]byte{'p'}, 600)))
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: big[:100]})
	fr.WriteContinuation(3, true, big[100:])
	fr.WriteData(3, false, msg[:3])
	fr.WriteData(3, true, msg[3:])
	out = append(out, bytes.Clone(b.Bytes()))
	return out
}
