package h2grpc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionalphapb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlserver/rlserver/internal/h2grpc"
)

// echoServer is the tests' service: Echo answers its request, Big
// answers a message of the requested size, Block waits until release is
// closed (or its connection ends).
type echoServer struct {
	release chan struct{}
	started chan struct{} // one value per Block call begun
}

type echoService interface{ echo() }

func (*echoServer) echo() {}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "test.Echo",
	HandlerType: (*echoService)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Echo", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := &wrapperspb.BytesValue{}
			if err := dec(in); err != nil {
				return nil, err
			}
			return in, nil
		}},
		{MethodName: "Big", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := &wrapperspb.UInt32Value{}
			if err := dec(in); err != nil {
				return nil, err
			}
			return wrapperspb.Bytes(make([]byte, in.Value)), nil
		}},
		{MethodName: "Block", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			e := srv.(*echoServer)
			in := &wrapperspb.BytesValue{}
			if err := dec(in); err != nil {
				return nil, err
			}
			e.started <- struct{}{}
			select {
			case <-e.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return in, nil
		}},
	},
}

type fixture struct {
	t      *testing.T
	srv    *h2grpc.Server
	echo   *echoServer
	health *health.Server
	addr   string
	done   chan error
}

// start serves the echo, health and reflection services on 127.0.0.1.
func start(t *testing.T, opts h2grpc.Options) *fixture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, srv: h2grpc.NewServer(opts), echo: &echoServer{release: make(chan struct{}), started: make(chan struct{}, 4096)},
		health: health.NewServer(), addr: ln.Addr().String(), done: make(chan error, 1)}
	f.srv.RegisterService(&echoDesc, f.echo)
	healthpb.RegisterHealthServer(f.srv, f.health)
	reflection.Register(f.srv)
	go func() { f.done <- f.srv.Serve(ln) }()
	t.Cleanup(func() {
		f.srv.Stop()
		if err := <-f.done; !errors.Is(err, h2grpc.ErrServerStopped) {
			t.Errorf("Serve returned %v, want ErrServerStopped", err)
		}
	})
	return f
}

func (f *fixture) dial(opts ...grpc.DialOption) *grpc.ClientConn {
	f.t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cc, err := grpc.NewClient(f.addr, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { cc.Close() })
	return cc
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func echo(ctx context.Context, cc *grpc.ClientConn, b []byte, opts ...grpc.CallOption) ([]byte, error) {
	out := &wrapperspb.BytesValue{}
	err := cc.Invoke(ctx, "/test.Echo/Echo", wrapperspb.Bytes(b), out, opts...)
	return out.Value, err
}

// TestUnaryInterop: grpc-go's client calls a unary method many times at
// once on one connection, past the server's stream limit (the client
// queues what the limit refuses), and each call gets its own answer.
func TestUnaryInterop(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{MaxConcurrentStreams: 8, Workers: 4})
	cc := f.dial()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			for i := range 20 {
				want := []byte(strings.Repeat(string(rune('a'+g%26)), i+g))
				got, err := echo(ctx, cc, want)
				if err != nil || string(got) != string(want) {
					errs <- errors.New("echo " + string(want) + ": got " + string(got) + ", err " + errString(err))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// TestLargeMessages: messages larger than the windows go through both
// ways (flow control); one over the bound is refused RESOURCE_EXHAUSTED
// in either direction, and the connection serves the next call.
func TestLargeMessages(t *testing.T) {
	t.Parallel()
	const max = 1 << 20
	f := start(t, h2grpc.Options{MaxMessageBytes: max})
	cc := f.dial(grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20), grpc.MaxCallSendMsgSize(8<<20)))
	ctx := ctxT(t)
	big := make([]byte, max-16)
	for i := range big {
		big[i] = byte(i * 7)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			got, err := echo(ctx, cc, big)
			if err != nil || !slices.Equal(got, big) {
				t.Errorf("large echo: %d bytes back, err %v", len(got), err)
			}
		})
	}
	wg.Wait()
	if _, err := echo(ctx, cc, make([]byte, max+1)); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
		t.Errorf("oversized request: %v, want ResourceExhausted", err)
	}
	out := &wrapperspb.BytesValue{}
	if err := cc.Invoke(ctx, "/test.Echo/Big", wrapperspb.UInt32(max+100), out); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("oversized response: %v, want ResourceExhausted", err)
	}
	if got, err := echo(ctx, cc, []byte("after")); err != nil || string(got) != "after" {
		t.Errorf("after the refusals: %q, %v", got, err)
	}
}

// TestUnknownMethod: a method no service has is UNIMPLEMENTED, in
// grpc-go's words.
func TestUnknownMethod(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{})
	cc := f.dial()
	err := cc.Invoke(ctxT(t), "/test.Echo/Nope", wrapperspb.Bytes(nil), &wrapperspb.BytesValue{})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "unknown method Nope for service test.Echo") {
		t.Errorf("unknown method: %v", err)
	}
	err = cc.Invoke(ctxT(t), "/no.Such/Thing", wrapperspb.Bytes(nil), &wrapperspb.BytesValue{})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "unknown service no.Such") {
		t.Errorf("unknown service: %v", err)
	}
}

// TestTLS: the server speaks TLS with ALPN h2 to grpc-go's client, and
// refuses a client that does not trust it without hurting the next.
func TestTLS(t *testing.T) {
	t.Parallel()
	cert, pool := selfSigned(t)
	f := start(t, h2grpc.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	untrusted := f.dial(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: x509.NewCertPool(), ServerName: "localhost"})))
	if _, err := echo(ctxT(t), untrusted, []byte("x")); status.Code(err) != codes.Unavailable {
		t.Errorf("untrusted client: %v, want Unavailable", err)
	}
	cc := f.dial(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost"})))
	if got, err := echo(ctxT(t), cc, []byte("over tls")); err != nil || string(got) != "over tls" {
		t.Errorf("echo over TLS: %q, %v", got, err)
	}
}

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestHealthAndReflection: grpc-go's health service (unary Check and
// server-streaming Watch) and reflection (bidi, v1 and v1alpha) run on
// the server unchanged.
func TestHealthAndReflection(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{})
	f.health.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	cc := f.dial()
	ctx := ctxT(t)
	hc := healthpb.NewHealthClient(cc)
	if resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "svc"}); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v, %v", resp, err)
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "other"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check of an unknown service: %v, want NotFound", err)
	}
	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := watch.Recv(); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch's first answer: %v, %v", resp, err)
	}
	f.health.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	if resp, err := watch.Recv(); err != nil || resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch's update: %v, %v", resp, err)
	}

	rc, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the stream serves several requests
		if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		resp, err := rc.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			names = append(names, s.Name)
		}
		slices.Sort(names)
		want := []string{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection", "test.Echo"}
		if !slices.Equal(names, want) {
			t.Fatalf("reflection lists %v, want %v", names, want)
		}
	}
	if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "grpc.health.v1.Health"}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := rc.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Fatalf("file containing grpc.health.v1.Health: %v, %v", resp, err)
	}
	rc.CloseSend()
	if _, err := rc.Recv(); err == nil {
		t.Error("the reflection stream goes on after the client closed its side")
	}

	ra, err := reflectionalphapb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// v1alpha is deprecated, and still what older grpcurl builds ask.
	ra.Send(&reflectionalphapb.ServerReflectionRequest{MessageRequest: &reflectionalphapb.ServerReflectionRequest_ListServices{}}) //lint:ignore SA1019 v1alpha is served on purpose
	//lint:ignore SA1019 v1alpha is served on purpose
	if resp, err := ra.Recv(); err != nil || len(resp.GetListServicesResponse().GetService()) != 4 {
		t.Fatalf("v1alpha reflection: %v, %v", resp, err)
	}
}

// TestGracefulShutdown: Shutdown lets a call in flight finish and answer,
// then the server stops; new connections are refused meanwhile.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{})
	cc := f.dial()
	ctx := ctxT(t)
	res := make(chan error, 1)
	go func() {
		out := &wrapperspb.BytesValue{}
		res <- cc.Invoke(ctx, "/test.Echo/Block", wrapperspb.Bytes([]byte("in flight")), out)
	}()
	<-f.echo.started
	stopped := make(chan error, 1)
	go func() { stopped <- f.srv.Shutdown(ctx) }()
	// The listener closes at once.
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the listener still accepts after Shutdown")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) with a call in flight", err)
	default:
	}
	close(f.echo.release)
	if err := <-res; err != nil {
		t.Errorf("the call in flight: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestShutdownUnderLoad: calls keep coming while Shutdown drains; each is
// answered or refused as unavailable (none hangs or gets another error),
// and the call in flight when it began is answered.
func TestShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{})
	cc := f.dial()
	ctx := ctxT(t)
	blocked := make(chan error, 1)
	go func() {
		blocked <- cc.Invoke(ctx, "/test.Echo/Block", wrapperspb.Bytes([]byte("b")), &wrapperspb.BytesValue{})
	}()
	<-f.echo.started
	var wg sync.WaitGroup
	var answered atomic.Int64
	warm := make(chan struct{}) // closed once 50 calls were answered
	var other sync.Map
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				_, err := echo(ctx, cc, []byte("x"))
				switch status.Code(err) {
				case codes.OK:
					if answered.Add(1) == 50 {
						close(warm)
					}
				case codes.Unavailable:
					return
				default:
					other.Store([2]int{g, i}, err)
					return
				}
			}
		})
	}
	callersDone := make(chan struct{})
	go func() { wg.Wait(); close(callersDone) }()
	select {
	case <-warm:
	case <-callersDone: // every caller failed early: reported below
	}
	stopped := make(chan error, 1)
	go func() { stopped <- f.srv.Shutdown(ctx) }()
	close(f.echo.release)
	if err := <-blocked; err != nil {
		t.Errorf("the call in flight at Shutdown: %v", err)
	}
	wg.Wait()
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	other.Range(func(k, v any) bool {
		t.Errorf("call %v: %v, want OK or Unavailable", k, v)
		return true
	})
}

// TestStreamingFlowControl: a bidi stream whose answers pass the client's
// windows many times over (reflection's file descriptors, requested 300
// times back to back) delivers every answer, in order.
func TestStreamingFlowControl(t *testing.T) {
	t.Parallel()
	f := start(t, h2grpc.Options{})
	cc := f.dial(grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	ctx := ctxT(t)
	rc, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			host := "h" + strings.Repeat("x", i%7)
			if err := rc.Send(&reflectionpb.ServerReflectionRequest{Host: host, MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "grpc.reflection.v1.ServerReflection"}}); err != nil {
				sent <- err
				return
			}
		}
		sent <- rc.CloseSend()
	}()
	total := 0
	for i := range n {
		resp, err := rc.Recv()
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if want := "h" + strings.Repeat("x", i%7); resp.GetValidHost() != want {
			t.Fatalf("answer %d is for host %q, want %q", i, resp.GetValidHost(), want)
		}
		for _, fd := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
			total += len(fd)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if total < 4*(64<<10) {
		t.Errorf("the answers carried %d bytes: not past the windows", total)
	}
	if _, err := rc.Recv(); err != io.EOF {
		t.Errorf("after the last answer: %v, want EOF", err)
	}
}
