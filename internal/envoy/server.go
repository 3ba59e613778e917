package envoy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/rlserver/rlserver/internal/h2grpc"
)

// ServerOptions configure Start. The zero value serves plain-text gRPC with
// the defaults below.
type ServerOptions struct {
	// TLS, when set, is the server's TLS configuration; set ClientAuth and
	// ClientCAs in it to require client certificates.
	TLS *tls.Config
	// MaxMessageBytes bounds a received and a sent message (default 1 MiB;
	// Envoy's requests are a few hundred bytes).
	MaxMessageBytes int
	// MaxConcurrentStreams bounds the calls in flight on one connection
	// (default 1024).
	MaxConcurrentStreams uint32
	// KeepaliveTime is how long a connection may be idle before the server
	// pings it, and KeepaliveTimeout how long it waits for the answer
	// before closing it (defaults 1 minute and 20 seconds), so dead
	// clients' connections are reclaimed.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MinPingInterval is the shortest interval at which a client may ping
	// (default 5 seconds); a client pinging faster is disconnected.
	MinPingInterval time.Duration
	// MaxConnectionAge closes a connection after this long (with a grace
	// of MaxConnectionAge/10 for calls in flight) so clients rebalance
	// across replicas; 0 (the default) never does.
	MaxConnectionAge time.Duration
	// HandshakeTimeout bounds a new connection's TLS and HTTP/2 handshake
	// (default 10 seconds).
	HandshakeTimeout time.Duration
	// StreamWorkers is how many goroutines are kept to run calls (default
	// DefaultStreamWorkers). A call arriving when all are busy runs on a
	// goroutine of its own, so this bounds nothing: it saves a goroutine
	// start and the growth of its stack per call (about a sixth of a call's
	// CPU when measured under bench/grpcload). Envoy keeps as many calls in
	// flight per connection as it has requests waiting on a limit.
	StreamWorkers uint32
	// Logger receives a handler's panic (answered Internal); nil discards.
	Logger *slog.Logger
	// Transport selects the HTTP/2 server ("" is TransportFast).
	Transport Transport
}

// Transport names the gRPC server implementation behind Server.
type Transport string

// The transports: TransportFast is package h2grpc, a small HTTP/2 server
// written for this one hot unary method (cheaper per call: one write per
// round of answers, no goroutine or context per call); TransportGRPCGo is
// grpc-go's own server, kept as the fallback.
const (
	TransportFast   Transport = "fast"
	TransportGRPCGo Transport = "grpc-go"
)

// Defaults of ServerOptions.
const (
	DefaultMaxMessageBytes      = 1 << 20
	DefaultMaxConcurrentStreams = 1024
	DefaultKeepaliveTime        = time.Minute
	DefaultKeepaliveTimeout     = 20 * time.Second
	DefaultMinPingInterval      = 5 * time.Second
	DefaultHandshakeTimeout     = 10 * time.Second
	DefaultStreamWorkers        = 128
)

// The flow-control windows the server grants: HTTP/2's default for a
// stream (64 KiB, the least grpc-go accepts as a fixed window), 1 MiB for a
// connection.
const (
	StreamWindowBytes = 64 << 10
	ConnWindowBytes   = 1 << 20
)

// HealthServices are the names the health service reports SERVING for:
// "" (the server), the rate limit service's full name, and "ratelimit",
// the name envoyproxy/ratelimit registers, so health checks written for it
// keep working.
var HealthServices = []string{"", rlsv3.RateLimitService_ServiceDesc.ServiceName, "ratelimit"}

// Server serves the Envoy rate limit service, the gRPC health service and
// server reflection on one listener. Start starts it; Shutdown or Stop ends
// it and waits for its goroutine.
type Server struct {
	grpc   *grpc.Server   // TransportGRPCGo's
	fast   *h2grpc.Server // TransportFast's
	health *health.Server
	addr   net.Addr
	done   chan struct{} // closed when Serve has returned
	err    error         // Serve's error, set before done is closed

	stopOnce sync.Once
}

// Start serves svc on ln until Shutdown or Stop. ln is closed by then.
func Start(ln net.Listener, svc *Service, opts ServerOptions) *Server {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.MaxConcurrentStreams == 0 {
		opts.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if opts.StreamWorkers == 0 {
		opts.StreamWorkers = DefaultStreamWorkers
	}
	orDefault := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	orDefault(&opts.KeepaliveTime, DefaultKeepaliveTime)
	orDefault(&opts.KeepaliveTimeout, DefaultKeepaliveTimeout)
	orDefault(&opts.MinPingInterval, DefaultMinPingInterval)
	orDefault(&opts.HandshakeTimeout, DefaultHandshakeTimeout)
	log := opts.Logger
	if log == nil {
		log = svc.log
	}
	kp := keepalive.ServerParameters{Time: opts.KeepaliveTime, Timeout: opts.KeepaliveTimeout}
	if opts.MaxConnectionAge > 0 {
		kp.MaxConnectionAge, kp.MaxConnectionAgeGrace = opts.MaxConnectionAge, opts.MaxConnectionAge/10
	}
	sopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(opts.MaxMessageBytes),
		grpc.MaxSendMsgSize(opts.MaxMessageBytes),
		grpc.MaxConcurrentStreams(opts.MaxConcurrentStreams),
		grpc.KeepaliveParams(kp),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: opts.MinPingInterval, PermitWithoutStream: true}),
		grpc.ConnectionTimeout(opts.HandshakeTimeout),
		grpc.ChainUnaryInterceptor(recoverPanics(log)),
		grpc.WaitForHandlers(true),
		grpc.NumStreamWorkers(opts.StreamWorkers),
		// Fixed flow-control windows: grpc-go otherwise estimates the
		// bandwidth-delay product with a PING round trip after data
		// arrives, one more frame each way every few calls for messages
		// of a few hundred bytes that never need a larger window. The
		// connection's window bounds what a client may send ahead of the
		// server reading it.
		grpc.InitialWindowSize(StreamWindowBytes),
		grpc.InitialConnWindowSize(ConnWindowBytes),
		// On this server only: the rate limit messages by hand, the
		// others as the registered proto codec does.
		grpc.ForceServerCodecV2(newCodec()),
	}

	if opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s := &Server{health: health.NewServer(), addr: ln.Addr(), done: make(chan struct{})}
	var reg reflection.GRPCServer
	if opts.Transport == TransportGRPCGo {
		s.grpc = grpc.NewServer(sopts...)
		reg = s.grpc
	} else {
		s.fast = h2grpc.NewServer(fastOptions(opts, log))
		reg = s.fast
	}
	rlsv3.RegisterRateLimitServiceServer(reg, svc)
	healthpb.RegisterHealthServer(reg, s.health)
	for _, name := range HealthServices {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	reflection.Register(reg)
	go func() {
		defer close(s.done)
		if s.fast != nil {
			if err := s.fast.Serve(ln); err != nil && !errors.Is(err, h2grpc.ErrServerStopped) {
				s.err = err
			}
			return
		}
		if err := s.grpc.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.err = err
		}
	}()
	return s
}

// fastOptions are opts for package h2grpc: the same bounds as grpc-go's
// server is given.
func fastOptions(opts ServerOptions, log *slog.Logger) h2grpc.Options {
	o := h2grpc.Options{
		TLS: opts.TLS, Codec: newCodec(), UnaryInterceptor: recoverPanics(log),
		MaxMessageBytes: opts.MaxMessageBytes, MaxConcurrentStreams: opts.MaxConcurrentStreams,
		StreamWindowBytes: StreamWindowBytes, ConnWindowBytes: ConnWindowBytes,
		KeepaliveTime: opts.KeepaliveTime, KeepaliveTimeout: opts.KeepaliveTimeout, MinPingInterval: opts.MinPingInterval,
		MaxConnectionAge: opts.MaxConnectionAge, HandshakeTimeout: opts.HandshakeTimeout,
		Workers: int(opts.StreamWorkers), Logger: log,
	}
	return o
}

// Addr returns the listener's address.
func (s *Server) Addr() net.Addr { return s.addr }

// Shutdown stops accepting connections, reports NOT_SERVING to health
// checks, and waits for the calls in flight until ctx ends, then closes
// every connection. It returns Serve's error, if it failed, or ctx's.
func (s *Server) Shutdown(ctx context.Context) error {
	s.health.Shutdown()
	if s.fast != nil {
		err := s.fast.Shutdown(ctx)
		<-s.done
		if s.err != nil {
			return s.err
		}
		return err
	}
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	var err error
	select {
	case <-stopped:
	case <-ctx.Done():
		err = ctx.Err()
		s.grpc.Stop()
		<-stopped
	}
	<-s.done
	if s.err != nil {
		return s.err
	}
	return err
}

// Stop closes every connection at once and waits for the server to end,
// handlers in flight included (they see their context cancelled). It is
// safe to call twice, and after Shutdown.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.health.Shutdown()
		if s.fast != nil {
			s.fast.Stop()
		} else {
			s.grpc.Stop()
		}
	})
	<-s.done
}

// Done is closed when the server has stopped serving; Err then tells why,
// nil after Shutdown or Stop.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err returns the error Serve stopped with; valid once Done is closed.
func (s *Server) Err() error { return s.err }

// recoverPanics answers Internal for a handler that panics, and logs it,
// so a bug reached by one request cannot take down the whole server (the
// RESP clients with it).
func recoverPanics(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("gRPC handler panicked; answered Internal", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				resp, err = nil, status.Error(codes.Internal, "internal error")
			}
		}()
		return handler(ctx, req)
	}
}
