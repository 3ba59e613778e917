package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/encoding/protowire"
)

// h2Conn is a minimal gRPC client for one unary method over one plain-text
// HTTP/2 connection, for measuring servers: a call costs the generator a
// fraction of what grpc-go's client spends, leaving the shared cores to the
// server under test. It sends a pre-encoded request message and header
// block, reads only the response's field 1 (RateLimitResponse.overall_code)
// and grpc-status, and honours the server's connection flow-control
// window. It is what -client h2 uses; the same client drives every server
// in a comparison.
type h2Conn struct {
	conn    net.Conn
	path    string
	headers [2][]byte // the request's header block: the first call's, every later call's (h2Headers)

	mu       sync.Mutex // guards the writing side: fr's writes, out, flushing, nextID, sendWin
	cond     *sync.Cond // signalled when sendWin grows
	fr       *http2.Framer
	out      []byte // frames written and not yet sent
	spare    []byte // the buffer being sent, swapped with out
	flushing bool   // a caller is sending out; the others leave their frames to it
	nextID   uint32
	sendWin  int64 // bytes of DATA the server's connection window admits

	pmu     sync.Mutex
	pending map[uint32]*h2Call
	err     error // set (under pmu) when the connection failed; every later call fails with it
}

// h2Buffer is the framer's writer: frames go to h2Conn.out (mu held).
type h2Buffer struct{ c *h2Conn }

func (b h2Buffer) Write(p []byte) (int, error) {
	b.c.out = append(b.c.out, p...)
	return len(p), nil
}

// h2Call is one call in flight; each load goroutine reuses its own. The
// reader signals done (buffered, one slot) when the answer is in; a call
// has no deadline of its own beyond the grpc-timeout the server enforces.
type h2Call struct {
	done   chan struct{}
	code   uint64 // overall_code
	status string // grpc-status
	msg    string // grpc-message
	err    error
}

const h2RecvWindow = 1 << 30 // the connection window granted to the server up front

func dialH2(addr, path string, timeout time.Duration) (*h2Conn, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &h2Conn{conn: conn, path: path, nextID: 1, sendWin: 65535, pending: map[uint32]*h2Call{}}
	if c.headers[0], c.headers[1], err = h2Headers(addr, path, timeout); err != nil {
		return nil, err
	}
	c.cond = sync.NewCond(&c.mu)
	c.fr = http2.NewFramer(h2Buffer{c}, bufio.NewReaderSize(conn, 32<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.out = append(c.out, http2.ClientPreface...)
	if err := c.fr.WriteSettings(); err != nil {
		return nil, err
	}
	if err := c.fr.WriteWindowUpdate(0, h2RecvWindow-65535); err != nil {
		return nil, err
	}
	c.mu.Lock()
	err = c.send()
	if err != nil {
		return nil, err
	}
	go c.read()
	return c, nil
}

// h2Headers encodes a call's request headers twice with one HPACK encoder,
// as a client that indexes them (as Envoy does) sends them: the first block
// adds the fields to the server's dynamic table, the second refers to them.
// No other header is ever sent on the connection, so the table stays as the
// first block left it and the second block is valid for every later call.
func h2Headers(addr, path string, timeout time.Duration) (first, rest []byte, err error) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	var blocks [2][]byte
	for i := range blocks {
		buf.Reset()
		for _, f := range [...]hpack.HeaderField{
			{Name: ":method", Value: "POST"},
			{Name: ":scheme", Value: "http"},
			{Name: ":path", Value: path},
			{Name: ":authority", Value: addr},
			{Name: "content-type", Value: "application/grpc"},
			{Name: "te", Value: "trailers"},
			{Name: "grpc-timeout", Value: strconv.FormatInt(max(1, timeout.Milliseconds()), 10) + "m"},
		} {
			if err := enc.WriteField(f); err != nil {
				return nil, nil, err
			}
		}
		blocks[i] = bytes.Clone(buf.Bytes())
	}
	return blocks[0], blocks[1], nil
}

// send sends the frames written so far, and those other callers write
// meanwhile, unless another caller is already sending (it then sends
// them). Called with mu held; returns with it released.
func (c *h2Conn) send() error {
	if c.flushing {
		c.mu.Unlock()
		return nil
	}
	c.flushing = true
	for len(c.out) > 0 {
		c.out, c.spare = c.spare[:0], c.out
		buf := c.spare
		c.mu.Unlock()
		_, err := c.conn.Write(buf)
		c.mu.Lock()
		if err != nil {
			c.flushing = false
			c.mu.Unlock()
			return err
		}
	}
	c.flushing = false
	c.mu.Unlock()
	return nil
}

func (c *h2Conn) Close() error { return c.conn.Close() }

// call sends msg (a gRPC length-prefixed message) and waits for the answer.
func (c *h2Conn) call(cl *h2Call, msg []byte) error {
	if cl.done == nil {
		cl.done = make(chan struct{}, 1)
	}
	cl.code, cl.status, cl.msg, cl.err = 0, "", "", nil
	c.mu.Lock()
	for c.sendWin < int64(len(msg)) && c.failed() == nil {
		c.cond.Wait()
	}
	id := c.nextID
	c.nextID += 2
	c.sendWin -= int64(len(msg))
	c.pmu.Lock()
	err := c.err
	if err == nil {
		c.pending[id] = cl
	}
	c.pmu.Unlock()
	if err == nil {
		block := c.headers[1]
		if id == 1 {
			block = c.headers[0]
		}
		err = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
	}
	if err == nil {
		err = c.fr.WriteData(id, true, msg)
	}
	if err == nil {
		err = c.send()
	} else {
		c.mu.Unlock()
	}
	if err != nil {
		c.fail(err)
		return err
	}
	<-cl.done
	switch {
	case cl.err != nil:
		return cl.err
	case cl.status != "0":
		return fmt.Errorf("rpc error: grpc-status %s: %s", cl.status, cl.msg)
	}
	return nil
}

func (c *h2Conn) failed() error {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.err
}

// read is the connection's reader: it answers the server's SETTINGS and
// PINGs, grants flow control back, and completes calls.
func (c *h2Conn) read() {
	var consumed uint32 // DATA bytes received since the last WINDOW_UPDATE
	data := map[uint32][]byte{}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.fail(err)
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.control(func() error { return c.fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.control(func() error { return c.fr.WritePing(true, f.Data) })
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				c.mu.Lock()
				c.sendWin += int64(f.Increment)
				c.cond.Broadcast()
				c.mu.Unlock()
			}
		case *http2.DataFrame:
			data[f.StreamID] = append(data[f.StreamID], f.Data()...)
			if consumed += f.Length; consumed >= h2RecvWindow/2 {
				n := consumed
				consumed = 0
				c.control(func() error { return c.fr.WriteWindowUpdate(0, n) })
			}
		case *http2.MetaHeadersFrame:
			if !f.StreamEnded() {
				continue // the response's headers; the trailers follow
			}
			cl := c.take(f.StreamID)
			if cl == nil {
				continue
			}
			for _, h := range f.Fields {
				switch h.Name {
				case "grpc-status":
					cl.status = h.Value
				case "grpc-message":
					cl.msg = h.Value
				}
			}
			if cl.status == "" {
				cl.err = errors.New("response without grpc-status")
			}
			cl.code, cl.err = overallCode(data[f.StreamID], cl.err)
			delete(data, f.StreamID)
			cl.done <- struct{}{}
		case *http2.RSTStreamFrame:
			if cl := c.take(f.StreamID); cl != nil {
				cl.err = fmt.Errorf("stream reset: %v", f.ErrCode)
				cl.done <- struct{}{}
			}
			delete(data, f.StreamID)
		case *http2.GoAwayFrame:
			c.fail(fmt.Errorf("server sent GOAWAY: %v", f.ErrCode))
			return
		}
	}
}

// overallCode reads field 1 of the response message in a gRPC message
// frame (absent means 0, OK); err, when set, is returned as it is.
func overallCode(frame []byte, err error) (uint64, error) {
	if err != nil || len(frame) == 0 {
		return 0, err
	}
	if len(frame) < 5 || frame[0] != 0 {
		return 0, errors.New("malformed or compressed gRPC message")
	}
	b := frame[5:]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, protowire.ParseError(n)
			}
			return v, nil
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return 0, nil
}

// control writes a frame of the connection's own (an acknowledgement, a
// window update) and flushes it.
func (c *h2Conn) control(write func() error) {
	c.mu.Lock()
	err := write()
	if err == nil {
		err = c.send()
	} else {
		c.mu.Unlock()
	}
	if err != nil {
		c.fail(err)
	}
}

func (c *h2Conn) take(id uint32) *h2Call {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	cl := c.pending[id]
	delete(c.pending, id)
	return cl
}

// fail ends the connection: every call in flight and every later one
// fails with err.
func (c *h2Conn) fail(err error) {
	c.pmu.Lock()
	if c.err == nil {
		c.err = err
	}
	for id, cl := range c.pending {
		cl.err = c.err
		cl.done <- struct{}{}
		delete(c.pending, id)
	}
	c.pmu.Unlock()
	c.conn.Close()
	c.mu.Lock()
	c.cond.Broadcast()
	c.mu.Unlock()
}
