package httplimit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/internal/rltest"
)

// failConfig has one endpoint per fail policy: /open (rule a), /closed
// (rule b), /local (rule items, 2 per hour per node when the server is
// gone).
func failConfig() Config {
	return Config{
		Endpoints: []Endpoint{
			{Pattern: "GET /open", Rules: []string{"a"}, Scope: ScopeGlobal},
			{Pattern: "GET /closed", Rules: []string{"b"}, Scope: ScopeGlobal},
			{Pattern: "GET /local", Rules: []string{"items"}, Scope: ScopeGlobal},
		},
		Default: &Endpoint{Unlimited: true},
		Rules: map[string]Rule{
			"a":     {Fail: FailOpen},
			"b":     {Fail: FailClosed},
			"items": {Fail: FailLocal, Local: &LocalLimit{Algorithm: "fixed_window", Limit: 2, Window: time.Hour}},
		},
	}
}

// syncLog is a log destination safe for the middleware and the test.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestFailPoliciesWhenTheServerDies(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, serverRules)
	var log syncLog
	reg := prometheus.NewRegistry()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	l := start(t, p.Addr, failConfig(), WithLogger(slog.New(slog.NewTextHandler(&log, nil))), WithRegistry(reg), withClock(now))
	h := l.Wrap(ok)
	for _, path := range []string{"/open", "/closed", "/local"} {
		if w := do(h, "GET", path, "192.0.2.1:1"); w.Code != 200 || w.Header().Get("Ratelimit") == "" {
			t.Fatalf("%s with the server up: %d %v", path, w.Code, w.Header())
		}
	}
	p.Kill()

	for range 10 {
		w := do(h, "GET", "/open", "192.0.2.1:1")
		if w.Code != 200 || w.Header().Get("Ratelimit") != "" {
			t.Fatalf("open: %d %v", w.Code, w.Header())
		}
	}
	w := do(h, "GET", "/closed", "192.0.2.1:1")
	var prob client.Problem
	json.Unmarshal(w.Body.Bytes(), &prob)
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || w.Header().Get("Content-Type") != "application/problem+json" ||
		prob.Type != temporaryReducedCapacity || prob.Status != 503 || prob.ViolatedPolicies[0] != "b" || prob.RetryAfter != 1 {
		t.Fatalf("closed: %d %v %s", w.Code, w.Header(), w.Body)
	}
	var codes []int
	for range 3 {
		w := do(h, "GET", "/local", "192.0.2.1:1")
		codes = append(codes, w.Code)
		if w.Code == 429 && w.Header().Get("Retry-After") == "" {
			t.Fatalf("local denial without Retry-After: %v", w.Header())
		}
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Fatalf("local fallback of 2 per node: %v", codes)
	}
	if n := counterValue(l.m.failPolicy.WithLabelValues("a", "open")); n != 10 {
		t.Errorf("fail_policy{a,open} = %v, want 10", n)
	}
	if n := strings.Count(log.String(), "rule=a "); n != 1 {
		t.Errorf("rule a logged %d times for 10 activations, want 1 per interval:\n%s", n, log.String())
	}
	// A minute on (the default interval), the next activation logs again,
	// with the count of those not logged.
	clock.Add(int64(time.Minute))
	do(h, "GET", "/open", "192.0.2.1:1")
	if n := strings.Count(log.String(), "rule=a "); n != 2 || !strings.Contains(log.String(), "rule=a policy=open requests=10 ") {
		t.Errorf("after the interval:\n%s", log.String())
	}
	if gauge(t, reg, "httplimit_breaker_open") != 1 {
		t.Errorf("breaker not open after the server died")
	}
}

// TestFailPoliciesWhenTheServerIsSlow: a server slower than the timeout is
// as good as gone, and the request does not wait for it.
func TestFailPoliciesWhenTheServerIsSlow(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, serverRules)
	proxy := rltest.NewProxy(t, p.Addr)
	cfg := failConfig()
	cfg.Timeout = 30 * time.Millisecond
	cfg.Breaker.Failures = 1 << 20 // keep asking: this test is about the deadline
	l := start(t, proxy.Addr(), cfg, WithLogger(slog.New(slog.DiscardHandler)))
	h := l.Wrap(ok)
	const delay = 2 * time.Second
	proxy.SetDelay(delay)
	for _, c := range []struct {
		path string
		code int
	}{{"/open", 200}, {"/closed", 503}, {"/local", 200}, {"/local", 200}, {"/local", 429}} {
		start := time.Now()
		w := do(h, "GET", c.path, "192.0.2.1:1")
		took := time.Since(start)
		if w.Code != c.code {
			t.Errorf("%s: %d, want %d", c.path, w.Code, c.code)
		}
		// Well inside the server's delay: the timeout, not the server,
		// ended the wait (with room for a loaded machine).
		if took > delay/2 {
			t.Errorf("%s took %v with a %v timeout", c.path, took, cfg.Timeout)
		}
		t.Logf("%s: %d in %v", c.path, w.Code, took)
	}
}

// TestBreakerOpensAndRecovers: after consecutive failures the middleware
// stops asking a dead server, and asks again (and is answered) once it is
// back.
func TestBreakerOpensAndRecovers(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, serverRules)
	proxy := rltest.NewProxy(t, p.Addr)
	cfg := failConfig()
	cfg.Breaker = client.BreakerSettings{Failures: 3, Backoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	reg := prometheus.NewRegistry()
	l := start(t, proxy.Addr(), cfg, WithRegistry(reg), WithLogger(slog.New(slog.DiscardHandler)))
	h := l.Wrap(ok)
	if w := do(h, "GET", "/closed", "192.0.2.1:1"); w.Code != 200 {
		t.Fatalf("server up: %d", w.Code)
	}
	proxy.Refuse(true)
	for range 3 {
		if w := do(h, "GET", "/closed", "192.0.2.1:1"); w.Code != 503 {
			t.Fatalf("server refused: %d", w.Code)
		}
	}
	if gauge(t, reg, "httplimit_breaker_open") != 1 || l.Client().BreakerState() != "open" {
		t.Fatalf("breaker %q after 3 failures", l.Client().BreakerState())
	}
	proxy.Refuse(false)
	deadline := time.Now().Add(rltest.Deadline)
	for do(h, "GET", "/closed", "192.0.2.1:1").Code != 200 {
		if time.Now().After(deadline) {
			t.Fatal("the middleware never asked the server again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if gauge(t, reg, "httplimit_breaker_open") != 0 || l.Client().BreakerState() != "closed" {
		t.Fatalf("breaker %q after the server came back", l.Client().BreakerState())
	}
}

// TestLocalBudgetInTheMiddleware serves a budgeted rule from memory, in
// front of a real rlserver: far fewer round trips than requests, never more
// admitted than the limit, and a budgeted rule's units go back when another
// rule of the request denies. The rules' windows are 366 days long, so none
// ends while the test runs.
func TestLocalBudgetInTheMiddleware(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, "rules:\n"+
		"  - {name: reads, algorithm: fixed_window, limit: 100, window: 8784h}\n"+
		"  - {name: tenant, algorithm: fixed_window, limit: 1, window: 8784h}\n")
	reg := prometheus.NewRegistry()
	l := start(t, p.Addr, Config{
		Endpoints: []Endpoint{
			{Pattern: "GET /r", Rules: []string{"reads"}, Scope: ScopeGlobal},
			{Pattern: "GET /both", Rules: []string{"reads", "tenant"}, Scope: ScopeIP},
		},
		Default: &Endpoint{Unlimited: true},
		Rules:   map[string]Rule{"reads": {Budget: &Budget{Chunk: 20, MaxHold: time.Hour}}},
	}, WithRegistry(reg))
	windowsKnown(t, l)
	h := l.Wrap(ok)
	allowed := 0
	for range 150 {
		if w := do(h, "GET", "/r", "192.0.2.1:1"); w.Code == 200 {
			allowed++
		}
	}
	if allowed != 100 {
		t.Fatalf("%d of 150 admitted under a limit of 100", allowed)
	}
	if n, allows := roundTrips(t, reg, "rl.acquire"), roundTrips(t, reg, "rl.allow"); n > 8 || allows != 0 {
		t.Fatalf("%d RL.ACQUIRE and %d RL.ALLOW for 150 requests with chunks of 20", n, allows)
	}
	// reads (budgeted) takes a unit, tenant (at the server) denies the
	// second request: the unit goes back to the budget.
	for i := range 5 {
		w := do(h, "GET", "/both", "192.0.2.7:1")
		if want := map[bool]int{true: 200, false: 429}[i == 0]; w.Code != want {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	l.Close(context.Background())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer rdb.Close()
	c := client.New(rdb)
	if d, err := c.Peek(context.Background(), "ip:192.0.2.7", "reads", 1); err != nil || d.Remaining != 99 {
		t.Fatalf("reads for 192.0.2.7: %d remaining after one admitted request, want 99 (%v)", d.Remaining, err)
	}
}

// roundTrips reads how many round trips of command the middleware made
// from its latency histogram in reg.
func roundTrips(t testing.TB, reg *prometheus.Registry, command string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "httplimit_server_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "command" && l.GetValue() == command {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// gauge reads a gauge's value from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			var m *dto.Metric = f.GetMetric()[0]
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// TestRefusedRequestGivesBackLocalSpends: with the server gone, a request
// one rule's local limiter admits and another's denies is refused, and the
// first gives its unit back — also for a rule that has a local budget.
func TestRefusedRequestGivesBackLocalSpends(t *testing.T) {
	t.Parallel()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	l := start(t, dead, Config{
		Endpoints: []Endpoint{
			{Pattern: "GET /both", Rules: []string{"a", "b"}, Scope: ScopeGlobal},
			{Pattern: "GET /a", Rules: []string{"a"}, Scope: ScopeGlobal},
		},
		Default: &Endpoint{Unlimited: true},
		Rules: map[string]Rule{
			"a": {Fail: FailLocal, Local: &LocalLimit{Algorithm: "fixed_window", Limit: 5, Window: time.Hour}, Budget: &Budget{Chunk: 10}},
			"b": {Fail: FailLocal, Local: &LocalLimit{Algorithm: "fixed_window", Limit: 1, Window: time.Hour}},
		},
		Timeout: time.Second,
	}, WithLogger(slog.New(slog.DiscardHandler)))
	h := l.Wrap(ok)
	if w := do(h, "GET", "/both", "192.0.2.1:1"); w.Code != 200 {
		t.Fatalf("first: %d", w.Code)
	}
	if w := do(h, "GET", "/both", "192.0.2.1:1"); w.Code != 429 {
		t.Fatalf("second: %d", w.Code)
	}
	// a admitted twice, once for a refused request: 1 spent, and this one.
	if w := do(h, "GET", "/a", "192.0.2.1:1"); w.Code != 200 || !strings.HasPrefix(w.Header().Get("Ratelimit"), `"a";r=3;`) {
		t.Fatalf("a after a refused request: %d %q", w.Code, w.Header().Get("Ratelimit"))
	}
}

// TestReloadRetiringABudget: a reload that changes a rule's budget closes
// the old one while requests under the old configuration may still be
// using it; they are decided by the server instead, never by the fail
// policy.
func TestReloadRetiringABudget(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, "rules:\n  - {name: reads, algorithm: fixed_window, limit: 1000000000, window: 8784h}\n")
	cfg := func(chunk int64) Config {
		return Config{
			Endpoints: []Endpoint{{Pattern: "GET /r", Rules: []string{"reads"}}},
			Default:   &Endpoint{Unlimited: true},
			Rules:     map[string]Rule{"reads": {Fail: FailClosed, Budget: &Budget{Chunk: chunk}}},
			Timeout:   10 * time.Second, // a loaded machine; the deadline is not under test
		}
	}
	l := start(t, p.Addr, cfg(10))
	h := l.Wrap(ok)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var served atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if w := do(h, "GET", "/r", fmt.Sprintf("192.0.2.%d:1", g)); w.Code != 200 {
					t.Errorf("status %d during reloads", w.Code)
					return
				}
				served.Add(1)
			}
		}()
	}
	// At least 100 reloads, and until 200 requests ran across them (bounded
	// in time).
	deadline := time.Now().Add(rltest.Deadline)
	for i := 0; (i < 100 || served.Load() < 200) && time.Now().Before(deadline); i++ {
		if err := l.Reload(cfg(int64(10 + i%2))); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if served.Load() < 200 {
		t.Fatalf("%d requests served during the reloads", served.Load())
	}
}
