package envoy_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/rlserver/rlserver/internal/envoy"
)

// steps runs requests in order, each expected to answer want (show's form),
// moving the clock by the step's advance first.
type step struct {
	advance time.Duration
	req     *rlsv3.RateLimitRequest
	want    string
}

func (h *harness) run(steps []step) {
	h.t.Helper()
	for i, s := range steps {
		h.clock.Add(s.advance)
		if got := h.call(s.req); got != s.want {
			h.t.Errorf("step %d (t0+%v): got\n  %s\nwant\n  %s", i, h.clock.Now().Sub(t0), got, s.want)
		}
	}
}

// TestEachAlgorithm: each of the five algorithms answers through the
// Envoy API with its own remaining counts and times.
func TestEachAlgorithm(t *testing.T) {
	h := newHarness(t, `domain: algo
descriptors:
  - key: fixed_window
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: token_bucket
    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 3}
  - key: leaky_bucket
    rate_limit: {algorithm: leaky_bucket, unit: minute, requests_per_unit: 3}
  - key: sliding_log
    rate_limit: {algorithm: sliding_log, unit: minute, requests_per_unit: 3}
  - key: sliding_counter
    rate_limit: {algorithm: sliding_counter, unit: minute, requests_per_unit: 3}
`)
	r := func(k string) *rlsv3.RateLimitRequest { return request("algo", desc(k, "x")) }
	// Three pass at t0, the fourth is over; then each recovers its own way.
	for _, c := range []struct {
		alg   string
		after []string // rem and reset of the 1st..3rd, then the 4th's status
		later step     // the first request that passes again
	}{
		{"fixed_window", []string{"rem=2 reset=1m0s", "rem=1 reset=1m0s", "rem=0 reset=1m0s", "OVER"},
			step{60 * time.Second, nil, "OK [OK 3/MINUTE rem=2 reset=1m0s]"}},
		// A token every 20 s: the reset is the time to refill completely.
		{"token_bucket", []string{"rem=2 reset=20s", "rem=1 reset=40s", "rem=0 reset=1m0s", "OVER"},
			step{20 * time.Second, nil, "OK [OK 3/MINUTE rem=0 reset=1m0s]"}},
		{"leaky_bucket", []string{"rem=2 reset=20s", "rem=1 reset=40s", "rem=0 reset=1m0s", "OVER"},
			step{20 * time.Second, nil, "OK [OK 3/MINUTE rem=0 reset=1m0s]"}},
		// Entries age out one window after they were admitted.
		{"sliding_log", []string{"rem=2 reset=1m0s", "rem=1 reset=1m0s", "rem=0 reset=1m0s", "OVER"},
			step{60 * time.Second, nil, "OK [OK 3/MINUTE rem=2 reset=1m0s]"}},
		// The previous window weighs (60-e)/60: 3 units leave room for
		// one more once e ≥ 20 s into the next window.
		{"sliding_counter", []string{"rem=2 reset=2m0s", "rem=1 reset=2m0s", "rem=0 reset=2m0s", "OVER"},
			step{80 * time.Second, nil, "OK [OK 3/MINUTE rem=0 reset=1m40s]"}},
	} {
		t.Run(c.alg, func(t *testing.T) {
			h.t = t
			h.clock.Set(t0)
			for i, want := range c.after {
				got := h.call(r(c.alg))
				if i < 3 {
					want = "OK [OK 3/MINUTE " + want + "]"
				}
				if !strings.HasPrefix(got, want) || i == 3 && !strings.HasPrefix(got, "OVER_LIMIT [OVER_LIMIT 3/MINUTE rem=0") {
					t.Errorf("call %d: got %s, want %s", i+1, got, want)
				}
			}
			h.clock.Add(c.later.advance - time.Nanosecond)
			if got := h.call(r(c.alg)); !strings.HasPrefix(got, "OVER_LIMIT") {
				t.Errorf("a nanosecond early: %s", got)
			}
			h.clock.Add(time.Nanosecond)
			if got := h.call(r(c.alg)); got != c.later.want {
				t.Errorf("after %v: got %s, want %s", c.later.advance, got, c.later.want)
			}
		})
	}
}

// TestWindowAndBurst: rlserver's window and burst extensions reach the
// answers, the window expressed as unit × unit_multiplier.
func TestWindowAndBurst(t *testing.T) {
	h := newHarness(t, `domain: ext
descriptors:
  - key: five_minutes
    rate_limit: {requests_per_unit: 2, window: 5m}
  - key: burst
    rate_limit: {algorithm: token_bucket, requests_per_unit: 1, unit: second, burst: 3}
  - key: subsecond
    rate_limit: {requests_per_unit: 1, window: 250ms}
`)
	h.run([]step{
		{0, request("ext", desc("five_minutes", "a")), "OK [OK 2/MINUTEx5 rem=1 reset=5m0s]"},
		{0, request("ext", desc("five_minutes", "a")), "OK [OK 2/MINUTEx5 rem=0 reset=5m0s]"},
		{0, request("ext", desc("five_minutes", "a")), "OVER_LIMIT [OVER_LIMIT 2/MINUTEx5 rem=0 reset=5m0s]"},
		{0, request("ext", desc("burst", "a")), "OK [OK 1/SECOND rem=2 reset=1s]"},
		{0, request("ext", desc("burst", "a")), "OK [OK 1/SECOND rem=1 reset=2s]"},
		{0, request("ext", desc("burst", "a")), "OK [OK 1/SECOND rem=0 reset=3s]"},
		{0, request("ext", desc("burst", "a")), "OVER_LIMIT [OVER_LIMIT 1/SECOND rem=0 reset=3s]"},
		// 250 ms has no unit; the reset is rounded up to a whole second.
		{0, request("ext", desc("subsecond", "a")), "OK [OK 1/UNKNOWN rem=0 reset=1s]"},
		{250 * time.Millisecond, request("ext", desc("subsecond", "a")), "OK [OK 1/UNKNOWN rem=0 reset=1s]"},
	})
}

// TestHitsAddend: a descriptor's hits_addend wins over the request's, 0
// included (a check that charges nothing); unset, the request's counts,
// at least 1; a cost above the limit is over without charging.
func TestHitsAddend(t *testing.T) {
	h := newHarness(t, "domain: h\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 10}\n")
	r := request("h", desc("k", "v"))
	r.HitsAddend = 5
	h.run([]step{
		{0, r, "OK [OK 10/HOUR rem=5 reset=1h0m0s]"},
		{0, request("h", hits(desc("k", "w"), 2)), "OK [OK 10/HOUR rem=8 reset=1h0m0s]"},
		{0, request("h", hits(desc("k", "w"), 0)), "OK [OK 10/HOUR rem=8 reset=1h0m0s]"},
		{0, request("h", hits(desc("k", "x"), 0)), "OK [OK 10/HOUR rem=10 reset=1h0m0s]"},
		{0, request("h", hits(desc("k", "w"), 100)), "OVER_LIMIT [OVER_LIMIT 10/HOUR rem=0 reset=1h0m0s]"},
		{0, request("h", desc("k", "w")), "OK [OK 10/HOUR rem=7 reset=1h0m0s]"},
		{0, request("h", hits(desc("k", "w"), 7)), "OK [OK 10/HOUR rem=0 reset=1h0m0s]"},
		// A check at exactly the limit is OK with nothing left.
		{0, request("h", hits(desc("k", "w"), 0)), "OK [OK 10/HOUR rem=0 reset=1h0m0s]"},
	})
	// A refund (is_negative_hits) is only a check: nothing is given back.
	neg := hits(desc("k", "w"), 3)
	neg.IsNegativeHits = true
	h.run([]step{{0, request("h", neg), "OK [OK 10/HOUR rem=0 reset=1h0m0s]"}})
}

// TestOverride: a descriptor's own limit replaces matching (if the domain
// is known), under a rule named after its numbers; the counter key is the
// descriptor's, so RL.PEEK finds it.
func TestOverride(t *testing.T) {
	h := newHarness(t, "domain: o\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 10}\n",
		func(o *harnessOpts) { o.svc.MaxOverrides = 3 })
	h.run([]step{
		{0, request("o", override(desc("nomatch", "h1"), 3, typev3.RateLimitUnit_MINUTE, 0)), "OK [OK 3/MINUTE rem=2 reset=1m0s]"},
		{0, request("o", override(desc("nomatch", "h1"), 3, typev3.RateLimitUnit_MINUTE, 0)), "OK [OK 3/MINUTE rem=1 reset=1m0s]"},
		// The override wins over the configured limit of the same key.
		{0, request("o", override(desc("k", "v"), 1, typev3.RateLimitUnit_SECOND, 0)), "OK [OK 1/SECOND rem=0 reset=1s]"},
		{0, request("o", override(desc("k", "v"), 1, typev3.RateLimitUnit_SECOND, 0)), "OVER_LIMIT [OVER_LIMIT 1/SECOND rem=0 reset=1s]"},
		{0, request("o", override(desc("k", "v"), 5, typev3.RateLimitUnit_MINUTE, 10)), "OK [OK 5/MINUTEx10 rem=4 reset=10m0s]"},
		// A limit of 0 denies.
		{0, request("o", override(desc("k", "v"), 0, typev3.RateLimitUnit_DAY, 0)), "OVER_LIMIT [OVER_LIMIT 0/DAY rem=0 reset=16h0m0s]"},
		// An unknown domain ignores the override, as envoyproxy/ratelimit does.
		{0, request("elsewhere", override(desc("k", "v"), 1, typev3.RateLimitUnit_UNKNOWN, 0)), "OK [OK]"},
	})
	if rem := h.peek("o|nomatch=h1", "envoy:override:3:MINUTE"); rem != 1 {
		t.Errorf("RL.PEEK of the override's counter: remaining %d", rem)
	}
	// Three distinct overrides are kept; a fourth is refused.
	_, err := h.do(request("o", override(desc("k", "v"), 7, typev3.RateLimitUnit_MINUTE, 0)))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a fourth override: %v", err)
	}
	// The overrides' rules survive a reload.
	h.writeConfig("config.yaml", "domain: o\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 11}\n")
	if err := h.loader.Reload(); err != nil {
		t.Fatal(err)
	}
	h.run([]step{{0, request("o", override(desc("nomatch", "h1"), 3, typev3.RateLimitUnit_MINUTE, 0)), "OK [OK 3/MINUTE rem=0 reset=1m0s]"}})
}

// TestReplaces is README example 7: a limit named in another matched
// limit's replaces is dropped from that request only.
func TestReplaces(t *testing.T) {
	h := newHarness(t, readTestdata(t, "readme/example07.yaml"))
	both := func() *rlsv3.RateLimitRequest {
		return request("example7", desc("key_1", "value_1", "user", "bkthomps"), desc("key_2", "value_2", "user", "bkthomps"))
	}
	h.run([]step{
		{0, both(), "OK [OK] [OK 10/SECOND rem=9 reset=1s]"},
		{0, request("example7", desc("key_1", "value_1", "user", "bkthomps")), "OK [OK 5/SECOND specific_limit rem=4 reset=1s]"},
		{0, both(), "OK [OK] [OK 10/SECOND rem=8 reset=1s]"},
	})
}

// TestWildcardsAndShareThreshold is README example 11: matches of a shared
// wildcard count on one counter, those of a plain wildcard each on their own.
func TestWildcardsAndShareThreshold(t *testing.T) {
	h := newHarness(t, readTestdata(t, "readme/example11a.yaml"))
	for i := 0; i < 5; i++ {
		h.call(request("example11", desc("files", "files/a.pdf")))
		h.call(request("example11", desc("files", "files/b.csv")))
	}
	h.run([]step{
		{0, request("example11", desc("files", "files/c.txt")), "OVER_LIMIT [OVER_LIMIT 10/HOUR rem=0 reset=1h0m0s]"},
	})
	for i := 0; i < 10; i++ {
		h.call(request("example11", desc("files_no_share", "files_no_share/a.pdf")))
	}
	h.run([]step{
		{0, request("example11", desc("files_no_share", "files_no_share/a.pdf")), "OVER_LIMIT [OVER_LIMIT 10/HOUR rem=0 reset=1h0m0s]"},
		{0, request("example11", desc("files_no_share", "files_no_share/b.csv")), "OK [OK 10/HOUR rem=9 reset=1h0m0s]"},
		{0, request("example11", desc("files_no_share", "other")), "OK [OK]"},
	})
	// The shared counter is the pattern's, visible to RL.PEEK.
	if rem := h.peek("example11|files=files/*", h.ruleOf("example11", "files", "files/z")); rem != 0 {
		t.Errorf("shared counter: remaining %d", rem)
	}
}

// TestShadowAndQuotaMode: over-limit answers become OK; shadow mode counts
// the would-be denials, quota mode drops the reset (3fb7025).
func TestShadowAndQuotaMode(t *testing.T) {
	h := newHarness(t, `domain: s
descriptors:
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
`)
	h.run([]step{
		{0, request("s", desc("shadow", "a")), "OK [OK 1/DAY rem=0 reset=16h0m0s]"},
		{0, request("s", desc("shadow", "a")), "OK [OK 1/DAY rem=0 reset=16h0m0s]"},
		{0, request("s", desc("shadow", "a")), "OK [OK 1/DAY rem=0 reset=16h0m0s]"},
		{0, request("s", desc("quota", "a")), "OK [OK 1/DAY rem=0 reset=16h0m0s]"},
		{0, request("s", desc("quota", "a")), "OK [OK 1/DAY rem=0]"},
	})
	if n := h.counter("rl_envoy_shadow_denied_total", "domain=s", "descriptor=shadow"); n != 2 {
		t.Errorf("rl_envoy_shadow_denied_total %v, want 2", n)
	}
	if n := h.counter("rl_envoy_decisions_total", "domain=s", "descriptor=shadow", "result=over_limit"); n != 2 {
		t.Errorf("over_limit decisions %v, want 2", n)
	}
	if st := h.svc.Stats(); st.ShadowDenied != 2 || st.OverLimit != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestUnlimitedAndZero: an unlimited descriptor answers the largest
// remaining count; a limit of 0 denies every hit, but not a check.
func TestUnlimitedAndZero(t *testing.T) {
	h := newHarness(t, readTestdata(t, "readme/example03.yaml")+"  - key: free\n    rate_limit: {unlimited: true}\n")
	h.run([]step{
		{0, request("edge_proxy_per_ip", desc("free", "x")), fmt.Sprintf("OK [OK rem=%d]", uint32(math.MaxUint32))},
		{0, request("edge_proxy_per_ip", desc("remote_address", "50.0.0.5")), "OVER_LIMIT [OVER_LIMIT 0/SECOND rem=0 reset=1s]"},
		{0, request("edge_proxy_per_ip", hits(desc("remote_address", "50.0.0.5"), 0)), "OK [OK 0/SECOND rem=0 reset=1s]"},
		{0, request("edge_proxy_per_ip", desc("remote_address", "50.0.0.1")), "OK [OK 10/SECOND rem=9 reset=1s]"},
	})
}

// TestEveryDescriptorCharged: by default each descriptor is decided and
// charged on its own (envoyproxy/ratelimit's behaviour); with
// all_or_nothing, none is charged when one is over, in one decision.
func TestEveryDescriptorCharged(t *testing.T) {
	const body = `descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: s
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
`
	h := newHarness(t, "domain: each\n"+body)
	h.writeConfig("group.yaml", "domain: group\nall_or_nothing: true\n"+body)
	if err := h.loader.Reload(); err != nil {
		t.Fatal(err)
	}
	ab := func(dom string) *rlsv3.RateLimitRequest { return request(dom, desc("a", "1"), desc("b", "1")) }
	h.run([]step{
		{0, ab("each"), "OK [OK 2/MINUTE rem=1 reset=1m0s] [OK 1/MINUTE rem=0 reset=1m0s]"},
		// b is over; a is charged anyway.
		{0, ab("each"), "OVER_LIMIT [OK 2/MINUTE rem=0 reset=1m0s] [OVER_LIMIT 1/MINUTE rem=0 reset=1m0s]"},
		{0, ab("group"), "OK [OK 2/MINUTE rem=1 reset=1m0s] [OK 1/MINUTE rem=0 reset=1m0s]"},
		// b is over; a is not charged: it reports its budget as it stands.
		{0, ab("group"), "OVER_LIMIT [OK 2/MINUTE rem=1 reset=1m0s] [OVER_LIMIT 1/MINUTE rem=0 reset=1m0s]"},
		{0, request("group", desc("a", "1")), "OK [OK 2/MINUTE rem=0 reset=1m0s]"},
		// A shadow descriptor over its limit does not hold the group back.
		{0, request("group", desc("a", "2"), desc("s", "1")), "OK [OK 2/MINUTE rem=1 reset=1m0s] [OK 1/MINUTE rem=0 reset=1m0s]"},
		{0, request("group", desc("a", "2"), desc("s", "1")), "OK [OK 2/MINUTE rem=0 reset=1m0s] [OK 1/MINUTE rem=0 reset=1m0s]"},
		// A limit of 0, or a cost above a capacity, fails the group at once.
		{0, request("group", desc("a", "3"), desc("zero", "1")), "OVER_LIMIT [OK 2/MINUTE rem=2 reset=1m0s] [OVER_LIMIT 0/MINUTE rem=0 reset=1m0s]"},
		{0, request("group", desc("a", "3"), hits(desc("b", "3"), 2)), "OVER_LIMIT [OK 2/MINUTE rem=2 reset=1m0s] [OVER_LIMIT 1/MINUTE rem=0 reset=1m0s]"},
		// The same descriptor twice is one pair spending both costs.
		{0, request("group", desc("a", "4"), desc("a", "4")), "OK [OK 2/MINUTE rem=0 reset=1m0s] [OK 2/MINUTE rem=0 reset=1m0s]"},
		{0, request("group", desc("a", "5"), desc("a", "5"), desc("a", "5")), "OVER_LIMIT [OVER_LIMIT 2/MINUTE rem=0 reset=1m0s] [OVER_LIMIT 2/MINUTE rem=0 reset=1m0s] [OVER_LIMIT 2/MINUTE rem=0 reset=1m0s]"},
		{0, request("group", desc("a", "5")), "OK [OK 2/MINUTE rem=1 reset=1m0s]"},
	})
	// More than 32 distinct descriptors cannot be one decision.
	var many []*rlv3.RateLimitDescriptor
	for i := 0; i <= envoy.MaxGroup; i++ {
		many = append(many, desc("a", fmt.Sprint("m", i)))
	}
	_, err := h.do(request("group", many...))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "at most 32") {
		t.Errorf("33 descriptors: %v", err)
	}
}

// TestHeaders: each header mode's fields, from the finished statuses.
func TestHeaders(t *testing.T) {
	const body = `descriptors:
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 10, name: per-ip}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: tb
    rate_limit: {algorithm: token_bucket, window: 1m, requests_per_unit: 2}
`
	h := newHarness(t, "domain: none\n"+body)
	h.writeConfig("d03.yaml", "domain: d03\nresponse_headers: draft03\n"+body)
	h.writeConfig("d11.yaml", "domain: d11\nresponse_headers: draft11\n"+body)
	if err := h.loader.Reload(); err != nil {
		t.Fatal(err)
	}
	two := func(dom string) *rlsv3.RateLimitRequest { return request(dom, desc("ip", "1"), desc("user", "u")) }
	h.run([]step{
		{0, two("none"), "OK [OK 10/SECOND per-ip rem=9 reset=1s] [OK 1000/HOUR rem=999 reset=1h0m0s]"},
		// Envoy's DRAFT_VERSION_03 form: the least remaining first, then
		// every limit with its window.
		{0, two("d03"), `OK [OK 10/SECOND per-ip rem=9 reset=1s] [OK 1000/HOUR rem=999 reset=1h0m0s] x-ratelimit-limit: 10, 10;w=1;name="per-ip", 1000;w=3600 x-ratelimit-remaining: 9 x-ratelimit-reset: 1`},
		{0, two("d11"), `OK [OK 10/SECOND per-ip rem=9 reset=1s] [OK 1000/HOUR rem=999 reset=1h0m0s] ratelimit-policy: "per-ip";q=10;w=1, "user";q=1000;w=3600 ratelimit: "per-ip";r=9;t=1, "user";r=999;t=3600`},
		{0, request("d11", desc("tb", "x")), `OK [OK 2/MINUTE rem=1 reset=30s] ratelimit-policy: "tb";q=2;w=60 ratelimit: "tb";r=1;t=30`},
		{0, request("d11", desc("tb", "x")), `OK [OK 2/MINUTE rem=0 reset=1m0s] ratelimit-policy: "tb";q=2;w=60 ratelimit: "tb";r=0;t=60`},
		// Retry-After: a token bucket's next token, not its full refill.
		{0, request("d11", desc("tb", "x")), `OVER_LIMIT [OVER_LIMIT 2/MINUTE rem=0 reset=1m0s] ratelimit-policy: "tb";q=2;w=60 ratelimit: "tb";r=0;t=60 retry-after: 30`},
		{0, request("d03", desc("tb", "y"), hits(desc("tb", "y"), 3)), `OVER_LIMIT [OK 2/MINUTE rem=1 reset=30s] [OVER_LIMIT 2/MINUTE rem=0 reset=30s] x-ratelimit-limit: 2, 2;w=60, 2;w=60 x-ratelimit-remaining: 0 x-ratelimit-reset: 30 retry-after: 30`},
		{0, request("d03", desc("other", "z")), "OK [OK]"},
	})
}

// TestUnknownDomain: one OK status per descriptor, logged once per domain.
func TestUnknownDomain(t *testing.T) {
	h := newHarness(t, "domain: known\n")
	for i := 0; i < 3; i++ {
		h.run([]step{{0, request("nope", desc("a", "b"), desc("c", "d")), "OK [OK] [OK]"}})
	}
	if n := strings.Count(h.logs.String(), "domain=nope"); n != 1 {
		t.Errorf("logged %d times:\n%s", n, h.logs)
	}
	if n := h.counter("rl_envoy_unknown_domain_total"); n != 3 {
		t.Errorf("rl_envoy_unknown_domain_total %v", n)
	}
}

// TestInvalidArguments: malformed requests are InvalidArgument with a
// reason, and the server keeps serving.
func TestInvalidArguments(t *testing.T) {
	h := newHarness(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n",
		func(o *harnessOpts) { o.svc.MaxDescriptors = 4; o.svc.MaxKeyBytes = 100 })
	many := make([]*rlv3.RateLimitDescriptor, 5)
	for i := range many {
		many[i] = desc("k", "v")
	}
	for _, c := range []struct {
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{request("", desc("k", "v")), "rate limit domain must not be empty"},
		{request("d"), "rate limit descriptor list must not be empty"},
		{request("d", many...), "5 descriptors in one request; at most 4 are allowed"},
		{request("d", override(desc("k", "v"), 1, typev3.RateLimitUnit_UNKNOWN, 0)), "descriptor 0: limit override unit UNKNOWN is not one of SECOND, MINUTE, HOUR, DAY, MONTH, YEAR"},
		{request("d", desc("x", "y"), override(desc("k", "v"), 1, typev3.RateLimitUnit(42), 0)), "descriptor 1: limit override unit 42 is not one of"},
		{request("d", override(desc("k", "v"), 1, typev3.RateLimitUnit_YEAR, 2)), "descriptor 0: limit override window 2 × YEAR is longer than 366 days"},
		{request("d", override(desc("k", "v"), 2_000_000_000, typev3.RateLimitUnit_SECOND, 0)), "requests_per_unit 2000000000 is not from 1 to 1000000000"},
		{request("d", desc("k", strings.Repeat("v", 200))), "descriptor 0: its counter key would be 204 bytes; at most 100 are allowed"},
	} {
		_, err := h.do(c.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
			t.Errorf("%v: got %v, want InvalidArgument %q", c.req, err, c.want)
		}
	}
	h.run([]step{{0, request("d", desc("k", "v")), "OK [OK 5/SECOND rem=4 reset=1s]"}})
	if st := h.svc.Stats(); st.Invalid != 8 || st.Requests != 9 {
		t.Errorf("stats %+v", st)
	}
	if n := h.counter("rl_grpc_requests_total", "code=InvalidArgument"); n != 8 {
		t.Errorf("rl_grpc_requests_total{code=InvalidArgument} %v", n)
	}
}

// TestLimiterFailure: a limiter error is Unavailable (Envoy applies its
// failure mode), and the service recovers with the limiter.
func TestLimiterFailure(t *testing.T) {
	failing := &flakyLimiter{}
	h := newHarness(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n",
		func(o *harnessOpts) { failing.Limiter = o.svc.Limiter; o.svc.Limiter = failing })
	failing.fail.Store(true)
	_, err := h.do(request("d", desc("k", "v")))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shard failed") {
		t.Errorf("err %v", err)
	}
	failing.fail.Store(false)
	h.run([]step{{0, request("d", desc("k", "v")), "OK [OK 5/SECOND rem=4 reset=1s]"}})

	// A panic below the handler is answered Internal and logged; the
	// server keeps serving.
	failing.panic.Store(true)
	if _, err := h.do(request("d", desc("k", "v"))); status.Code(err) != codes.Internal {
		t.Errorf("a panic: %v", err)
	}
	failing.panic.Store(false)
	h.run([]step{{0, request("d", desc("k", "v")), "OK [OK 5/SECOND rem=3 reset=1s]"}})
	if !strings.Contains(h.logs.String(), "gRPC handler panicked") || !strings.Contains(h.logs.String(), "a bug in the limiter") {
		t.Errorf("logs:\n%s", h.logs)
	}
}

type flakyLimiter struct {
	envoy.Limiter
	fail, panic atomic.Bool
}

func (f *flakyLimiter) Decide(ctx context.Context, reqs []envoy.Request, all bool) ([]algorithmsDecision, error) {
	if f.panic.Load() {
		panic("a bug in the limiter")
	}
	if f.fail.Load() {
		return nil, fmt.Errorf("shard failed")
	}
	return f.Limiter.Decide(ctx, reqs, all)
}

// TestCountersSharedWithRESP: a descriptor's counter is the (key, rule)
// pair RL.PEEK reads.
func TestCountersSharedWithRESP(t *testing.T) {
	h := newHarness(t, readTestdata(t, "readme/example02.yaml"))
	for i := 0; i < 3; i++ {
		h.call(request("messaging", desc("message_type", "marketing", "to_number", "2061111111")))
	}
	rule := h.ruleOf("messaging", "message_type", "marketing", "to_number", "x")
	if !strings.HasPrefix(rule, "envoy:messaging.message_type_marketing.to_numbe:") {
		t.Errorf("rule %s", rule)
	}
	if rem := h.peek("messaging|message_type=marketing|to_number=2061111111", rule); rem != 2 {
		t.Errorf("RL.PEEK remaining %d, want 2", rem)
	}
}

// TestMetrics: decisions by domain and descriptor (request values only
// where detailed_metric asks, and capped), latency, gRPC codes.
func TestMetrics(t *testing.T) {
	h := newHarness(t, readTestdata(t, "readme/example08.yaml"), func(o *harnessOpts) { o.svc.MaxDetailedSeries = 2 })
	for _, v := range []string{"a", "a", "b", "c", "d"} {
		h.call(request("example8", desc("key1", v)))
	}
	h.call(request("example8", desc("key1", "value1")))
	for _, c := range []struct {
		descriptor string
		want       float64
	}{
		{"key1_a", 2}, {"key1_b", 1},
		{"key1", 2}, // c and d, past the cap of 2 request-valued series
		{"key1_value1", 1},
	} {
		if n := h.counter("rl_envoy_decisions_total", "domain=example8", "descriptor="+c.descriptor, "result=ok"); n != c.want {
			t.Errorf("decisions{descriptor=%s} = %v, want %v", c.descriptor, n, c.want)
		}
	}
	if n := h.counter("rl_grpc_request_duration_seconds"); n != 6 {
		t.Errorf("latency observations %v", n)
	}
	if n := h.counter("rl_grpc_requests_total", "code=OK"); n != 6 {
		t.Errorf("requests{code=OK} %v", n)
	}
	// A reload that removes a descriptor removes its series.
	h.writeConfig("config.yaml", "domain: example8\ndescriptors:\n  - key: key2\n    rate_limit: {unit: minute, requests_per_unit: 10}\n")
	if err := h.loader.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := h.counter("rl_envoy_decisions_total", "domain=example8", "descriptor=key1_value1", "result=ok"); n != 0 {
		t.Errorf("a removed descriptor's series stayed: %v", n)
	}
	if n := h.counter("rl_envoy_config_loads_total"); n != 2 {
		t.Errorf("loads %v", n)
	}
}

// TestConcurrentStreamsExact: 64 concurrent streams on one descriptor with
// a 24 h window admit exactly the limit.
func TestConcurrentStreamsExact(t *testing.T) {
	const limit, streams, perStream = 1000, 64, 40 // 2560 calls for 1000 admissions
	h := newHarness(t, fmt.Sprintf("domain: c\ndescriptors:\n  - key: k\n    rate_limit: {window: 24h, requests_per_unit: %d}\n", limit))
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < perStream; j++ {
				resp, err := h.do(request("c", desc("k", "shared")))
				if err != nil {
					errs <- err
					return
				}
				if resp.OverallCode == rlsv3.RateLimitResponse_OK {
					admitted.Add(1)
				} else {
					denied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if admitted.Load() != limit || denied.Load() != streams*perStream-limit {
		t.Fatalf("admitted %d, denied %d; want exactly %d admitted", admitted.Load(), denied.Load(), limit)
	}
}

// TestTLS: with client certificates required, a client without one is
// refused and a client with one is served.
func TestTLS(t *testing.T) {
	pki := newPKI(t)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{pki.server}, ClientCAs: pki.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	clientTLS := &tls.Config{Certificates: []tls.Certificate{pki.client}, RootCAs: pki.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	h := newHarness(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n", func(o *harnessOpts) {
		o.server.TLS = serverTLS
		o.dial = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(clientTLS))}
	})
	h.run([]step{{0, request("d", desc("k", "v")), "OK [OK 5/SECOND rem=4 reset=1s]"}})

	noCert := clientTLS.Clone()
	noCert.Certificates = nil
	conn, err := grpc.NewClient(h.srv.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(noCert)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, request("d", desc("k", "v"))); status.Code(err) != codes.Unavailable {
		t.Errorf("a client without a certificate: %v", err)
	}
	plain, err := grpc.NewClient(h.srv.Addr().String(), grpc.WithTransportCredentials(insecureCreds()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := rlsv3.NewRateLimitServiceClient(plain).ShouldRateLimit(ctx, request("d", desc("k", "v"))); status.Code(err) != codes.Unavailable {
		t.Errorf("a plain-text client: %v", err)
	}
}

// TestHealthAndReflection: the health service reports SERVING under the
// three names, NOT_SERVING once shutting down; reflection lists the
// service. Under both transports.
func TestHealthAndReflection(t *testing.T) {
	for _, tr := range []envoy.Transport{envoy.TransportFast, envoy.TransportGRPCGo} {
		t.Run(string(tr), func(t *testing.T) { healthAndReflection(t, tr) })
	}
}

func healthAndReflection(t *testing.T, tr envoy.Transport) {
	h := newHarness(t, "domain: d\n", func(o *harnessOpts) { o.server.Transport = tr })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(h.conn)
	for _, name := range []string{"", "envoy.service.ratelimit.v3.RateLimitService", "ratelimit"} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: name})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q: %v %v", name, resp, err)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !strings.Contains(strings.Join(names, " "), "envoy.service.ratelimit.v3.RateLimitService") {
		t.Errorf("reflection lists %v", names)
	}
	stream.CloseSend()

	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := watch.Recv(); err != nil || first.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch: %v %v", first, err)
	}
	done := make(chan error, 1)
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		done <- h.srv.Shutdown(sctx)
	}()
	if next, err := watch.Recv(); err == nil && next.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("during shutdown: %v", next)
	}
	cancel() // ends the watch, so the graceful stop completes
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
}
