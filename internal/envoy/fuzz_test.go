package envoy_test

import (
	"context"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/rlserver/rlserver/internal/envoy"
	"github.com/rlserver/rlserver/internal/envoy/config"
	"github.com/rlserver/rlserver/internal/envoy/envoytest"
)

// FuzzShouldRateLimit sends arbitrary requests (any bytes that decode as a
// RateLimitRequest) to a service with every feature configured: it must
// never panic, answer a malformed request InvalidArgument (or
// ResourceExhausted for too many overrides), and otherwise one status per
// descriptor.
func FuzzShouldRateLimit(f *testing.F) {
	cfg, err := config.Build([]config.File{
		{Name: "a.yaml", Data: []byte(`domain: rl
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 3, name: kk, replaces: [{name: ww}]}
  - key: w
    value: x*
    share_threshold: true
    rate_limit: {algorithm: token_bucket, requests_per_unit: 2, window: 90s, burst: 4, name: ww}
  - key: z
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: u
    rate_limit: {unlimited: true}
  - key: s
    shadow_mode: true
    detailed_metric: true
    rate_limit: {algorithm: sliding_log, unit: hour, requests_per_unit: 2}
`)},
		{Name: "b.yaml", Data: []byte("domain: all\nall_or_nothing: true\nresponse_headers: draft11\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: sliding_counter, unit: minute, requests_per_unit: 2}\n")},
		{Name: "c.yaml", Data: []byte("domain: hdr\nresponse_headers: draft03\ndescriptors:\n  - key: k\n    quota_mode: true\n    rate_limit: {algorithm: leaky_bucket, unit: minute, requests_per_unit: 2}\n")},
	}, config.Options{})
	if err != nil {
		f.Fatal(err)
	}
	clock := envoytest.NewClock(t0)
	svc, err := envoy.NewService(envoy.Options{Limiter: envoytest.NewLimiter(clock.Now), Now: clock.Now, MaxOverrides: 4})
	if err != nil {
		f.Fatal(err)
	}
	if err := svc.Apply(cfg); err != nil {
		f.Fatal(err)
	}
	for _, r := range []*rlsv3.RateLimitRequest{
		request("rl", desc("k", "v"), desc("w", "xy"), desc("z", "1"), desc("u", "1"), desc("s", "1")),
		request("all", desc("k", "a"), desc("k", "a"), hits(desc("k", "b"), 0)),
		request("hdr", hits(desc("k", "a"), 9)),
		request("rl", override(desc("q", "1"), 5, 2, 3)),
	} {
		data, _ := proto.Marshal(r)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &rlsv3.RateLimitRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		clock.Add(7e8) // 0.7 s per call, so windows roll over the corpus
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			switch status.Code(err) {
			case codes.InvalidArgument, codes.ResourceExhausted:
				return
			}
			t.Fatalf("%v: %v", req, err)
		}
		if len(resp.Statuses) != len(req.Descriptors) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
		}
		over := false
		for _, st := range resp.Statuses {
			over = over || st.Code == rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if over != (resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT) {
			t.Fatalf("overall %v with statuses %v", resp.OverallCode, resp.Statuses)
		}
	})
}
