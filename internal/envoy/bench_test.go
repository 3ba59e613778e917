package envoy_test

import (
	"context"
	"strconv"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/rlserver/rlserver/internal/envoy"
	"github.com/rlserver/rlserver/internal/envoy/envoytest"
)

const benchConfig = "domain: bench\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1000000000}\n"

func benchRequests(n int) []*rlsv3.RateLimitRequest {
	reqs := make([]*rlsv3.RateLimitRequest, n)
	for i := range reqs {
		reqs[i] = request("bench", desc("k", "v"+strconv.Itoa(i)))
	}
	return reqs
}

// BenchmarkService is the front end's own cost per call — matching, key,
// decision over the in-memory limiter, response — without gRPC; the
// limiter alone is the baseline beside it.
func BenchmarkService(b *testing.B) {
	h := newHarness(b, benchConfig)
	reqs := benchRequests(1000)
	b.Run("ShouldRateLimit", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := h.svc.ShouldRateLimit(context.Background(), reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
	b.Run("limiter-alone", func(b *testing.B) {
		lim := envoytest.NewLimiter(nil)
		rule := h.ruleOf("bench", "k", "v")
		if err := lim.SetRules(mustConfig(b, h).Defs); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := []envoy.Request{{Key: "bench|k=v1", Rule: rule, Cost: 1}}
			for pb.Next() {
				if _, err := lim.Decide(context.Background(), r, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	// Through gRPC, grpc-go's client included, on each server.
	for _, tr := range []envoy.Transport{envoy.TransportFast, envoy.TransportGRPCGo} {
		b.Run("grpc-loopback-"+string(tr), func(b *testing.B) {
			h := newHarness(b, benchConfig, func(o *harnessOpts) { o.server.Transport = tr })
			b.ReportAllocs()
			b.SetParallelism(50)
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := h.client.ShouldRateLimit(context.Background(), reqs[i%len(reqs)]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		})
	}
}
