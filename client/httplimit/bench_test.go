package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/rltest"
)

// noop is the application in the benchmarks: it writes nothing, so what is
// measured is the middleware.
var noop = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// discard is a ResponseWriter that keeps headers and drops the rest,
// reused across iterations (httptest.ResponseRecorder allocates per
// request, which would be counted against the middleware).
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

func benchLimiter(b *testing.B, addr string, cfg Config, opts ...Option) *Limiter {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	l, err := New(rdb, cfg, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		l.Close(context.Background())
		rdb.Close()
	})
	return l
}

// BenchmarkMiddleware measures what the middleware adds to a request:
//
//	baseline     the application alone
//	budget-hit   a rule served from a local budget (no round trip); the
//	             decision itself is client.BenchmarkBudgetTake/hit
//	no-headers   the same without rate-limit fields on the response
//	round-trip   a rule decided by a real rlserver over loopback, with the
//	             p50 and p99 of each request's time
func BenchmarkMiddleware(b *testing.B) {
	r := httptest.NewRequest("GET", "/items/42", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	b.Run("baseline", func(b *testing.B) {
		w := &discard{h: http.Header{}}
		b.ReportAllocs()
		for b.Loop() {
			noop.ServeHTTP(w, r)
		}
	})
	p := rltest.Start(b, bin, "rules:\n  - {name: reads, algorithm: sliding_counter, limit: 1000000000, window: 1h}\n")
	for _, c := range []struct {
		name string
		none bool
	}{{"budget-hit", false}, {"no-headers", true}} {
		b.Run(c.name, func(b *testing.B) {
			l := benchLimiter(b, p.Addr, Config{
				Endpoints: []Endpoint{{Pattern: "GET /items/{id}", Rules: []string{"reads"}}},
				Default:   &Endpoint{Unlimited: true},
				Rules:     map[string]Rule{"reads": {Budget: &Budget{Chunk: 1 << 40, LowWater: -1, MaxHold: time.Hour}}},
				NoHeaders: c.none, Timeout: time.Second,
			})
			h := l.Wrap(noop)
			w := &discard{h: http.Header{}}
			h.ServeHTTP(w, r) // the first request reserves
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
		})
	}
	b.Run("round-trip", func(b *testing.B) {
		l := benchLimiter(b, p.Addr, Config{
			Endpoints: []Endpoint{{Pattern: "GET /items/{id}", Rules: []string{"reads"}}},
			Default:   &Endpoint{Unlimited: true}, Timeout: time.Second,
		})
		h := l.Wrap(noop)
		w := &discard{h: http.Header{}}
		h.ServeHTTP(w, r)
		took := make([]time.Duration, 0, 1<<16)
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			start := time.Now()
			h.ServeHTTP(w, r)
			if len(took) < cap(took) {
				took = append(took, time.Since(start))
			}
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		if w.h.Get("Ratelimit") == "" {
			b.Fatal("no decision from the server")
		}
	})
}

// BenchmarkRoundTripsSaved reports the RL.ACQUIRE round trips to a real
// rlserver per request through the middleware with a local budget of 20 and
// of 50 (the rest are served from memory).
func BenchmarkRoundTripsSaved(b *testing.B) {
	p := rltest.Start(b, bin, "rules:\n  - {name: reads, algorithm: sliding_counter, limit: 1000000000, window: 8784h}\n")
	for _, chunk := range []int64{20, 50} {
		b.Run(fmt.Sprint("chunk", chunk), func(b *testing.B) {
			reg := prometheus.NewRegistry()
			l := benchLimiter(b, p.Addr, Config{
				Endpoints: []Endpoint{{Pattern: "GET /items/{id}", Rules: []string{"reads"}}},
				Default:   &Endpoint{Unlimited: true},
				Rules:     map[string]Rule{"reads": {Budget: &Budget{Chunk: chunk, MaxHold: time.Hour}}},
				Timeout:   time.Second,
			}, WithRegistry(reg))
			h := l.Wrap(noop)
			r := httptest.NewRequest("GET", "/items/42", nil)
			r.RemoteAddr = fmt.Sprintf("192.0.2.%d:1234", chunk) // a key of its own
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
			b.ReportMetric(float64(roundTrips(b, reg, "rl.acquire"))/float64(b.N), "trips/req")
		})
	}
}
