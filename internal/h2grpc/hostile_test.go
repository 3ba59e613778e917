package h2grpc_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"golang.org/x/sys/unix"

	"github.com/rlserver/rlserver/internal/h2grpc"
)

// raw is a hand-driven HTTP/2 client, for what grpc-go's client never
// sends.
type raw struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	henc *hpack.Encoder
}

// dialRaw connects and sends the preface and an empty SETTINGS.
func (f *fixture) dialRaw() *raw {
	f.t.Helper()
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	r := &raw{t: f.t, nc: nc, fr: http2.NewFramer(nc, nc)}
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.henc = hpack.NewEncoder(&r.hbuf)
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		f.t.Fatal(err)
	}
	r.fr.WriteSettings()
	return r
}

// headers opens stream id on method with extra header fields; the block
// is split into frames of at most 16 KiB.
func (r *raw) headers(id uint32, method string, end bool, extra ...string) {
	r.hbuf.Reset()
	fields := append([]string{":method", "POST", ":scheme", "http", ":path", method, ":authority", "x", "content-type", "application/grpc", "te", "trailers"}, extra...)
	for i := 0; i < len(fields); i += 2 {
		r.henc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	block := r.hbuf.Bytes()
	for first := true; first || len(block) > 0; first = false {
		n := min(len(block), 16384)
		frag := block[:n]
		block = block[n:]
		if first {
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: end, EndHeaders: len(block) == 0})
		} else {
			r.fr.WriteContinuation(id, len(block) == 0, frag)
		}
	}
}

// message sends one gRPC message (flag byte, length, body) on id.
func (r *raw) message(id uint32, flag byte, body []byte, end bool) {
	n := len(body)
	r.fr.WriteData(id, end, append([]byte{flag, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...))
}

// until reads frames until match returns true; it fails the test if the
// connection ends first.
func (r *raw) until(what string, match func(http2.Frame) bool) {
	r.t.Helper()
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			r.t.Fatalf("waiting for %s: %v", what, err)
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			r.fr.WritePing(true, p.Data) // as every client does
		}
		if match(f) {
			return
		}
	}
}

// status waits for stream id's trailers and returns grpc-status and
// grpc-message.
func (r *raw) status(id uint32) (code, msg string) {
	r.t.Helper()
	r.until("the trailers of stream "+string(rune('0'+id%10)), func(f http2.Frame) bool {
		h, ok := f.(*http2.MetaHeadersFrame)
		if !ok || h.StreamID != id || !h.StreamEnded() {
			return false
		}
		code, msg = h.PseudoValue("status"), ""
		for _, hf := range h.RegularFields() {
			switch hf.Name {
			case "grpc-status":
				code = hf.Value
			case "grpc-message":
				msg = hf.Value
			}
		}
		return true
	})
	return code, msg
}

// goAway waits for a GOAWAY and returns its code and debug data.
func (r *raw) goAway() (http2.ErrCode, string) {
	r.t.Helper()
	var code http2.ErrCode
	var debug string
	r.until("GOAWAY", func(f http2.Frame) bool {
		g, ok := f.(*http2.GoAwayFrame)
		if ok {
			code, debug = g.ErrCode, string(g.DebugData())
		}
		return ok
	})
	return code, debug
}

// stillServes checks another connection is answered.
func (f *fixture) stillServes() {
	f.t.Helper()
	if got, err := echo(ctxT(f.t), f.dial(), []byte("ok")); err != nil || string(got) != "ok" {
		f.t.Errorf("another connection: %q, %v", got, err)
	}
}

// TestBadPreface: a client that does not speak HTTP/2 is disconnected.
func TestBadPreface(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{})
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// EOF, or a reset for the bytes it did not read: either way closed.
	if _, err := io.Copy(io.Discard, nc); err != nil && !errors.Is(err, unix.ECONNRESET) {
		t.Errorf("reading until the server closes: %v", err)
	}
	f.stillServes()
}

// TestOversizedHeaders: a header list past the bound is answered
// RESOURCE_EXHAUSTED on its stream, and the connection serves on; one
// header string past it ends the connection (COMPRESSION_ERROR).
func TestOversizedHeaders(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{MaxHeaderListBytes: 8 << 10})
	r := f.dialRaw()
	big := strings.Repeat("v", 6<<10)
	r.headers(1, "/test.Echo/Echo", false, "a", big, "b", big, "c", big)
	if code, msg := r.status(1); code != "8" || !strings.Contains(msg, "header list larger") {
		t.Errorf("oversized header list: grpc-status %s %q, want 8", code, msg)
	}
	r.headers(3, "/test.Echo/Echo", false)
	r.message(3, 0, []byte{0x0a, 0x02, 'h', 'i'}, true)
	if code, msg := r.status(3); code != "0" {
		t.Errorf("the next call: grpc-status %s %q", code, msg)
	}
	r.headers(5, "/test.Echo/Echo", false, "huge", strings.Repeat("v", 10<<10))
	if code, _ := r.goAway(); code != http2.ErrCodeCompression {
		t.Errorf("a header string past the bound: GOAWAY %v, want COMPRESSION_ERROR", code)
	}
	f.stillServes()
}

// TestMalformedHeaders: a header block HTTP/2 forbids (an upper-case
// name) resets its stream; the data the client sends on after it is
// ignored, and the connection serves on.
func TestMalformedHeaders(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{})
	r := f.dialRaw()
	r.headers(1, "/test.Echo/Echo", false, "Bad-Name", "x")
	r.message(1, 0, []byte{0x0a, 0x01, 'x'}, true)
	r.until("RST_STREAM", func(fr http2.Frame) bool {
		rst, ok := fr.(*http2.RSTStreamFrame)
		return ok && rst.StreamID == 1
	})
	r.headers(3, "/test.Echo/Echo", false)
	r.message(3, 0, []byte{0x0a, 0x02, 'h', 'i'}, true)
	if code, msg := r.status(3); code != "0" {
		t.Errorf("the next call: grpc-status %s %q", code, msg)
	}
}

// TestFlowControlViolation: a client sending past the stream window it
// was given has the stream reset FLOW_CONTROL_ERROR; the connection
// serves on.
func TestFlowControlViolation(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{})
	r := f.dialRaw()
	r.headers(1, "/test.Echo/Block", false)
	r.message(1, 0, []byte{0x0a, 0x01, 'x'}, false)
	<-f.echo.started
	chunk := make([]byte, 16384)
	for range 5 { // 80 KiB past a complete message, on a 64 KiB window
		r.fr.WriteData(1, false, chunk)
	}
	r.until("RST_STREAM FLOW_CONTROL_ERROR", func(fr http2.Frame) bool {
		rst, ok := fr.(*http2.RSTStreamFrame)
		return ok && rst.StreamID == 1 && rst.ErrCode == http2.ErrCodeFlowControl
	})
	r.headers(3, "/test.Echo/Echo", false)
	r.message(3, 0, []byte{0x0a, 0x02, 'h', 'i'}, true)
	if code, msg := r.status(3); code != "0" {
		t.Errorf("the next call: grpc-status %s %q", code, msg)
	}
	close(f.echo.release)
}

// TestStreamFlood: streams past SETTINGS_MAX_CONCURRENT_STREAMS are
// refused (REFUSED_STREAM), and the ones admitted are answered.
func TestStreamFlood(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{MaxConcurrentStreams: 4})
	r := f.dialRaw()
	for id := uint32(1); id <= 11; id += 2 {
		r.headers(id, "/test.Echo/Block", false)
		r.message(id, 0, []byte{0x0a, 0x01, 'x'}, true)
	}
	for range 4 {
		<-f.echo.started
	}
	refused := map[uint32]bool{}
	r.until("two REFUSED_STREAM", func(fr http2.Frame) bool {
		if rst, ok := fr.(*http2.RSTStreamFrame); ok && rst.ErrCode == http2.ErrCodeRefusedStream {
			refused[rst.StreamID] = true
		}
		return len(refused) == 2
	})
	if !refused[9] || !refused[11] {
		t.Errorf("refused %v, want streams 9 and 11", refused)
	}
	close(f.echo.release)
	answered := map[uint32]string{}
	r.until("the four admitted answered", func(fr http2.Frame) bool {
		if h, ok := fr.(*http2.MetaHeadersFrame); ok && h.StreamEnded() {
			for _, hf := range h.RegularFields() {
				if hf.Name == "grpc-status" {
					answered[h.StreamID] = hf.Value
				}
			}
		}
		return len(answered) == 4
	})
	for id := uint32(1); id <= 7; id += 2 {
		if answered[id] != "0" {
			t.Errorf("stream %d: grpc-status %q", id, answered[id])
		}
	}
	f.stillServes()
}

// TestRapidReset: a client opening and resetting streams faster than the
// bound allows gets GOAWAY ENHANCE_YOUR_CALM; other connections are
// served.
func TestRapidReset(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{MaxResets: 50})
	r := f.dialRaw()
	go func() {
		for id := uint32(1); id < 400; id += 2 {
			r.headers(id, "/test.Echo/Echo", false)
			if r.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
		}
	}()
	if code, debug := r.goAway(); code != http2.ErrCodeEnhanceYourCalm || !strings.Contains(debug, "reset") {
		t.Errorf("rapid reset: GOAWAY %v %q, want ENHANCE_YOUR_CALM", code, debug)
	}
	f.stillServes()
}

// TestCancelledCallsAreNotRapidReset: a client cancelling calls that
// are running (as Envoy does past its timeout) is not taken for the
// rapid-reset attack: the connection serves on.
func TestCancelledCallsAreNotRapidReset(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{MaxResets: 10})
	r := f.dialRaw()
	for id := uint32(1); id <= 59; id += 2 {
		r.headers(id, "/test.Echo/Block", false)
		r.message(id, 0, []byte{0x0a, 0x01, 'x'}, true)
		select {
		case <-f.echo.started:
		case <-time.After(20 * time.Second):
			t.Fatalf("call %d never started (the connection was cut?)", id)
		}
		r.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	close(f.echo.release)
	r.headers(61, "/test.Echo/Echo", false)
	r.message(61, 0, []byte{0x0a, 0x01, 'y'}, true)
	r.until("the next call's answer", func(fr http2.Frame) bool {
		if g, ok := fr.(*http2.GoAwayFrame); ok {
			t.Fatalf("GOAWAY %v %q after cancelled calls", g.ErrCode, g.DebugData())
		}
		h, ok := fr.(*http2.MetaHeadersFrame)
		return ok && h.StreamID == 61 && h.StreamEnded()
	})
}

// TestCompressedMessage: without a decompressor, a compressed message is
// answered as grpc-go answers it.
func TestCompressedMessage(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{})
	r := f.dialRaw()
	r.headers(1, "/test.Echo/Echo", false)
	r.message(1, 1, []byte{1, 2, 3}, true)
	if code, msg := r.status(1); code != "13" || !strings.Contains(msg, "compressed flag set") {
		t.Errorf("compressed without grpc-encoding: %s %q, want 13", code, msg)
	}
	r.headers(3, "/test.Echo/Echo", false, "grpc-encoding", "gzip")
	r.message(3, 1, []byte{1, 2, 3}, true)
	if code, msg := r.status(3); code != "12" || !strings.Contains(msg, "gzip") {
		t.Errorf("gzip: %s %q, want 12", code, msg)
	}
}

// TestEndBeforeMessage: a unary call whose client half-closes without a
// message is answered INTERNAL.
func TestEndBeforeMessage(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{})
	r := f.dialRaw()
	r.headers(1, "/test.Echo/Echo", true)
	if code, _ := r.status(1); code != "13" {
		t.Errorf("no message: grpc-status %s, want 13", code)
	}
}

// TestKeepalive: a silent connection is pinged, and closed when the ping
// is not answered.
func TestKeepalive(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{KeepaliveTime: 50 * time.Millisecond, KeepaliveTimeout: 50 * time.Millisecond})
	r := f.dialRaw()
	pinged := false
	for {
		fr, err := r.fr.ReadFrame()
		if err != nil {
			if !pinged {
				t.Errorf("closed (%v) without a ping first", err)
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("the connection stayed open: %v", err)
			}
			break
		}
		if p, ok := fr.(*http2.PingFrame); ok && !p.IsAck() {
			pinged = true
		}
	}
	f.stillServes()
}

// TestPingFlood: a client pinging faster than MinPingInterval with
// nothing else going on is sent GOAWAY ENHANCE_YOUR_CALM, as grpc-go does.
func TestPingFlood(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{MinPingInterval: time.Hour})
	r := f.dialRaw()
	for i := range 4 {
		r.fr.WritePing(false, [8]byte{byte(i)})
	}
	if code, debug := r.goAway(); code != http2.ErrCodeEnhanceYourCalm || debug != "too_many_pings" {
		t.Errorf("ping flood: GOAWAY %v %q", code, debug)
	}
	f.stillServes()
}

// TestMaxConnectionAge: an old connection is told to go away (GOAWAY
// naming its last stream), its call in flight still answered.
func TestMaxConnectionAge(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{MaxConnectionAge: 50 * time.Millisecond, MaxConnectionAgeGrace: time.Minute})
	r := f.dialRaw()
	r.headers(1, "/test.Echo/Block", false)
	r.message(1, 0, []byte{0x0a, 0x01, 'x'}, true)
	<-f.echo.started
	// First a GOAWAY naming the largest stream ID and a PING; a call the
	// client opens before it answers the PING is served; once it has, a
	// GOAWAY naming the last stream opened.
	var lasts []uint32
	statuses := map[uint32]string{}
	r.until("the second GOAWAY", func(fr http2.Frame) bool {
		switch fr := fr.(type) {
		case *http2.GoAwayFrame:
			lasts = append(lasts, fr.LastStreamID)
			if fr.ErrCode != http2.ErrCodeNo {
				t.Errorf("GOAWAY %v, want NO_ERROR", fr.ErrCode)
			}
			if len(lasts) == 1 {
				r.headers(3, "/test.Echo/Echo", false)
				r.message(3, 0, []byte{0x0a, 0x01, 'y'}, true)
			}
		case *http2.MetaHeadersFrame:
			for _, hf := range fr.RegularFields() {
				if hf.Name == "grpc-status" {
					statuses[fr.StreamID] = hf.Value
				}
			}
		}
		return len(lasts) == 2
	})
	if lasts[0] != 1<<31-1 || lasts[1] != 3 {
		t.Errorf("GOAWAYs' last streams %v, want [2147483647 3]", lasts)
	}
	close(f.echo.release)
	r.until("both calls answered", func(fr http2.Frame) bool {
		if h, ok := fr.(*http2.MetaHeadersFrame); ok {
			for _, hf := range h.RegularFields() {
				if hf.Name == "grpc-status" {
					statuses[h.StreamID] = hf.Value
				}
			}
		}
		return statuses[1] != "" && statuses[3] != ""
	})
	if statuses[1] != "0" || statuses[3] != "0" {
		t.Errorf("grpc-status of the call in flight %q, of the call opened between the GOAWAYs %q; want 0", statuses[1], statuses[3])
	}
	if _, err := r.fr.ReadFrame(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after its last call the connection still reads: %v", err)
	}
}

// TestTimeoutPassed: an answer ready after the call's grpc-timeout is
// DEADLINE_EXCEEDED; a malformed grpc-timeout is ignored.
func TestTimeoutPassed(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{})
	r := f.dialRaw()
	r.headers(1, "/test.Echo/Echo", false, "grpc-timeout", "1n")
	r.message(1, 0, []byte{0x0a, 0x01, 'x'}, true)
	if code, _ := r.status(1); code != "4" {
		t.Errorf("past its deadline: grpc-status %s, want 4", code)
	}
	r.headers(3, "/test.Echo/Echo", false, "grpc-timeout", "soon")
	r.message(3, 0, []byte{0x0a, 0x01, 'x'}, true)
	if code, _ := r.status(3); code != "0" {
		t.Errorf("malformed grpc-timeout: grpc-status %s, want 0", code)
	}
}
