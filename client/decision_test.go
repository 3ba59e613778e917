package client

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestParseDecisionRESP2AndRESP3(t *testing.T) {
	want := Decision{
		Allowed: true, Limit: 10, Remaining: 7, RetryAfter: 0,
		ResetAfter: 1500 * time.Millisecond, Delay: 200 * time.Millisecond, Rule: "api",
	}
	resp2 := []any{int64(1), int64(10), int64(7), int64(0), int64(1500), int64(200)}
	resp3 := map[any]any{
		"allowed": int64(1), "limit": int64(10), "remaining": int64(7),
		"retry_after_ms": int64(0), "reset_after_ms": int64(1500), "delay_ms": int64(200),
	}
	for name, v := range map[string]any{"resp2": resp2, "resp3": resp3} {
		got, err := parseDecision(v, "api")
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, want)
		}
	}
	for _, bad := range []any{
		[]any{int64(1), int64(2)},
		[]any{int64(1), int64(10), int64(7), "x", int64(0), int64(0)},
		map[any]any{"allowed": int64(1)},
		"OK",
	} {
		if _, err := parseDecision(bad, "api"); err == nil {
			t.Errorf("%v parsed without an error", bad)
		}
	}
}

func TestParseGrantSixOrSevenFields(t *testing.T) {
	seven := []any{int64(20), int64(100), int64(80), int64(0), int64(60000), int64(0), int64(1796000000123456789)}
	g, err := parseGrant(seven, "k", "r")
	if err != nil || g.Granted != 20 || !g.Allowed || g.Remaining != 80 || g.At != 1796000000123456789 || g.Key != "k" || g.Rule != "r" {
		t.Fatalf("seven fields: %+v, %v", g, err)
	}
	none := map[any]any{
		"granted": int64(0), "limit": int64(100), "remaining": int64(0), "retry_after_ms": int64(250),
		"reset_after_ms": int64(60000), "delay_ms": int64(0), "granted_at_ns": int64(5),
	}
	g, err = parseGrant(none, "k", "r")
	if err != nil || g.Granted != 0 || g.Allowed || g.RetryAfter != 250*time.Millisecond || g.At != 5 {
		t.Fatalf("RESP3 refusal: %+v, %v", g, err)
	}
	g, err = parseGrant(seven[:6], "k", "r")
	if err != nil || g.Granted != 20 || g.At != 0 {
		t.Fatalf("six fields: %+v, %v", g, err)
	}
}

func TestParseGroup(t *testing.T) {
	pairs := []Pair{{"u:1", "user"}, {"t:a", "tenant"}}
	d := func(allowed, remaining int64) []any {
		return []any{allowed, int64(5), remaining, int64(0), int64(1000), int64(0)}
	}
	resp2 := []any{int64(0), d(1, 4), d(0, 0)}
	g, err := parseGroup(resp2, pairs)
	if err != nil || g.Allowed || len(g.Decisions) != 2 || !g.Decisions[0].Allowed || g.Decisions[1].Allowed ||
		g.Decisions[0].Rule != "user" || g.Decisions[1].Rule != "tenant" {
		t.Fatalf("resp2: %+v, %v", g, err)
	}
	m := func(allowed int64) map[any]any {
		return map[any]any{"allowed": allowed, "limit": int64(5), "remaining": int64(4),
			"retry_after_ms": int64(0), "reset_after_ms": int64(0), "delay_ms": int64(0)}
	}
	resp3 := map[any]any{"allowed": int64(1), "decisions": []any{m(1), m(1)}}
	if g, err := parseGroup(resp3, pairs); err != nil || !g.Allowed || len(g.Decisions) != 2 {
		t.Fatalf("resp3: %+v, %v", g, err)
	}
	if _, err := parseGroup([]any{int64(1), d(1, 1)}, pairs); err == nil {
		t.Fatal("one decision for two pairs parsed")
	}
}

func TestParseRule(t *testing.T) {
	resp2 := []any{"name", "burst", "algorithm", "token_bucket", "limit", int64(10), "window", "1s", "burst", int64(20)}
	r, err := parseRule(resp2)
	if err != nil || r != (RuleInfo{"burst", "token_bucket", 10, time.Second, 20}) {
		t.Fatalf("%+v, %v", r, err)
	}
	if r.Capacity() != 20 || r.PolicyWindow() != 2*time.Second {
		t.Errorf("capacity %d, policy window %v; want 20 per 2s", r.Capacity(), r.PolicyWindow())
	}
	fixed := RuleInfo{"api", "fixed_window", 100, time.Minute, 0}
	if fixed.Capacity() != 100 || fixed.PolicyWindow() != time.Minute {
		t.Errorf("fixed window: %d per %v", fixed.Capacity(), fixed.PolicyWindow())
	}
}

// redisErr is an error reply as go-redis returns one.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

func TestClassify(t *testing.T) {
	var _ redis.Error = redisErr("")
	cases := []struct {
		reply string
		is    error
		check func(error) bool
	}{
		{"ERR unknown rule 'nope'", ErrMisconfigured, func(err error) bool {
			var u *UnknownRuleError
			return errors.As(err, &u) && u.Rule == "nope"
		}},
		{"ERR cost 11 exceeds the capacity 10 of rule 'burst'; such a request could never be allowed", ErrMisconfigured, func(err error) bool {
			var c *CostError
			return errors.As(err, &c) && *c == CostError{Cost: 11, Capacity: 10, Rule: "burst"}
		}},
		{"ERR invalid cost '0': must be a positive integer", ErrMisconfigured, func(err error) bool {
			var c *CostError
			return errors.As(err, &c) && *c == CostError{Cost: 0}
		}},
		{"ERR unknown command 'RL.ACQUIRE', with args beginning with: ", ErrMisconfigured, nil},
		{"ERR wrong number of arguments for 'rl.allow' command", ErrMisconfigured, nil},
		{"LOADING server is loading", ErrUnavailable, nil},
		{"ERR max keys reached: the key limit (--maxkeys) is full and --maxkeys-policy is reject", nil, func(err error) bool {
			var s *ServerError
			return errors.As(err, &s) && !errors.Is(err, ErrMisconfigured) && !errors.Is(err, ErrUnavailable)
		}},
	}
	for _, c := range cases {
		err := classify(redisErr(c.reply))
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%q: %v is not %v", c.reply, err, c.is)
		}
		if c.check != nil && !c.check(err) {
			t.Errorf("%q: %#v", c.reply, err)
		}
	}
	if err := classify(fmt.Errorf("dial tcp: connection refused")); !errors.Is(err, ErrUnavailable) {
		t.Errorf("network error: %v", err)
	}
}
