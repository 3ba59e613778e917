package envoy_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlserver/rlserver/internal/envoy"
	"github.com/rlserver/rlserver/internal/envoy/envoytest"
)

// t0 is the tests' first instant: a whole second, 8 hours into a UTC day
// (1_800_000_000 = 20833 days + 28800 s), 0 s into its minute.
var t0 = time.Unix(1_800_000_000, 0)

// harness is a Service over the in-memory limiter, served on 127.0.0.1 and
// reached by a real gRPC client.
type harness struct {
	t      testing.TB
	clock  *envoytest.Clock
	lim    *envoytest.Limiter
	svc    *envoy.Service
	srv    *envoy.Server
	conn   *grpc.ClientConn
	client rlsv3.RateLimitServiceClient
	reg    *prometheus.Registry
	logs   *syncBuffer
	dir    string // the configuration's directory
	loader *envoy.Loader
}

type harnessOpts struct {
	svc    envoy.Options
	server envoy.ServerOptions
	dial   []grpc.DialOption
	// layout writes the configuration under dir and returns the path to
	// load; by default configYAML is dir/config.yaml and dir is loaded.
	layout func(dir string) string
}

// newHarness serves configYAML (written to a file and loaded by a Loader).
func newHarness(t testing.TB, configYAML string, opts ...func(*harnessOpts)) *harness {
	t.Helper()
	h := &harness{t: t, clock: envoytest.NewClock(t0), reg: prometheus.NewRegistry(), logs: &syncBuffer{}, dir: t.TempDir()}
	h.lim = envoytest.NewLimiter(h.clock.Now)
	var o harnessOpts
	o.svc = envoy.Options{Limiter: h.lim, Registerer: h.reg, Now: h.clock.Now,
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	o.dial = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	for _, f := range opts {
		f(&o)
	}
	svc, err := envoy.NewService(o.svc)
	if err != nil {
		t.Fatal(err)
	}
	h.svc = svc
	path := h.dir
	if o.layout != nil {
		path = o.layout(h.dir)
	} else {
		h.writeConfig("config.yaml", configYAML)
	}
	h.loader = envoy.NewLoader(path, svc, envoy.LoaderOptions{Debounce: 20 * time.Millisecond})
	if err := h.loader.Reload(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.srv = envoy.Start(ln, svc, o.server)
	t.Cleanup(h.srv.Stop)
	h.conn, err = grpc.NewClient(ln.Addr().String(), o.dial...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.conn.Close() })
	h.client = rlsv3.NewRateLimitServiceClient(h.conn)
	t.Cleanup(h.loader.Stop)
	return h
}

func (h *harness) writeConfig(name, content string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, name), []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// call sends one request and returns the response in the compact form of
// show, failing the test on a gRPC error.
func (h *harness) call(req *rlsv3.RateLimitRequest) string {
	h.t.Helper()
	resp, err := h.do(req)
	if err != nil {
		h.t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	return show(resp)
}

func (h *harness) do(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.client.ShouldRateLimit(ctx, req)
}

// request builds a request of descriptors in domain.
func request(domain string, descs ...*rlv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs}
}

// desc builds a descriptor of key value pairs ("k" alone: an empty value).
func desc(pairs ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i < len(pairs); i += 2 {
		e := &rlv3.RateLimitDescriptor_Entry{Key: pairs[i]}
		if i+1 < len(pairs) {
			e.Value = pairs[i+1]
		}
		d.Entries = append(d.Entries, e)
	}
	return d
}

func hits(d *rlv3.RateLimitDescriptor, n uint64) *rlv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func override(d *rlv3.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit, mult uint32) *rlv3.RateLimitDescriptor {
	d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	if mult != 0 {
		d.Limit.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return d
}

// show writes a response compactly: the overall code, then each status as
// [CODE limit/UNIT[xN][ name] rem=R reset=Ss], then the headers.
func show(resp *rlsv3.RateLimitResponse) string {
	var b strings.Builder
	b.WriteString(resp.OverallCode.String())
	for _, st := range resp.Statuses {
		b.WriteString(" [" + st.Code.String())
		if l := st.CurrentLimit; l != nil {
			fmt.Fprintf(&b, " %d/%s", l.RequestsPerUnit, l.Unit)
			if l.UnitMultiplier != nil {
				fmt.Fprintf(&b, "x%d", l.UnitMultiplier.GetValue())
			}
			if l.Name != "" {
				b.WriteString(" " + l.Name)
			}
		}
		if st.LimitRemaining != 0 || st.CurrentLimit != nil {
			fmt.Fprintf(&b, " rem=%d", st.LimitRemaining)
		}
		if st.DurationUntilReset != nil {
			fmt.Fprintf(&b, " reset=%s", st.DurationUntilReset.AsDuration())
		}
		b.WriteString("]")
	}
	for _, hv := range resp.ResponseHeadersToAdd {
		b.WriteString(" " + showHeader(hv))
	}
	return b.String()
}

func showHeader(hv *corev3.HeaderValue) string { return hv.Key + ": " + hv.Value }

// syncBuffer is a log destination tests read while the server writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// counter reads a metric's value from the registry: name{labels} given as
// "label=value" pairs.
func (h *harness) counter(name string, labels ...string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for _, l := range labels {
				k, v, _ := strings.Cut(l, "=")
				if have[k] != v {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

// ruleOf returns the rule the descriptor entries of domain compile to.
func (h *harness) ruleOf(domain string, pairs ...string) string {
	h.t.Helper()
	cfg, _ := h.svc.Config()
	leaf, _ := cfg.Domains[domain].Match(desc(pairs...).Entries, nil)
	if leaf == nil || leaf.Limit.Rule == "" {
		h.t.Fatalf("no rule for %v in %s", pairs, domain)
	}
	return leaf.Limit.Rule
}

// peek reads a counter as RESP's RL.PEEK <key> <rule> would.
func (h *harness) peek(key, rule string) int64 {
	h.t.Helper()
	d, err := h.lim.Peek(key, rule)
	if err != nil {
		h.t.Fatal(err)
	}
	return d.Remaining
}
