// Command grpcload drives an Envoy rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) — rlserver's
// --grpc-addr, envoyproxy/ratelimit, or bench/grpcfake — with N concurrent
// calls in flight for D seconds, as Envoy's ratelimit filter does, and prints
// requests per second and the latency distribution:
//
//	go run ./bench/grpcload -addr 127.0.0.1:8081 -c 50 -d 10s -domain bench -key k -values 1000
//
// Each call carries one descriptor (key, one of `values` values, round-robin
// per stream); the server must have a limit for it (the figures are for the
// decision path, so make the limit high enough that most calls are OK; the
// count of OVER_LIMIT answers is printed). It is a benchmark, not a test:
// compare servers in one run on one machine.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var (
	addr     = flag.String("addr", "127.0.0.1:8081", "the service's gRPC address")
	streams  = flag.Int("c", 50, "concurrent calls in flight (goroutines)")
	conns    = flag.Int("conns", 1, "gRPC connections the calls share (Envoy uses one per worker thread)")
	duration = flag.Duration("d", 10*time.Second, "measured duration")
	warmup   = flag.Duration("warmup", time.Second, "unmeasured duration before it")
	domain   = flag.String("domain", "bench", "request domain")
	key      = flag.String("key", "k", "descriptor entry key")
	values   = flag.Int("values", 1000, "distinct descriptor values (distinct counters)")
	timeout  = flag.Duration("timeout", time.Second, "per-call deadline (Envoy's default is 20ms; a longer one measures the tail instead of cutting it)")
	label    = flag.String("label", "", "a name printed with the result line")
	cpuprof  = flag.String("cpuprofile", "", "write the generator's own CPU profile to this file")
)

func main() {
	flag.Parse()
	if *streams < 1 || *conns < 1 || *values < 1 {
		fmt.Fprintln(os.Stderr, "grpcload: -c, -conns and -values must be at least 1")
		os.Exit(2)
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "grpcload:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	clients := make([]rlsv3.RateLimitServiceClient, *conns)
	for i := range clients {
		conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "grpcload:", err)
			os.Exit(1)
		}
		defer conn.Close()
		clients[i] = rlsv3.NewRateLimitServiceClient(conn)
	}
	reqs := make([]*rlsv3.RateLimitRequest, *values)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: *domain, Descriptors: []*rlv3.RateLimitDescriptor{{
			Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: *key, Value: "v" + strconv.Itoa(i)}},
		}}}
	}

	type result struct {
		lat          []time.Duration
		over, errors int
		firstErr     error
	}
	results := make([]result, *streams)
	start := time.Now()
	measureFrom, end := start.Add(*warmup), start.Add(*warmup+*duration)
	var wg sync.WaitGroup
	for w := 0; w < *streams; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := &results[w]
			r.lat = make([]time.Duration, 0, 1<<16)
			client := clients[w%len(clients)]
			for i := w; ; i += *streams {
				t := time.Now()
				if t.After(end) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), *timeout)
				resp, err := client.ShouldRateLimit(ctx, reqs[i%len(reqs)])
				cancel()
				lat := time.Since(t)
				if t.Before(measureFrom) {
					continue
				}
				switch {
				case err != nil:
					r.errors++
					if r.firstErr == nil {
						r.firstErr = err
					}
				case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
					r.over++
				}
				r.lat = append(r.lat, lat)
			}
		}(w)
	}
	wg.Wait()

	var all []time.Duration
	over, errors := 0, 0
	var firstErr error
	for _, r := range results {
		all = append(all, r.lat...)
		over += r.over
		errors += r.errors
		if firstErr == nil {
			firstErr = r.firstErr
		}
	}
	if len(all) == 0 {
		fmt.Fprintln(os.Stderr, "grpcload: no calls completed")
		os.Exit(1)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	fmt.Printf("%s calls=%d c=%d conns=%d values=%d req/s=%.0f p50=%v p99=%v p99.9=%v max=%v over_limit=%d errors=%d\n",
		*label, len(all), *streams, *conns, *values, float64(len(all))/duration.Seconds(),
		pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), pct(0.999).Round(time.Microsecond),
		all[len(all)-1].Round(time.Microsecond), over, errors)
	if firstErr != nil {
		fmt.Fprintln(os.Stderr, "grpcload: first error:", firstErr)
		os.Exit(1)
	}
}
