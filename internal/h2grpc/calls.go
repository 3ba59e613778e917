package h2grpc

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// runUnary runs a unary call whose message has arrived, on a worker.
func (st *stream) runUnary() {
	c := st.c
	ctx := c.ctx
	if st.md != nil {
		ctx = metadata.NewIncomingContext(ctx, decodeMD(st.md))
	}
	resp, err := st.callUnary(ctx)
	if err == nil && !st.deadline.IsZero() && time.Now().After(st.deadline) {
		err = status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	}
	var buf *[]byte
	var msg []byte
	if err == nil {
		buf = bufPool.Get().(*[]byte)
		msg, err = c.marshal((*buf)[:0], resp)
	}
	c.handlerReturned(st, statusOf(err), msg)
	if buf != nil {
		*buf = msg[:0]
		bufPool.Put(buf)
	}
}

// bufPool holds the buffers unary answers are encoded into, prefix
// included; handlerReturned keeps none of them.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// callUnary calls the handler; a panic is answered Internal (and
// logged) rather than taking the process down.
func (st *stream) callUnary(ctx context.Context) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			st.c.logPanic(r)
			resp, err = nil, status.Error(codes.Internal, "internal error")
		}
	}()
	return st.m.unary(st.m.impl, ctx, st.decode, st.c.opts.UnaryInterceptor)
}

// decode is a unary handler's dec: the message the reader collected.
func (st *stream) decode(v any) error {
	return st.c.unmarshal(st.in, v)
}

func (c *conn) unmarshal(b []byte, v any) error {
	var err error
	if bc, ok := c.opts.Codec.(BytesCodec); ok {
		err = bc.UnmarshalBytes(b, v)
	} else {
		err = c.opts.Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, v)
	}
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return nil
}

// marshal appends v as a gRPC message (prefix and encoding) to b.
func (c *conn) marshal(b []byte, v any) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0)
	var err error
	if bc, ok := c.opts.Codec.(BytesCodec); ok {
		b, err = bc.AppendMarshal(b, v)
	} else {
		var msg mem.BufferSlice
		if msg, err = c.opts.Codec.Marshal(v); err == nil {
			for _, buf := range msg {
				b = append(b, buf.ReadOnlyData()...)
			}
			msg.Free()
		}
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	n := len(b) - start - 5
	if n > c.opts.MaxMessageBytes {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", n, c.opts.MaxMessageBytes)
	}
	b[start+1], b[start+2], b[start+3], b[start+4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return b, nil
}

func (c *conn) logPanic(r any) {
	if c.opts.Logger != nil {
		c.opts.Logger.Error("gRPC handler panicked; answered Internal", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	}
}

// decodeMD decodes the binary ("-bin") values of request metadata.
func decodeMD(md metadata.MD) metadata.MD {
	for k, vs := range md {
		if !strings.HasSuffix(k, "-bin") {
			continue
		}
		for i, v := range vs {
			enc := base64.StdEncoding
			if len(v)%4 != 0 {
				enc = base64.RawStdEncoding
			}
			if b, err := enc.DecodeString(v); err == nil {
				vs[i] = string(b)
			}
		}
	}
	return md
}

// startStreaming runs a streaming call's handler on a goroutine of its
// own (the stream limit bounds them).
func (st *stream) startStreaming() {
	c := st.c
	ctx, cancel := context.WithCancel(c.ctx)
	if !st.deadline.IsZero() {
		ctx, cancel = context.WithDeadline(c.ctx, st.deadline)
	}
	if st.md != nil {
		ctx = metadata.NewIncomingContext(ctx, decodeMD(st.md))
	}
	// Waiters on the connection's conditions wake when the call's
	// context ends (deadline, reset, connection closed).
	stopWake := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.recvd.Broadcast()
		c.roomy.Broadcast()
		c.mu.Unlock()
	})
	c.mu.Lock()
	st.cancel, st.running = cancel, true
	if st.ended {
		cancel()
	}
	c.mu.Unlock()
	c.srv.handlers.Add(1)
	go func() {
		defer c.srv.handlers.Done()
		err := st.callStream(&serverStream{st: st, ctx: ctx})
		stopWake()
		cancel()
		c.handlerReturned(st, statusOf(err), nil)
	}()
}

func (st *stream) callStream(ss *serverStream) (err error) {
	defer func() {
		if r := recover(); r != nil {
			st.c.logPanic(r)
			err = status.Error(codes.Internal, "internal error")
		}
	}()
	return st.m.stream.Handler(st.m.impl, ss)
}

// serverStream is a streaming call as grpc-go's handlers see it.
type serverStream struct {
	st  *stream
	ctx context.Context
}

func (ss *serverStream) Context() context.Context { return ss.ctx }

// SetHeader adds md to the response headers, until they are sent.
func (ss *serverStream) SetHeader(md metadata.MD) error {
	c := ss.st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if ss.st.headersSent {
		return status.Error(codes.Internal, "h2grpc: SetHeader after the headers were sent")
	}
	ss.st.headerMD = mergeMD(ss.st.headerMD, md)
	return nil
}

// SendHeader sends the response headers, with md added.
func (ss *serverStream) SendHeader(md metadata.MD) error {
	if err := ss.SetHeader(md); err != nil {
		return err
	}
	c := ss.st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	ss.st.wantHeaders = true
	c.flushStream(ss.st)
	return nil
}

// SetTrailer adds md to the trailers.
func (ss *serverStream) SetTrailer(md metadata.MD) {
	c := ss.st.c
	c.mu.Lock()
	ss.st.trailerMD = mergeMD(ss.st.trailerMD, md)
	c.mu.Unlock()
}

// SendMsg sends m, waiting while earlier output of the call waits for the
// client's window or the connection's writes are behind.
func (ss *serverStream) SendMsg(m any) error {
	st, c := ss.st, ss.st.c
	msg, err := c.marshal(nil, m)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ss.ended(); err != nil {
		return err
	}
	st.out = append(st.out, msg...)
	c.flushStream(st)
	for len(st.out) > 0 || len(c.out.b) > outLimit {
		if err := ss.ended(); err != nil {
			return err
		}
		c.roomy.Wait()
	}
	return nil
}

// ended is the error for a call that can go no further; mu held.
func (ss *serverStream) ended() error {
	switch {
	case ss.ctx.Err() != nil:
		return status.FromContextError(ss.ctx.Err()).Err()
	case ss.st.ended || ss.st.c.closed:
		return status.Error(codes.Canceled, "the stream was reset or its connection closed")
	}
	return nil
}

// RecvMsg receives the client's next message into m; io.EOF once the
// client has half-closed and every message was received.
func (ss *serverStream) RecvMsg(m any) error {
	st, c := ss.st, ss.st.c
	c.mu.Lock()
	for len(st.msgs) == 0 && !st.recvClosed {
		if err := ss.ended(); err != nil {
			c.mu.Unlock()
			return err
		}
		c.recvd.Wait()
	}
	if len(st.msgs) == 0 {
		c.mu.Unlock()
		return io.EOF
	}
	msg := st.msgs[0]
	st.msgs[0] = nil
	st.msgs = st.msgs[1:]
	c.buffered -= int64(len(msg) + 5)
	c.mu.Unlock()
	return c.unmarshal(msg, m)
}
