// Package h2grpc is a small gRPC server over HTTP/2, written for a server
// whose hot method is one small unary call (Envoy's ShouldRateLimit), and
// cheaper per call than grpc-go's server: one goroutine reads a
// connection's frames, one writes them, batching every response ready in
// a round into one write; unary calls run on a pool of workers.
//
// It hosts services registered as for grpc-go (it is a
// grpc.ServiceRegistrar, and a reflection.ServiceInfoProvider, so
// grpc-go's health and reflection services register on it unchanged):
// unary methods and streaming ones (each streaming call on a goroutine of
// its own, bounded by the streams a connection may open). HTTP/2 framing
// and HPACK are golang.org/x/net/http2's Framer and hpack; this package
// does the connection's state: flow control both ways, stream limits,
// keepalive, the bounds on what a client can make it hold, and graceful
// shutdown with GOAWAY.
//
// Deliberate limits: no compression (a compressed message is answered
// Unimplemented or Internal, as grpc-go does without a decompressor), no
// server push, no stats handlers. A unary call's context is its
// connection's (cancelled when the connection ends); its grpc-timeout is
// checked when the handler returns (a late answer becomes
// DEADLINE_EXCEEDED) rather than by a timer per call. Streaming calls get
// a context with the deadline.
package h2grpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
)

// Options configure a Server. The zero value is usable: every bound takes
// its default.
type Options struct {
	// TLS, when set, serves TLS with ALPN "h2" only; otherwise the
	// server speaks HTTP/2 over clear text with prior knowledge (h2c),
	// as gRPC clients do.
	TLS *tls.Config
	// Codec encodes and decodes messages (default: the registered proto
	// codec).
	Codec encoding.CodecV2
	// UnaryInterceptor, if set, wraps every unary call.
	UnaryInterceptor grpc.UnaryServerInterceptor
	// MaxMessageBytes bounds a received and a sent message (default
	// 4 MiB, grpc-go's).
	MaxMessageBytes int
	// MaxConcurrentStreams bounds the calls in flight on one connection,
	// advertised in SETTINGS and enforced (default 1024). A call counts
	// until its handler has returned, reset or not.
	MaxConcurrentStreams uint32
	// MaxHeaderListBytes bounds a request's decoded header list (default
	// 16 KiB); a larger one is answered RESOURCE_EXHAUSTED.
	MaxHeaderListBytes uint32
	// StreamWindowBytes and ConnWindowBytes are the flow-control windows
	// granted to a client (defaults 64 KiB and 1 MiB).
	StreamWindowBytes, ConnWindowBytes uint32
	// MaxResets bounds the streams a client may reset before their call
	// started (or open past MaxConcurrentStreams) within ResetInterval
	// (defaults 1000 in 10 s); past it the connection is closed with
	// GOAWAY ENHANCE_YOUR_CALM (rapid reset). A call cancelled while it
	// runs is not counted: it holds its stream slot until its handler
	// returns.
	MaxResets     int
	ResetInterval time.Duration
	// KeepaliveTime is how long a connection may be silent before the
	// server pings it; KeepaliveTimeout how long it then waits for any
	// frame before closing it (defaults 1 minute and 20 seconds).
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MinPingInterval is the shortest interval at which a client may ping
	// (default 5 s); after three pings closer together than that without
	// a response written between them the connection is closed with
	// GOAWAY ENHANCE_YOUR_CALM "too_many_pings", as grpc-go does.
	MinPingInterval time.Duration
	// MaxConnectionAge, if set, drains a connection (GOAWAY) after this
	// long and closes it MaxConnectionAgeGrace later.
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// HandshakeTimeout bounds the TLS handshake and the client's
	// preface and first SETTINGS (default 10 s).
	HandshakeTimeout time.Duration
	// Workers is how many goroutines are kept to run unary calls (default
	// 128); a call arriving when all are busy runs on a goroutine of its
	// own (still bounded by MaxConcurrentStreams per connection).
	Workers int
	// Logger receives connection errors worth an operator's attention;
	// nil discards.
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultMaxMessageBytes      = 4 << 20
	DefaultMaxConcurrentStreams = 1024
	DefaultMaxHeaderListBytes   = 16 << 10
	DefaultStreamWindowBytes    = 64 << 10
	DefaultConnWindowBytes      = 1 << 20
	DefaultMaxResets            = 1000
	DefaultResetInterval        = 10 * time.Second
	DefaultKeepaliveTime        = time.Minute
	DefaultKeepaliveTimeout     = 20 * time.Second
	DefaultMinPingInterval      = 5 * time.Second
	DefaultHandshakeTimeout     = 10 * time.Second
	DefaultWorkers              = 128
)

func (o *Options) setDefaults() {
	num := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	u32 := func(v *uint32, d uint32) {
		if *v == 0 {
			*v = d
		}
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	num(&o.MaxMessageBytes, DefaultMaxMessageBytes)
	num(&o.MaxResets, DefaultMaxResets)
	num(&o.Workers, DefaultWorkers)
	u32(&o.MaxConcurrentStreams, DefaultMaxConcurrentStreams)
	u32(&o.MaxHeaderListBytes, DefaultMaxHeaderListBytes)
	u32(&o.StreamWindowBytes, DefaultStreamWindowBytes)
	u32(&o.ConnWindowBytes, DefaultConnWindowBytes)
	// HTTP/2's largest window, less what the connection starts with.
	o.StreamWindowBytes = min(max(o.StreamWindowBytes, initialWindow), maxWindow)
	o.ConnWindowBytes = min(max(o.ConnWindowBytes, initialWindow), maxWindow)
	dur(&o.ResetInterval, DefaultResetInterval)
	dur(&o.KeepaliveTime, DefaultKeepaliveTime)
	dur(&o.KeepaliveTimeout, DefaultKeepaliveTimeout)
	dur(&o.MinPingInterval, DefaultMinPingInterval)
	dur(&o.HandshakeTimeout, DefaultHandshakeTimeout)
	if o.MaxConnectionAge > 0 && o.MaxConnectionAgeGrace <= 0 {
		o.MaxConnectionAgeGrace = o.MaxConnectionAge / 10
	}
	if o.Codec == nil {
		o.Codec = encoding.GetCodecV2(grpcproto.Name)
	}
	if o.TLS != nil && !slices.Contains(o.TLS.NextProtos, "h2") {
		o.TLS = o.TLS.Clone()
		o.TLS.NextProtos = append(o.TLS.NextProtos, "h2")
	}
}

// BytesCodec is an optional fast path of Options.Codec, taken when the
// codec implements it: messages decoded from and encoded into plain byte
// slices, without mem.BufferSlice's buffers.
type BytesCodec interface {
	// UnmarshalBytes decodes data into v; it must not keep data.
	UnmarshalBytes(data []byte, v any) error
	// AppendMarshal appends v's encoding to b.
	AppendMarshal(b []byte, v any) ([]byte, error)
}

// HTTP/2's initial window (RFC 9113 6.9.2) and largest one.
const (
	initialWindow = 65535
	maxWindow     = 1<<31 - 1
)

// ErrServerStopped is Serve's error after Shutdown or Stop.
var ErrServerStopped = errors.New("h2grpc: the server has been stopped")

// method is one registered method: exactly one of unary and stream is set.
type method struct {
	impl   any
	unary  grpc.MethodHandler
	stream *grpc.StreamDesc
}

// Server serves registered gRPC services. Register services before Serve;
// Serve, Shutdown and Stop may be called from any goroutine.
type Server struct {
	opts    Options
	methods map[string]method // by full name, "/service/method"
	info    map[string]grpc.ServiceInfo

	work     chan *stream   // unary calls for idle workers
	workers  sync.WaitGroup // the workers
	handlers sync.WaitGroup // calls running outside the workers

	mu        sync.Mutex
	lis       []net.Listener
	conns     map[*conn]struct{}
	serving   bool
	draining  bool // Shutdown has begun: new connections are closed at once
	stopped   bool
	connsDone *sync.Cond // signalled when a connection is removed
	closeWork sync.Once
}

// NewServer returns a server with opts (see Options for the defaults).
func NewServer(opts Options) *Server {
	opts.setDefaults()
	s := &Server{opts: opts, methods: map[string]method{}, info: map[string]grpc.ServiceInfo{},
		work: make(chan *stream), conns: map[*conn]struct{}{}}
	s.connsDone = sync.NewCond(&s.mu)
	return s
}

// RegisterService registers a service's methods, as grpc.Server's does;
// it panics if impl does not implement desc's handler type or the service
// is registered twice, and must be called before Serve.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	if impl != nil {
		ht := reflect.TypeOf(desc.HandlerType).Elem()
		if !reflect.TypeOf(impl).Implements(ht) {
			panic(fmt.Sprintf("h2grpc: RegisterService: %T does not implement %v", impl, ht))
		}
	}
	if _, dup := s.info[desc.ServiceName]; dup {
		panic("h2grpc: RegisterService: service " + desc.ServiceName + " registered twice")
	}
	info := grpc.ServiceInfo{Metadata: desc.Metadata}
	for _, m := range desc.Methods {
		s.methods["/"+desc.ServiceName+"/"+m.MethodName] = method{impl: impl, unary: m.Handler}
		info.Methods = append(info.Methods, grpc.MethodInfo{Name: m.MethodName})
	}
	for i := range desc.Streams {
		sd := &desc.Streams[i]
		s.methods["/"+desc.ServiceName+"/"+sd.StreamName] = method{impl: impl, stream: sd}
		info.Methods = append(info.Methods, grpc.MethodInfo{Name: sd.StreamName, IsClientStream: sd.ClientStreams, IsServerStream: sd.ServerStreams})
	}
	s.info[desc.ServiceName] = info
}

// GetServiceInfo returns the registered services, for server reflection.
func (s *Server) GetServiceInfo() map[string]grpc.ServiceInfo { return s.info }

// Serve accepts connections on ln until Shutdown or Stop (then it returns
// ErrServerStopped) or until Accept fails. ln is closed when it returns.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.stopped || s.draining {
		s.mu.Unlock()
		ln.Close()
		return ErrServerStopped
	}
	s.lis = append(s.lis, ln)
	if !s.serving {
		s.serving = true
		s.workers.Add(s.opts.Workers)
		for range s.opts.Workers {
			go s.worker()
		}
	}
	s.mu.Unlock()
	defer ln.Close()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			done := s.stopped || s.draining
			s.mu.Unlock()
			if done {
				return ErrServerStopped
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Out of file descriptors and the like: back off, as
				// net/http does, rather than spin.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.startConn(nc)
	}
}

func (s *Server) startConn(nc net.Conn) *conn {
	s.mu.Lock()
	if s.stopped || s.draining {
		s.mu.Unlock()
		nc.Close()
		return nil
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	go c.serve()
	return c
}

// removeConn forgets c once its goroutines have ended.
func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.connsDone.Broadcast()
	s.mu.Unlock()
}

// worker runs unary calls handed to it until the server stops.
func (s *Server) worker() {
	defer s.workers.Done()
	for st := range s.work {
		st.runUnary()
	}
}

// dispatch runs a unary call on an idle worker, or on a goroutine of its
// own when all are busy.
func (s *Server) dispatch(st *stream) {
	select {
	case s.work <- st:
	default:
		s.handlers.Add(1)
		go func() {
			defer s.handlers.Done()
			st.runUnary()
		}()
	}
}

// Shutdown stops accepting connections, tells every connection to go away
// (GOAWAY) and waits for the calls in flight until ctx ends, then closes
// every connection (Stop). It returns ctx's error if it had to.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	for _, ln := range s.lis {
		ln.Close()
	}
	for c := range s.conns {
		c.drain()
	}
	s.mu.Unlock()
	idle := make(chan struct{})
	go func() {
		s.mu.Lock()
		for len(s.conns) > 0 && !s.stopped {
			s.connsDone.Wait()
		}
		s.mu.Unlock()
		close(idle)
	}()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.Stop()
	<-idle
	return err
}

// Stop closes every listener and connection at once and waits for every
// goroutine of the server, handlers included (their contexts are
// cancelled). It is safe to call twice, and after Shutdown.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	for _, ln := range s.lis {
		ln.Close()
	}
	for c := range s.conns {
		c.close()
	}
	for len(s.conns) > 0 {
		s.connsDone.Wait()
	}
	s.connsDone.Broadcast()
	s.mu.Unlock()
	s.handlers.Wait()
	s.closeWork.Do(func() { close(s.work) })
	s.workers.Wait()
}
