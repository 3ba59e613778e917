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
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

var (
	addr     = flag.String("addr", "127.0.0.1:8081", "the service's gRPC address")
	streams  = flag.Int("c", 50, "concurrent calls in flight (goroutines)")
	nconns   = flag.Int("conns", 1, "gRPC connections the calls share (Envoy uses one per worker thread)")
	duration = flag.Duration("d", 10*time.Second, "measured duration")
	warmup   = flag.Duration("warmup", time.Second, "unmeasured duration before it")
	domain   = flag.String("domain", "bench", "request domain")
	key      = flag.String("key", "k", "descriptor entry key")
	values   = flag.Int("values", 1000, "distinct descriptor values (distinct counters)")
	timeout  = flag.Duration("timeout", time.Second, "per-call deadline (Envoy's default is 20ms; a longer one measures the tail instead of cutting it)")
	label    = flag.String("label", "", "a name printed with the result line")
	client   = flag.String("client", "h2", "h2: the minimal HTTP/2 client of h2.go (cheap, so the shared cores go to the server); grpc: grpc-go's client")
	cpuprof  = flag.String("cpuprofile", "", "write the generator's own CPU profile to this file")
)

func main() {
	flag.Parse()
	if *streams < 1 || *nconns < 1 || *values < 1 {
		fmt.Fprintln(os.Stderr, "grpcload: -c, -conns and -values must be at least 1")
		os.Exit(2)
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	do, closeConns := newCaller()
	defer closeConns()

	type result struct {
		lat          []time.Duration
		over, errors int
		firstErr     error
	}
	results := make([]result, *streams)
	start := time.Now()
	measureFrom, end := start.Add(*warmup), start.Add(*warmup+*duration)
	// The generator's own CPU over the measured part, to set beside the
	// server's: both share the machine's cores.
	cpu0 := make(chan time.Duration, 1)
	time.AfterFunc(time.Until(measureFrom), func() { cpu0 <- cpuTime() })
	var wg sync.WaitGroup
	for w := 0; w < *streams; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := &results[w]
			r.lat = make([]time.Duration, 0, 1<<16)
			var cl h2Call
			for i := w; ; i += *streams {
				t := time.Now()
				if t.After(end) {
					return
				}
				over, err := do(w%*nconns, i, &cl)
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
				case over:
					r.over++
				}
				r.lat = append(r.lat, lat)
			}
		}(w)
	}
	wg.Wait()
	clientCPU := cpuTime() - <-cpu0

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
	fmt.Printf("%s calls=%d c=%d conns=%d values=%d req/s=%.0f p50=%v p99=%v p99.9=%v max=%v over_limit=%d errors=%d client=%s client_cpu_per_call=%.1fus\n",
		*label, len(all), *streams, *nconns, *values, float64(len(all))/duration.Seconds(),
		pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), pct(0.999).Round(time.Microsecond),
		all[len(all)-1].Round(time.Microsecond), over, errors, *client, float64(clientCPU.Microseconds())/float64(len(all)))
	if firstErr != nil {
		fmt.Fprintln(os.Stderr, "grpcload: first error:", firstErr)
		os.Exit(1)
	}
}

// newCaller connects -conns connections with the -client chosen and
// returns the function making call i on connection c (over reports
// OVER_LIMIT; cl is the calling goroutine's own, for the h2 client), and
// the one closing the connections.
func newCaller() (do func(c, i int, cl *h2Call) (over bool, err error), closeConns func()) {
	reqs := make([]*rlsv3.RateLimitRequest, *values)
	frames := make([][]byte, *values) // each request as a gRPC message frame, for -client h2
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: *domain, Descriptors: []*rlv3.RateLimitDescriptor{{
			Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: *key, Value: "v" + strconv.Itoa(i)}},
		}}}
		b, err := proto.Marshal(reqs[i])
		if err != nil {
			fail(err)
		}
		frames[i] = binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b)))
		frames[i] = append(frames[i], b...)
	}
	var conns []io.Closer
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	switch *client {
	case "h2":
		path := "/" + rlsv3.RateLimitService_ServiceDesc.ServiceName + "/ShouldRateLimit"
		h2s := make([]*h2Conn, *nconns)
		for i := range h2s {
			conn, err := dialH2(*addr, path, *timeout)
			if err != nil {
				fail(err)
			}
			conns = append(conns, conn)
			h2s[i] = conn
		}
		return func(c, i int, cl *h2Call) (bool, error) {
			err := h2s[c].call(cl, frames[i%len(frames)])
			return cl.code == uint64(rlsv3.RateLimitResponse_OVER_LIMIT), err
		}, closeAll
	case "grpc":
		clients := make([]rlsv3.RateLimitServiceClient, *nconns)
		for i := range clients {
			conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				fail(err)
			}
			conns = append(conns, conn)
			clients[i] = rlsv3.NewRateLimitServiceClient(conn)
		}
		return func(c, i int, _ *h2Call) (bool, error) {
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			defer cancel()
			resp, err := clients[c].ShouldRateLimit(ctx, reqs[i%len(reqs)])
			return err == nil && resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT, err
		}, closeAll
	}
	fmt.Fprintln(os.Stderr, "grpcload: -client is h2 or grpc")
	os.Exit(2)
	return nil, nil

}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "grpcload:", err)
	os.Exit(1)
}

// cpuTime is the CPU (user + system) the process has used.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		fail(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
