package httplimit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
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
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/testserver"
)

var bin *rltest.Binary

func TestMain(m *testing.M) {
	bin = rltest.Build()
	code := m.Run()
	bin.Remove()
	os.Exit(code)
}

// serverRules: day-long windows where a test counts requests, so the
// seconds a test takes refill nothing.
const serverRules = `rules:
  - {name: burst, algorithm: token_bucket, limit: 100, window: 1m}
  - {name: orders, algorithm: fixed_window, limit: 3, window: 24h}
  - {name: items, algorithm: fixed_window, limit: 5, window: 24h}
  - {name: tenant, algorithm: fixed_window, limit: 1, window: 24h}
  - {name: api, algorithm: sliding_counter, limit: 1000, window: 24h}
  - {name: a, algorithm: fixed_window, limit: 1000000, window: 24h}
  - {name: b, algorithm: fixed_window, limit: 1000000, window: 24h}
`

// ok is the application behind the middleware.
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// start returns a Limiter on addr for cfg, closed when the test ends. A
// test that does not set a timeout gets a generous one: the default 20 ms
// is tight for a loaded 2-core machine running tests in parallel under
// -race, and only the tests about the deadline need it tight.
func start(t *testing.T, addr string, cfg Config, opts ...Option) *Limiter {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
	l, err := New(rdb, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Close(context.Background())
		rdb.Close()
	})
	return l
}

// windowsKnown waits until the Limiter has learnt every rule's window.
func windowsKnown(t *testing.T, l *Limiter) {
	t.Helper()
	deadline := time.Now().Add(rltest.Deadline)
	for _, rs := range l.state.Load().rules {
		for rs.window.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("rule %s's window never learnt", rs.name)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// do sends one request through h from peer (host:port), with headers.
func do(h http.Handler, method, target, peer string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = peer
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestDeniedResponseMatchesTheDraft(t *testing.T) {
	t.Parallel()
	// The exact seconds in the headers need the server's clock held still
	// between the requests (a bucket refills one unit every 0.6 s): an
	// in-process server on an injected clock.
	srv := testserver.Start(t, testserver.Options{Rules: []rules.Def{testserver.Def("burst", "token_bucket", "100", "1m", "")}})
	srv.Clock.Set(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	l := start(t, srv.Addr, Config{
		Endpoints: []Endpoint{{Pattern: "POST /burst", Rules: []string{"burst"}, Scope: ScopeGlobal, Cost: 50}},
		Default:   &Endpoint{Unlimited: true},
	})
	windowsKnown(t, l)
	h := l.Wrap(ok)
	// A token bucket of 100 per minute with 50 spent: 50 left, full again
	// in 30 s — the draft's RateLimit example, for a policy named burst.
	w := do(h, "POST", "/burst", "192.0.2.1:1000")
	want := map[string]string{
		"Ratelimit-Policy": `"burst";q=100;w=60`, "Ratelimit": `"burst";r=50;t=30`,
		"X-Ratelimit-Limit": "100", "X-Ratelimit-Remaining": "50", "X-Ratelimit-Reset": "30",
	}
	if w.Code != 200 || w.Body.String() != "ok" {
		t.Fatalf("first request: %d %q", w.Code, w.Body)
	}
	for k, v := range want {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if w := do(h, "POST", "/burst", "192.0.2.1:1000"); w.Code != 200 || w.Header().Get("Ratelimit") != `"burst";r=0;t=60` {
		t.Fatalf("second request: %d %v", w.Code, w.Header())
	}
	// The third waits for 50 units to drain: 30 s.
	w = do(h, "POST", "/burst", "192.0.2.1:1000")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("third request: %d", w.Code)
	}
	for k, v := range map[string]string{
		"Retry-After": "30", "Ratelimit": `"burst";r=0;t=30`, "Ratelimit-Policy": `"burst";q=100;w=60`,
		"Content-Type": "application/problem+json", "X-Ratelimit-Reset": "30",
	} {
		if got := w.Header().Get(k); got != v {
			t.Errorf("429 %s: %q, want %q", k, got, v)
		}
	}
	wantBody := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded",` +
		`"status":429,"detail":"rate limit exceeded for burst; retry after 30 s","violated-policies":["burst"],"retry-after":30}` + "\n"
	if w.Body.String() != wantBody {
		t.Errorf("body\n%s\nwant\n%s", w.Body, wantBody)
	}
}

func TestHeaderStyles(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, serverRules)
	for _, c := range []struct {
		style    client.HeaderStyle
		none     bool
		present  []string
		absent   []string
		unixTime bool
	}{
		{style: client.DraftHeaders, present: []string{"Ratelimit"}, absent: []string{"X-Ratelimit-Limit"}},
		{style: client.LegacyHeaders, present: []string{"X-Ratelimit-Limit"}, absent: []string{"Ratelimit"}},
		{style: client.LegacyHeaders | client.UnixReset, present: []string{"X-Ratelimit-Reset"}, unixTime: true},
		{none: true, absent: []string{"Ratelimit", "X-Ratelimit-Limit"}},
	} {
		l := start(t, p.Addr, Config{Default: &Endpoint{Rules: []string{"api"}}, Headers: c.style, NoHeaders: c.none})
		w := do(l.Wrap(ok), "GET", "/", "192.0.2.9:1")
		for _, k := range c.present {
			if w.Header().Get(k) == "" {
				t.Errorf("style %b: no %s", c.style, k)
			}
		}
		for _, k := range c.absent {
			if w.Header().Get(k) != "" {
				t.Errorf("style %b: %s sent", c.style, k)
			}
		}
		if c.unixTime {
			var reset int64
			fmt.Sscan(w.Header().Get("X-Ratelimit-Reset"), &reset)
			// A sliding counter of 24 h is full again at most 48 h on.
			if now := time.Now().Unix(); reset < now || reset > now+2*86400+5 {
				t.Errorf("unix reset %d, now %d", reset, now)
			}
		}
	}
}

func TestEndpointPrecedenceEndToEnd(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, serverRules)
	l := start(t, p.Addr, Config{
		Endpoints: []Endpoint{
			{Pattern: "GET /items/{id}", Rules: []string{"items"}},
			{Pattern: "GET /items/special", Rules: []string{"orders"}},
			{Pattern: "GET /healthz", Unlimited: true},
		},
		Default: &Endpoint{Rules: []string{"api"}},
	})
	h := l.Wrap(ok)
	for target, rule := range map[string]string{
		"/items/7": "items", "/items/special": "orders", "/items/7/extra": "api", "/elsewhere": "api", "/healthz": "",
	} {
		w := do(h, "GET", target, "192.0.2.2:1")
		got := strings.SplitN(w.Header().Get("Ratelimit"), ";", 2)[0]
		if want := fmt.Sprintf("%q", rule); (rule == "" && got != "") || (rule != "" && got != want) {
			t.Errorf("%s: RateLimit %q, want rule %q", target, w.Header().Get("Ratelimit"), rule)
		}
	}
}

func TestKeyScopes(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, serverRules)
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	l := start(t, p.Addr, Config{
		Endpoints: []Endpoint{
			{Pattern: "POST /orders", Rules: []string{"orders"}, Scope: ScopeUser},
			{Pattern: "GET /k", Rules: []string{"orders"}, Scope: ScopeAPIKey, Header: "X-API-Key"},
			{Pattern: "GET /ip", Rules: []string{"orders"}, Scope: ScopeIP},
			{Pattern: "GET /g", Rules: []string{"orders"}, Scope: ScopeGlobal},
		},
		Default: &Endpoint{Unlimited: true}, TrustedProxies: trusted, KeyPrefix: "t:",
	})
	h := l.Wrap(ok)
	// The user comes from the authentication stage in front.
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u := r.Header.Get("X-Test-User"); u != "" {
				r = r.WithContext(WithUser(r.Context(), u))
			}
			next.ServeHTTP(w, r)
		})
	}
	withAuth := auth(h)
	codes := func(h http.Handler, n int, method, target, peer string, header ...string) string {
		var b strings.Builder
		for range n {
			fmt.Fprint(&b, do(h, method, target, peer, header...).Code, " ")
		}
		return strings.TrimSpace(b.String())
	}
	const three = "200 200 200 429"
	if got := codes(withAuth, 4, "POST", "/orders", "192.0.2.10:1", "X-Test-User", "alice"); got != three {
		t.Errorf("alice: %s", got)
	}
	// bob from the same address has his own budget.
	if got := codes(withAuth, 1, "POST", "/orders", "192.0.2.10:1", "X-Test-User", "bob"); got != "200" {
		t.Errorf("bob: %s", got)
	}
	// Anonymous callers are keyed by address: not alice's, not each other's.
	if got := codes(withAuth, 4, "POST", "/orders", "192.0.2.11:1"); got != three {
		t.Errorf("anonymous from .11: %s", got)
	}
	if got := codes(withAuth, 1, "POST", "/orders", "192.0.2.12:1"); got != "200" {
		t.Errorf("anonymous from .12: %s", got)
	}
	// API keys: one budget per key, whatever the address.
	if got := codes(h, 4, "GET", "/k", "192.0.2.13:1", "X-API-Key", "key-1"); got != three {
		t.Errorf("key-1: %s", got)
	}
	if got := codes(h, 1, "GET", "/k", "192.0.2.13:1", "X-API-Key", "key-2"); got != "200" {
		t.Errorf("key-2: %s", got)
	}
	// A spoofed X-Forwarded-For from an untrusted peer changes nothing:
	// each request names another address, all are counted against the peer.
	var spoofed strings.Builder
	for i := range 4 {
		fmt.Fprint(&spoofed, do(h, "GET", "/ip", "192.0.2.14:1", "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i)).Code, " ")
	}
	if got := strings.TrimSpace(spoofed.String()); got != three {
		t.Errorf("spoofing peer: %s", got)
	}
	// Through a trusted proxy, the client named in the header is keyed:
	// two clients behind one proxy are apart.
	if got := codes(h, 4, "GET", "/ip", "10.0.0.1:1", "X-Forwarded-For", "198.51.100.20"); got != three {
		t.Errorf("client .20 via the proxy: %s", got)
	}
	if got := codes(h, 1, "GET", "/ip", "10.0.0.1:1", "X-Forwarded-For", "198.51.100.21"); got != "200" {
		t.Errorf("client .21 via the proxy: %s", got)
	}
	// Global: everyone shares one budget.
	var global strings.Builder
	for i := range 4 {
		fmt.Fprint(&global, do(h, "GET", "/g", fmt.Sprintf("192.0.2.%d:1", 100+i)).Code, " ")
	}
	if got := strings.TrimSpace(global.String()); got != three {
		t.Errorf("global: %s", got)
	}
	// The keys the server holds, as the middleware names them.
	c := l.Client()
	for _, key := range []string{"t:u:alice", "t:ip:192.0.2.11", "t:ip:192.0.2.14", "t:ip:198.51.100.20", "t:global", "t:k:" + hash("key-1")} {
		if d, err := c.Peek(context.Background(), key, "orders", 1); err != nil || d.Remaining != 0 {
			t.Errorf("key %s: %+v %v; want exhausted", key, d, err)
		}
	}
}

func TestSeveralRulesAreAllOrNothing(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, serverRules)
	l := start(t, p.Addr, Config{
		Endpoints: []Endpoint{{Pattern: "POST /upload", Rules: []string{"items", "tenant"}, Scope: ScopeGlobal}},
		Default:   &Endpoint{Unlimited: true},
	})
	windowsKnown(t, l)
	h := l.Wrap(ok)
	w := do(h, "POST", "/upload", "192.0.2.3:1")
	if w.Code != 200 || w.Header().Get("Ratelimit-Policy") != `"items";q=5;w=86400, "tenant";q=1;w=86400` ||
		w.Header().Get("Ratelimit") != `"items";r=4;t=`+w.Header().Get("X-Ratelimit-Reset")+`, "tenant";r=0;t=`+w.Header().Get("X-Ratelimit-Reset") {
		t.Fatalf("first: %d %v", w.Code, w.Header())
	}
	w = do(h, "POST", "/upload", "192.0.2.3:1")
	var prob client.Problem
	json.Unmarshal(w.Body.Bytes(), &prob)
	if w.Code != 429 || len(prob.ViolatedPolicies) != 1 || prob.ViolatedPolicies[0] != "tenant" {
		t.Fatalf("second: %d %s", w.Code, w.Body)
	}
	// items was not charged by the refused request.
	if d, _ := l.Client().Peek(context.Background(), "global", "items", 1); d.Remaining != 4 {
		t.Fatalf("items remaining %d after a refused request, want 4", d.Remaining)
	}
}

// TestReloadUnderLoad swaps between two configurations while requests run:
// each request is decided under one of them entirely (its endpoint's rule
// is a or b, and the response names it), none fails.
func TestReloadUnderLoad(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, serverRules)
	// A generous timeout (see start): this test is about the swap.
	cfgA := Config{Endpoints: []Endpoint{{Pattern: "GET /x", Rules: []string{"a"}}}, Default: &Endpoint{Rules: []string{"api"}}, Timeout: 10 * time.Second}
	cfgB := Config{Endpoints: []Endpoint{{Pattern: "GET /x", Rules: []string{"b"}}}, Default: &Endpoint{Rules: []string{"api"}}, Timeout: 10 * time.Second}
	l := start(t, p.Addr, cfgA)
	h := l.Wrap(ok)
	var sawA, sawB atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				w := do(h, "GET", "/x", fmt.Sprintf("192.0.2.%d:1", 50+g))
				switch rl := w.Header().Get("Ratelimit"); {
				case w.Code != 200:
					t.Errorf("status %d", w.Code)
					return
				case strings.HasPrefix(rl, `"a";`):
					sawA.Add(1)
				case strings.HasPrefix(rl, `"b";`):
					sawB.Add(1)
				default:
					t.Errorf("RateLimit %q", rl)
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(rltest.Deadline)
	for i := 0; i < 200 || sawA.Load() < 10 || sawB.Load() < 10; i++ {
		cfg := cfgA
		if i%2 == 1 {
			cfg = cfgB
		}
		if err := l.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			break
		}
	}
	close(stop)
	wg.Wait()
	if sawA.Load() == 0 || sawB.Load() == 0 {
		t.Fatalf("requests saw a %d times, b %d times", sawA.Load(), sawB.Load())
	}
	// A bad configuration changes nothing.
	if err := l.Reload(Config{Endpoints: []Endpoint{{Pattern: "GET /x", Rules: []string{"a"}}}}); err == nil {
		t.Fatal("a configuration without a default reloaded")
	}
}

func TestMetricsCountDecisions(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, serverRules)
	reg := prometheus.NewRegistry()
	l := start(t, p.Addr, Config{
		Endpoints: []Endpoint{{Pattern: "GET /t", Rules: []string{"tenant"}, Scope: ScopeGlobal}},
		Default:   &Endpoint{Unlimited: true},
	}, WithRegistry(reg))
	h := l.Wrap(ok)
	for range 3 {
		do(h, "GET", "/t", "192.0.2.4:1")
	}
	if a, d := counterValue(l.m.decisions.WithLabelValues("tenant", "allowed")), counterValue(l.m.decisions.WithLabelValues("tenant", "denied")); a != 1 || d != 2 {
		t.Errorf("allowed %v, denied %v", a, d)
	}
	if n := serverCount(t, reg, "rl.allow"); n != 3 {
		t.Errorf("%d RL.ALLOW round trips observed, want 3", n)
	}
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	if _, err := New(rdb, Config{Default: &Endpoint{Unlimited: true}}, WithRegistry(reg)); err == nil {
		t.Error("registering the metrics twice on one registry succeeded")
	}
	// A configuration New refuses leaves the registry as it was.
	fresh := prometheus.NewRegistry()
	if _, err := New(rdb, Config{}, WithRegistry(fresh)); err == nil {
		t.Error("a configuration without a default was accepted")
	}
	if l2, err := New(rdb, Config{Default: &Endpoint{Unlimited: true}}, WithRegistry(fresh)); err != nil {
		t.Errorf("New after a refused configuration: %v", err)
	} else {
		l2.Close(context.Background())
	}
	plain := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer plain.Close()
	if _, err := New(plain, Config{Default: &Endpoint{Unlimited: true}}); err == nil {
		t.Error("a client that ignores context deadlines was accepted")
	}
}

// serverCount is the number of round trips httplimit_server_seconds
// observed for command.
func serverCount(t *testing.T, reg *prometheus.Registry, command string) uint64 {
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
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "command" && lp.GetValue() == command {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}
