package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// These tests serve the Envoy rate limit service from a real rlserver (a
// process, or run() in-process where the race detector should see the
// server) and call it with a real gRPC client.

var grpcInLog = regexp.MustCompile(`msg="rlserver started".* grpc=(127\.0\.0\.1:\d+)`)

func grpcAddrIn(t *testing.T, log string) string {
	t.Helper()
	m := grpcInLog.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no gRPC address in the start-up line:\n%s", log)
	}
	return m[1]
}

func dialGRPC(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// desc builds a request descriptor from key, value pairs.
func desc(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// checkOnly makes d a check: hits_addend 0 charges nothing.
func checkOnly(d *rlv3.RateLimitDescriptor) *rlv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(0)
	return d
}

func ask(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, ds ...*rlv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds})
	if err != nil {
		t.Fatalf("ShouldRateLimit %s %v: %v", domain, ds, err)
	}
	return resp
}

// status is one descriptor status in a few words: "OK 3" (remaining 3),
// "OVER", "OK -" (no limit applied), "OK unlimited".
func status(s *rlsv3.RateLimitResponse_DescriptorStatus) string {
	switch {
	case s.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
		return "OVER"
	case s.GetLimitRemaining() == math.MaxUint32:
		return "OK unlimited"
	case s.GetCurrentLimit() == nil:
		return "OK -"
	}
	return fmt.Sprintf("OK %d", s.GetLimitRemaining())
}

func statuses(r *rlsv3.RateLimitResponse) string {
	var out []string
	for _, s := range r.GetStatuses() {
		out = append(out, status(s))
	}
	return strings.Join(out, ", ")
}

// clearOfWindowEnd makes sure a fixed window of the descriptor d does not
// end within the next margin (the time a scenario takes, with room): if it
// would, it waits for the next window. The counts a test expects are then
// all in one window; no assertion watches a window roll.
func clearOfWindowEnd(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, d *rlv3.RateLimitDescriptor, margin time.Duration) {
	t.Helper()
	r := ask(t, c, domain, checkOnly(d))
	left := r.GetStatuses()[0].GetDurationUntilReset().AsDuration()
	if left < margin {
		t.Logf("the window ends in %v: waiting for the next one", left)
		time.Sleep(left + 100*time.Millisecond)
	}
}

// managedRule returns the name of the rule the Envoy configuration made for
// a descriptor, from RL.RULE LIST: the one whose readable part is
// domain.statsKey.
func managedRule(t *testing.T, rdb *redis.Client, domain, statsKey string) string {
	t.Helper()
	list, err := rdb.Do(context.Background(), "RL.RULE", "LIST").Slice()
	if err != nil {
		t.Fatal(err)
	}
	prefix := "envoy:" + domain + "." + statsKey + ":"
	for _, r := range list {
		fields := r.([]any)
		if name := fields[1].(string); strings.HasPrefix(name, prefix) {
			return name
		}
	}
	t.Fatalf("no rule %s… in RL.RULE LIST: %v", prefix, list)
	return ""
}

// extConfig exercises rlserver's extensions: every algorithm, windows that
// are no unit, an all_or_nothing domain and, for contrast, the same limits
// charged one by one.
const extConfig = `
domain: ext
descriptors:
  - key: alg
    value: fixed_window
    rate_limit: {algorithm: fixed_window, requests_per_unit: 3, window: 90m}
  - key: alg
    value: sliding_counter
    rate_limit: {algorithm: sliding_counter, requests_per_unit: 3, window: 90m}
  - key: alg
    value: sliding_log
    rate_limit: {algorithm: sliding_log, requests_per_unit: 3, window: 90m}
  - key: alg
    value: token_bucket
    rate_limit: {algorithm: token_bucket, requests_per_unit: 3, window: 90m}
  - key: alg
    value: leaky_bucket
    rate_limit: {algorithm: leaky_bucket, requests_per_unit: 3, window: 90m}
  - key: shared
    rate_limit: {algorithm: token_bucket, requests_per_unit: 5, window: 24h}
  - key: path
    value: /api/*
    share_threshold: true
    rate_limit: {algorithm: token_bucket, requests_per_unit: 4, window: 24h}
`

const groupConfig = `
domain: %s
all_or_nothing: %v
descriptors:
  - key: few
    rate_limit: {algorithm: token_bucket, requests_per_unit: 1, window: 24h}
  - key: many
    rate_limit: {algorithm: token_bucket, requests_per_unit: 5, window: 24h}
`

// writeEnvoyDir writes envoyproxy/ratelimit's example configuration
// (testdata/envoy/examples/example.yaml, Apache-2.0, see
// testdata/envoy/README.md) unchanged, and the extension and group
// configurations, into a directory for --envoy-config.
func writeEnvoyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	example, err := os.ReadFile("../../testdata/envoy/examples/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"example.yaml": string(example),
		"ext.yaml":     extConfig,
		"aon.yaml":     fmt.Sprintf(groupConfig, "aon", true),
		"each.yaml":    fmt.Sprintf(groupConfig, "each", false),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestEnvoyServesExampleConfig runs envoyproxy/ratelimit's example
// configuration, unchanged, through a real rlserver process: limits,
// replaces, a banned value and its replacement, unlimited, shadow mode, an
// unknown domain, and the counters through RESP.
func TestEnvoyServesExampleConfig(t *testing.T) {
	t.Parallel()
	p := spawn(t, "--grpc-addr", "127.0.0.1:0", "--envoy-config", writeEnvoyDir(t), "--metrics-addr", "127.0.0.1:0")
	c := rlsv3.NewRateLimitServiceClient(dialGRPC(t, grpcAddrIn(t, p.out.String())))
	clearOfWindowEnd(t, c, "rl", desc("foo", "guard"), 10*time.Second)

	steps := []struct {
		name string
		ds   []*rlv3.RateLimitDescriptor
		want []string
	}{
		{"foo 2/min", []*rlv3.RateLimitDescriptor{desc("foo", "a")}, []string{"OK 1", "OK 0", "OVER"}},
		{"unlimited", []*rlv3.RateLimitDescriptor{desc("foo", "a", "bay", "x"), desc("qux", "y")}, []string{"OK unlimited, OK unlimited"}},
		{"banned", []*rlv3.RateLimitDescriptor{desc("foo", "b", "bar", "banned")}, []string{"OVER"}},
		{"banned, replaced", []*rlv3.RateLimitDescriptor{desc("source_cluster", "proxy", "destination_cluster", "override"), desc("foo", "b", "bar", "banned")},
			[]string{"OK 1, OK -", "OK 0, OK -", "OVER, OK -"}},
		{"bkthomps replaced by category", []*rlv3.RateLimitDescriptor{desc("category", "account"), desc("foo", "c", "bar", "bkthomps")},
			[]string{"OK 3, OK -", "OK 2, OK -"}},
		{"bkthomps alone", []*rlv3.RateLimitDescriptor{desc("foo", "c", "bar", "bkthomps")}, []string{"OK 0", "OVER"}},
		{"shadow", []*rlv3.RateLimitDescriptor{desc("foo", "d", "baz", "shady")}, []string{"OK 2", "OK 1", "OK 0", "OK 0", "OK 0"}},
		{"depth 3 matches nothing", []*rlv3.RateLimitDescriptor{desc("foo", "e", "bar", "x", "extra", "y")}, []string{"OK -"}},
	}
	for _, s := range steps {
		for i, want := range s.want {
			if got := statuses(ask(t, c, "rl", s.ds...)); got != want {
				t.Errorf("%s, call %d: %s, want %s", s.name, i+1, got, want)
			}
		}
	}
	if r := ask(t, c, "nowhere", desc("a", "b"), desc("c", "d")); r.GetOverallCode() != rlsv3.RateLimitResponse_OK || statuses(r) != "OK -, OK -" {
		t.Errorf("unknown domain: %v", r)
	}
	m := scrape(t, "http://"+p.metrics+"/metrics")
	if v := m[`rl_envoy_shadow_denied_total{descriptor="foo.baz_shady",domain="rl"}`]; v != 2 {
		t.Errorf("rl_envoy_shadow_denied_total for foo.baz_shady = %v, want 2 (metrics: %v)", v, m)
	}
	if m[`rl_grpc_requests_total{code="OK"}`] < 10 {
		t.Errorf("rl_grpc_requests_total: %v", m)
	}

	// The counter foo=a spent is the one RL.PEEK reads.
	rdb := p.client(t)
	rule := managedRule(t, rdb, "rl", "foo")
	if v := peek(t, rdb, "rl|foo=a", rule); v[0] != int64(0) || v[2] != int64(0) {
		t.Errorf("RL.PEEK rl|foo=a %s: %v, want denied with 0 left", rule, v)
	}
	info, err := rdb.Do(context.Background(), "RL.INFO").Text()
	if err != nil || !strings.Contains(info, "# Grpc\r\nrl_grpc_enabled:1\r\n") || !strings.Contains(info, "rl_envoy_domains:4\r\n") ||
		!regexp.MustCompile(`rl_grpc_requests_total:[1-9]\d`).MatchString(info) {
		t.Errorf("RL.INFO's grpc section: %v\n%s", err, info)
	}
	// The operator cannot change the configuration's rules.
	if err := rdb.Do(context.Background(), "RL.RULE", "SET", rule, "fixed_window", "100", "1m").Err(); err == nil ||
		!strings.Contains(err.Error(), "reserved") {
		t.Errorf("RL.RULE SET of %s: %v", rule, err)
	}
}

// TestEnvoyExtensionsAndRESP covers rlserver's extensions through a real
// process: each algorithm, a window that is no unit, all_or_nothing against
// the default, and one counter reached from gRPC and RL.ALLOW alike.
func TestEnvoyExtensionsAndRESP(t *testing.T) {
	t.Parallel()
	p := spawn(t, "--grpc-addr", "127.0.0.1:0", "--envoy-config", writeEnvoyDir(t))
	c := rlsv3.NewRateLimitServiceClient(dialGRPC(t, grpcAddrIn(t, p.out.String())))
	clearOfWindowEnd(t, c, "ext", desc("alg", "fixed_window"), 30*time.Second)
	for _, alg := range []string{"fixed_window", "sliding_counter", "sliding_log", "token_bucket", "leaky_bucket"} {
		var got []string
		for range 4 {
			got = append(got, statuses(ask(t, c, "ext", desc("alg", alg))))
		}
		if strings.Join(got, "; ") != "OK 2; OK 1; OK 0; OVER" {
			t.Errorf("%s: %v", alg, got)
		}
	}
	lim := ask(t, c, "ext", checkOnly(desc("alg", "fixed_window"))).GetStatuses()[0].GetCurrentLimit()
	if lim.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE || lim.GetUnitMultiplier().GetValue() != 90 || lim.GetRequestsPerUnit() != 3 {
		t.Errorf("current_limit of a 90m window: %v", lim)
	}

	// all_or_nothing: the second request is refused and charges nothing;
	// the same limits without it charge many although few is over.
	for _, tc := range []struct{ domain, manyLeft string }{{"aon", "OK 4"}, {"each", "OK 3"}} {
		ask(t, c, tc.domain, desc("few", "u"), desc("many", "u"))
		if r := ask(t, c, tc.domain, desc("few", "u"), desc("many", "u")); r.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Errorf("%s: second request %s, want OVER_LIMIT", tc.domain, statuses(r))
		}
		if got := statuses(ask(t, c, tc.domain, checkOnly(desc("many", "u")))); got != tc.manyLeft {
			t.Errorf("%s: many has %s, want %s", tc.domain, got, tc.manyLeft)
		}
	}

	// A shared wildcard, the request's hits_addend, a request's own limit.
	if got := statuses(ask(t, c, "ext", desc("path", "/api/a"), desc("path", "/api/b"))); got != "OK 3, OK 2" {
		t.Errorf("share_threshold wildcard: %s, want OK 3, OK 2", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	r, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "ext", HitsAddend: 3, Descriptors: []*rlv3.RateLimitDescriptor{desc("shared", "h")}})
	if err != nil || statuses(r) != "OK 2" {
		t.Errorf("hits_addend 3 of 5: %v %v", statuses(r), err)
	}
	override := func() *rlv3.RateLimitDescriptor {
		d := desc("nomatch", "h1")
		d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_HOUR}
		return d
	}
	clearOfWindowEnd(t, c, "ext", override(), 10*time.Second)
	if got := statuses(ask(t, c, "ext", override())); got != "OK 2" {
		t.Errorf("a request's own limit of 3/hour: %s, want OK 2", got)
	}

	// One counter, two doors: RL.ALLOW spends what gRPC sees and back.
	rdb := p.client(t)
	rule := managedRule(t, rdb, "ext", "shared")
	ask(t, c, "ext", desc("shared", "k"))
	v, err := rdb.Do(context.Background(), "RL.ALLOW", "ext|shared=k", rule, 2).Slice()
	if err != nil || v[0] != int64(1) || v[2] != int64(2) {
		t.Fatalf("RL.ALLOW after one gRPC call: %v %v, want allowed with 2 left", v, err)
	}
	if got := statuses(ask(t, c, "ext", desc("shared", "k"))); got != "OK 1" {
		t.Errorf("gRPC after RL.ALLOW: %s, want OK 1", got)
	}
}

// TestEnvoyIsExactUnderConcurrency: 64 concurrent calls on one descriptor
// with a 24 h fixed window admit exactly the limit. The server runs
// in-process, so the race detector sees its side too.
func TestEnvoyIsExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "envoy.yaml")
	os.WriteFile(cfg, []byte("domain: hot\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 200}\n"), 0o644)
	_, out := startRunWith(t, nil, "--grpc-addr", "127.0.0.1:0", "--envoy-config", cfg)
	addr := grpcAddrIn(t, out.String())
	clients := make([]rlsv3.RateLimitServiceClient, 8)
	for i := range clients {
		clients[i] = rlsv3.NewRateLimitServiceClient(dialGRPC(t, addr))
	}
	clearOfWindowEnd(t, clients[0], "hot", desc("k", "v"), time.Minute)
	const workers, each = 64, 8 // 512 calls for 200 admissions
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			c := clients[w%len(clients)]
			for range each {
				ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
				r, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "hot", Descriptors: []*rlv3.RateLimitDescriptor{desc("k", "v")}})
				cancel()
				switch {
				case err != nil:
					t.Error(err)
					return
				case r.GetOverallCode() == rlsv3.RateLimitResponse_OK:
					admitted.Add(1)
				default:
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 200 || denied.Load() != workers*each-200 {
		t.Fatalf("%d admitted, %d denied; want exactly 200 admitted of %d", admitted.Load(), denied.Load(), workers*each)
	}
}

// configMap lays out a directory as a Kubernetes ConfigMap volume does:
// the files live in a timestamped directory, ..data links to it, and each
// visible name links through ..data. update swaps ..data atomically.
type configMap struct {
	t   *testing.T
	dir string
	gen int
}

func newConfigMap(t *testing.T, files map[string]string) *configMap {
	cm := &configMap{t: t, dir: t.TempDir()}
	cm.update(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(cm.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return cm
}

func (cm *configMap) update(files map[string]string) {
	cm.gen++
	ts := fmt.Sprintf("..2026_11_30_10_00_%02d.%d", cm.gen, cm.gen)
	if err := os.Mkdir(filepath.Join(cm.dir, ts), 0o755); err != nil {
		cm.t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(cm.dir, ts, name), []byte(text), 0o644); err != nil {
			cm.t.Fatal(err)
		}
	}
	tmp := filepath.Join(cm.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		cm.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(cm.dir, "..data")); err != nil {
		cm.t.Fatal(err)
	}
}

// limitOf reads the configured limit of d without charging it.
func limitOf(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, d *rlv3.RateLimitDescriptor) (limit, remaining uint32) {
	s := ask(t, c, domain, checkOnly(d)).GetStatuses()[0]
	return s.GetCurrentLimit().GetRequestsPerUnit(), s.GetLimitRemaining()
}

// reloaded runs change (a file update) and waits for the loader to log its
// outcome: one more "loaded" line, or with failed, one more "not loaded".
func reloaded(t *testing.T, out *syncBuffer, failed bool, change func()) {
	t.Helper()
	line := `msg="Envoy configuration loaded"`
	if failed {
		line = `msg="Envoy configuration not loaded; keeping the current one"`
	}
	n := strings.Count(out.String(), line)
	change()
	waitLog(t, out, fmt.Sprintf(`(?s)(%s.*){%d}`, regexp.QuoteMeta(line), n+1))
}

const reloadConfig = "domain: r\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: token_bucket, requests_per_unit: %d, window: 24h}\n"

// TestEnvoyReloadsConfigMapStyle: a ConfigMap update (the ..data link
// swapped) reloads, keeping the spent budget; a bad file keeps the
// configuration in force; a plain file replaced by rename reloads too.
func TestEnvoyReloadsConfigMapStyle(t *testing.T) {
	t.Parallel()
	cm := newConfigMap(t, map[string]string{"r.yaml": fmt.Sprintf(reloadConfig, 5)})
	single := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(single, []byte("domain: s\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 2}\n"), 0o644)
	p := spawn(t, "--grpc-addr", "127.0.0.1:0", "--envoy-config", cm.dir)
	c := rlsv3.NewRateLimitServiceClient(dialGRPC(t, grpcAddrIn(t, p.out.String())))
	k := func() *rlv3.RateLimitDescriptor { return desc("k", "a") }

	ask(t, c, "r", k())
	reloaded(t, p.out, false, func() { cm.update(map[string]string{"r.yaml": fmt.Sprintf(reloadConfig, 7)}) })
	if limit, left := limitOf(t, c, "r", k()); limit != 7 || left != 6 {
		t.Errorf("after raising the limit 5 -> 7 with 1 spent: limit %d, %d left; want 7, 6", limit, left)
	}

	reloaded(t, p.out, true, func() {
		cm.update(map[string]string{"r.yaml": "domain: r\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"})
	})
	if limit, _ := limitOf(t, c, "r", k()); limit != 7 {
		t.Errorf("after a bad file the limit is %d, want 7 still", limit)
	}
	if !strings.Contains(p.out.String(), "invalid rate limit unit 'fortnight'") {
		t.Errorf("the bad file's reason is not logged:\n%s", p.out.String())
	}
	reloaded(t, p.out, false, func() { cm.update(map[string]string{"r.yaml": fmt.Sprintf(reloadConfig, 9)}) })
	if limit, _ := limitOf(t, c, "r", k()); limit != 9 {
		t.Errorf("after the bad file was fixed: limit %d, want 9", limit)
	}
}

// TestEnvoyReloadsAReplacedFile: a single-file configuration replaced by
// rename (as editors and kubectl cp do) reloads, and so does SIGHUP.
func TestEnvoyReloadsAReplacedFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf(reloadConfig, 4)), 0o644)
	hup := make(chan os.Signal, 1)
	_, out := startRunWith(t, hup, "--grpc-addr", "127.0.0.1:0", "--envoy-config", path)
	c := rlsv3.NewRateLimitServiceClient(dialGRPC(t, grpcAddrIn(t, out.String())))
	k := func() *rlv3.RateLimitDescriptor { return desc("k", "b") }
	if limit, _ := limitOf(t, c, "r", k()); limit != 4 {
		t.Fatalf("limit %d, want 4", limit)
	}
	reloaded(t, out, false, func() {
		tmp := path + ".tmp"
		os.WriteFile(tmp, []byte(fmt.Sprintf(reloadConfig, 6)), 0o644)
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	})
	if limit, _ := limitOf(t, c, "r", k()); limit != 6 {
		t.Errorf("after the file was replaced: limit %d, want 6", limit)
	}

	// A bad file moved in (one file event, so one reload), then SIGHUP: a
	// second refusal can only come from the signal, since a configuration
	// that fails is re-read in full at every reload.
	reloaded(t, out, true, func() {
		tmp := filepath.Join(t.TempDir(), "bad.yaml")
		os.WriteFile(tmp, []byte("domain: r\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644)
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	})
	reloaded(t, out, true, func() { hup <- unix.SIGHUP })
	if limit, _ := limitOf(t, c, "r", k()); limit != 6 {
		t.Errorf("after a bad file and SIGHUP: limit %d, want 6 still", limit)
	}
}

// TestEnvoyTLSHealthAndReflection: the gRPC port takes the --tls-*
// settings (a client without a certificate is refused), and serves the
// health service and reflection.
func TestEnvoyTLSHealthAndReflection(t *testing.T) {
	t.Parallel()
	// Both HTTP/2 servers: rlserver's own (the default) and grpc-go's.
	for _, server := range []string{"fast", "grpc-go"} {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			envoyTLSHealthAndReflection(t, server)
		})
	}
}

func envoyTLSHealthAndReflection(t *testing.T, server string) {
	certs := writeCerts(t)
	cfg := filepath.Join(t.TempDir(), "envoy.yaml")
	os.WriteFile(cfg, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 2}\n"), 0o644)
	p := spawn(t, "--grpc-addr", "127.0.0.1:0", "--envoy-config", cfg, "--grpc-server", server,
		"--tls-cert", filepath.Join(certs, "server.pem"), "--tls-key", filepath.Join(certs, "server-key.pem"), "--tls-ca", filepath.Join(certs, "ca.pem"))
	addr := grpcAddrIn(t, p.out.String())
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(certs, "ca.pem"))
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, "client.pem"), filepath.Join(certs, "client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	withCert := dialGRPC(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}})))
	if got := statuses(ask(t, rlsv3.NewRateLimitServiceClient(withCert), "d", desc("k", "v"))); got != "OK 1" {
		t.Errorf("over TLS: %s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	for _, name := range []string{"", "ratelimit", "envoy.service.ratelimit.v3.RateLimitService"} {
		h, err := healthpb.NewHealthClient(withCert).Check(ctx, &healthpb.HealthCheckRequest{Service: name})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v %v", name, h, err)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(withCert).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	ref, err := stream.Recv()
	if err != nil || !strings.Contains(fmt.Sprint(ref.GetListServicesResponse()), "envoy.service.ratelimit.v3.RateLimitService") {
		t.Errorf("reflection's services: %v %v", ref, err)
	}
	stream.CloseSend()

	noCert := dialGRPC(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	short, cancelShort := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShort()
	if _, err := rlsv3.NewRateLimitServiceClient(noCert).ShouldRateLimit(short, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*rlv3.RateLimitDescriptor{desc("k", "v")}}); err == nil {
		t.Error("a client without a certificate was served")
	}
}

// TestEnvoyFlags: the settings that go together, protected mode for the
// gRPC port, and a bad configuration failing the start.
func TestEnvoyFlags(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644)
	good := filepath.Join(t.TempDir(), "good.yaml")
	os.WriteFile(good, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1}\n"), 0o644)
	rulesFile := filepath.Join(t.TempDir(), "rules.yaml")
	os.WriteFile(rulesFile, []byte("rules:\n  - {name: \"envoy:mine\", algorithm: token_bucket, limit: 3, window: 1s}\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--grpc-addr", "127.0.0.1:0"}, exitUsage, "--grpc-addr 127.0.0.1:0: needs --envoy-config"},
		{[]string{"--envoy-config", good}, exitUsage, "needs --grpc-addr"},
		{[]string{"--grpc-addr", "0.0.0.0:0", "--envoy-config", good}, exitUsage, "gRPC clients are not authenticated"},
		{[]string{"--grpc-addr", "127.0.0.1:0", "--envoy-config", bad}, exitFail, "invalid rate limit unit 'fortnight'"},
		{[]string{"--grpc-addr", "127.0.0.1:0", "--envoy-config", good, "--rules", rulesFile}, exitFail, "names starting with 'envoy:' are reserved"},
	} {
		code, _, stderr := cli(t, nil, append([]string{"--addr", "127.0.0.1:0", "--data-dir", ""}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", tc.args, code, tc.code, tc.want, stderr)
		}
	}
}

// TestEnvoyCountersSurviveARestart: the Envoy configuration's counters are
// in the snapshot, and an authoritative rules file neither deletes them at
// the restart nor on its reload.
func TestEnvoyCountersSurviveARestart(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "envoy.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(reloadConfig, 5)), 0o644)
	rulesFile := filepath.Join(t.TempDir(), "rules.yaml")
	os.WriteFile(rulesFile, []byte("rules:\n  - {name: mine, algorithm: token_bucket, limit: 3, window: 1s}\n"), 0o644)
	args := []string{"--data-dir", data, "--rules", rulesFile, "--rules-authoritative", "--grpc-addr", "127.0.0.1:0", "--envoy-config", cfg}
	k := desc("k", "kept")

	p := spawn(t, args...)
	c := rlsv3.NewRateLimitServiceClient(dialGRPC(t, grpcAddrIn(t, p.out.String())))
	ask(t, c, "r", k)
	ask(t, c, "r", k)
	if err := p.client(t).Do(context.Background(), "RL.RULE", "RELOAD").Err(); err != nil {
		t.Fatal(err)
	}
	if got := statuses(ask(t, c, "r", checkOnly(desc("k", "kept")))); got != "OK 3" {
		t.Fatalf("after an authoritative RL.RULE RELOAD: %s, want OK 3", got)
	}
	sigterm(t, p)

	p = spawn(t, args...)
	c = rlsv3.NewRateLimitServiceClient(dialGRPC(t, grpcAddrIn(t, p.out.String())))
	if got := statuses(ask(t, c, "r", k)); got != "OK 2" {
		t.Fatalf("after the restart: %s, want OK 2 (3 spent of 5)", got)
	}
}
