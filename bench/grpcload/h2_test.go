package main

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/rlserver/rlserver/internal/envoy"
	"github.com/rlserver/rlserver/internal/envoy/config"
	"github.com/rlserver/rlserver/internal/envoy/envoytest"
)

// TestH2Client drives rlserver's gRPC front end with the h2 client: the
// answers (OK, then OVER_LIMIT past the limit; an error for a malformed
// request) are those the service gives, over more calls than the
// connection's first flow-control window holds.
func TestH2Client(t *testing.T) {
	svc, err := envoy.NewService(envoy.Options{Limiter: envoytest.NewLimiter(nil)})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Build([]config.File{{Name: "c.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 4000}\n")}}, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := envoy.Start(ln, svc, envoy.ServerOptions{})
	defer srv.Stop()
	c, err := dialH2(ln.Addr().String(), "/"+rlsv3.RateLimitService_ServiceDesc.ServiceName+"/ShouldRateLimit", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := func(domain string) []byte {
		b, err := proto.Marshal(&rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*rlv3.RateLimitDescriptor{{
			Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
	}
	ok := frame("d")
	var cl h2Call
	// 4000 calls of 18 bytes: past the 64 KiB of a connection's initial
	// window.
	for i := range 4001 {
		if err := c.call(&cl, ok); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		want := uint64(rlsv3.RateLimitResponse_OK)
		if i == 4000 {
			want = uint64(rlsv3.RateLimitResponse_OVER_LIMIT)
		}
		if cl.code != want {
			t.Fatalf("call %d: overall_code %d, want %d", i, cl.code, want)
		}
	}
	if err := c.call(&cl, frame("")); err == nil || !strings.Contains(err.Error(), "grpc-status 3") {
		t.Fatalf("a request without a domain: %v, want grpc-status 3 (InvalidArgument)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
